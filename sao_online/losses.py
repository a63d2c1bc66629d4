"""Policy and value losses as pure tensor functions: the public path of
``sao_online.learning.losses``, where they live (with the learning core), e.g.
``from sao_online.losses import dis_policy_loss, ppo_clip_loss, value_loss``.

Each returns ``(loss, stats)``: a scalar loss tensor and a dict of Python floats for logging.
"""

from sao_online.learning.losses import (
    aggregate_token_losses,
    decoupled_ppo_loss,
    dis_policy_loss,
    effective_sample_size,
    gspo_loss,
    masked_is_policy_loss,
    masked_mean,
    policy_gradient_loss,
    ppo_clip_loss,
    tis_policy_loss,
    value_loss,
)

__all__ = [
    "aggregate_token_losses",
    "decoupled_ppo_loss",
    "dis_policy_loss",
    "effective_sample_size",
    "gspo_loss",
    "masked_is_policy_loss",
    "masked_mean",
    "policy_gradient_loss",
    "ppo_clip_loss",
    "tis_policy_loss",
    "value_loss",
]
