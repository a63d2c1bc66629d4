"""Policy and value losses as pure tensor functions.

Every loss takes ``[batch, time]`` tensors and a bool ``action_mask`` (True where the policy
sampled the token) and returns ``(loss, stats)``: a scalar tensor to backpropagate and a dict of
Python floats for logging (the caller adds a namespace such as ``losses/``). Non-action tokens
never contribute to a loss or to its gradient, whatever values they hold.

The policy losses of SAO and the group baselines (DIS, PPO clip, GSPO) are in
``sao_online.learning.losses.policy``; the off-policy corrections (token TIS, sequence-level
masked IS, decoupled PPO, the plain policy gradient) in
``sao_online.learning.losses.corrections``; the critic's loss in
``sao_online.learning.losses.value``. Import them from here (or from ``sao_online.losses``, the
public path). Every policy loss reports the :func:`effective_sample_size` of the weights it
gives the tokens.
"""

from sao_online.learning.losses.common import (
    aggregate_token_losses,
    effective_sample_size,
    masked_mean,
)
from sao_online.learning.losses.corrections import (
    decoupled_ppo_loss,
    masked_is_policy_loss,
    policy_gradient_loss,
    tis_policy_loss,
)
from sao_online.learning.losses.policy import dis_policy_loss, gspo_loss, ppo_clip_loss
from sao_online.learning.losses.value import value_loss

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
