"""Advantage estimators as pure tensor functions: the public path of
``sao_online.learning.advantages``, where they live (with the learning core), e.g.
``from sao_online.advantages import skip_observation_gae, group_advantages``.

Conventions: token tensors have shape ``[batch, time]``; ``action_mask`` is a bool tensor that
is True exactly where the policy sampled the token. Per-episode quantities have shape
``[batch]``.
"""

from sao_online.learning.advantages import (
    broadcast_to_tokens,
    check_episode_rewards,
    check_token_tensors,
    compute_dtype,
    group_advantages,
    length_adaptive_lambda,
    response_span_mask,
    rloo_advantages,
    skip_observation_gae,
    step_level_values,
    zero_variance_group_fraction,
)

__all__ = [
    "broadcast_to_tokens",
    "check_episode_rewards",
    "check_token_tensors",
    "compute_dtype",
    "group_advantages",
    "length_adaptive_lambda",
    "response_span_mask",
    "rloo_advantages",
    "skip_observation_gae",
    "step_level_values",
    "zero_variance_group_fraction",
]
