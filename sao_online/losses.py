"""Policy and value losses as pure tensor functions: the public path of
``sao_online.learning.losses``, where they live (with the learning core), e.g.
``from sao_online.losses import dis_policy_loss, ppo_clip_loss, value_loss``.

Each returns ``(loss, stats)``: a scalar loss tensor and a dict of Python floats for logging.
"""

from sao_online.learning.losses import *  # noqa: F403  (its __all__: the public names)
from sao_online.learning.losses import __all__  # noqa: F401
