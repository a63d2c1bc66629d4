"""Methods as compositions of an advantage estimator and a policy objective.

``build_method(config)`` picks one by ``algorithm.name``: a built-in name of :data:`METHODS` or
``MODULE:FACTORY``, a factory of your own with the built-ins' signature
``factory(algorithm_config, max_action_tokens) -> Method``, built from the estimators and
objectives exported here. Adding a variant is adding one small factory, never a branch inside
the learner.

Example (a module ``my_methods.py`` next to your config)::

    from sao_online.algorithms import DoubleSidedIS, Method, RunningMeanAdvantage

    def make_method(cfg, max_action_tokens):
        return Method("sao_window_32", 1, RunningMeanAdvantage(window=32),
                      DoubleSidedIS(cfg.dis_eps_low, cfg.dis_eps_high))

    # algorithm.name: my_methods:make_method   (or --methods sao,my_methods:make_method)

:data:`CORRECTIONS` names the off-policy corrections (``dis``, ``ppo_clip``, ``tis``, ``mis``,
``decoupled``, ``none``); ``CORRECTIONS["tis"](cfg)`` is token TIS with the config's cap, to
pair with any estimator: ``Method("running_mean_tis", 1, RunningMeanAdvantage(cfg.baseline_window),
CORRECTIONS["tis"](cfg))``.
"""

from sao_online.algorithms.base import (
    AdvantageEstimator,
    AdvantageResult,
    Method,
    PolicyObjective,
)
from sao_online.algorithms.baselines import KeyedRunningMeanBaseline, RunningMeanBaseline
from sao_online.algorithms.estimators import (
    CriticGAE,
    GroupNormalized,
    KeyedRunningMeanAdvantage,
    LeaveOneOut,
    RunningMeanAdvantage,
    ZeroAdvantage,
)
from sao_online.algorithms.objectives import (
    DecoupledPPO,
    DoubleSidedIS,
    PlainPolicyGradient,
    PPOClip,
    SequenceMaskedIS,
    SequenceRatio,
    TruncatedIS,
)
from sao_online.algorithms.registry import (
    CORRECTIONS,
    METHODS,
    MethodLoadError,
    build_method,
    is_plugin_method,
    load_method_factory,
    make_method,
)
from sao_online.config.method_names import SINGLE_ROLLOUT_METHODS

__all__ = [
    "CORRECTIONS",
    "METHODS",
    "SINGLE_ROLLOUT_METHODS",
    "AdvantageEstimator",
    "AdvantageResult",
    "CriticGAE",
    "DecoupledPPO",
    "DoubleSidedIS",
    "GroupNormalized",
    "KeyedRunningMeanAdvantage",
    "KeyedRunningMeanBaseline",
    "LeaveOneOut",
    "Method",
    "MethodLoadError",
    "PPOClip",
    "PlainPolicyGradient",
    "PolicyObjective",
    "RunningMeanAdvantage",
    "RunningMeanBaseline",
    "SequenceMaskedIS",
    "SequenceRatio",
    "TruncatedIS",
    "ZeroAdvantage",
    "build_method",
    "is_plugin_method",
    "load_method_factory",
    "make_method",
]
