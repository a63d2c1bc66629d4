"""Methods as compositions of an advantage estimator and a policy objective.

``build_method(config.algorithm)`` picks one by name from :data:`METHODS`; adding a variant is
adding one small factory there, never a branch inside the learner.
"""

from sao_online.algorithms.base import AdvantageResult, Method
from sao_online.algorithms.registry import METHODS, SINGLE_ROLLOUT_METHODS, build_method

__all__ = ["METHODS", "SINGLE_ROLLOUT_METHODS", "AdvantageResult", "Method", "build_method"]
