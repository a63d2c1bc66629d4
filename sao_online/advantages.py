"""Advantage estimators as pure tensor functions: the public path of
``sao_online.learning.advantages``, where they live (with the learning core), e.g.
``from sao_online.advantages import skip_observation_gae, group_advantages``.

Conventions: token tensors have shape ``[batch, time]``; ``action_mask`` is a bool tensor that
is True exactly where the policy sampled the token. Per-episode quantities have shape
``[batch]``.
"""

from sao_online.learning.advantages import *  # noqa: F403  (its __all__: the public names)
from sao_online.learning.advantages import __all__  # noqa: F401
