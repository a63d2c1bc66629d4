"""The critic's loss: mean squared error on action tokens, with optional PPO-style clipping."""

from __future__ import annotations

import torch

from sao_online.learning.advantages import check_token_tensors
from sao_online.learning.losses.common import (
    aggregate_token_losses,
    check_finite_on_actions,
    token_fraction,
)

__all__ = ["value_loss"]


def value_loss(
    values: torch.Tensor,
    returns: torch.Tensor,
    action_mask: torch.Tensor,
    old_values: torch.Tensor | None = None,
    clip_range: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Critic loss ``0.5 * mean over action tokens of (values - returns)^2``.

    The 0.5 makes the gradient ``values - returns``. Optional PPO-style value clipping (off by
    default; SAO uses plain MSE): with ``clip_range = c`` and ``old_values`` given, the per-token
    loss is ``0.5 * max((v - R)^2, (old_v + clip(v - old_v, -c, c) - R)^2)``.

    Args:
        values: critic predictions ``[batch, time]`` (with grad).
        returns: value targets ``[batch, time]`` (e.g. from :func:`skip_observation_gae`).
        action_mask: bool ``[batch, time]``; observation tokens have no value target.
        old_values: the critic's predictions when the data was collected (needed for clipping).
        clip_range: positive clip width, or None for no clipping.

    Returns:
        ``(loss, stats)``; stats: ``explained_variance`` (``1 - Var(returns - values) /
        Var(returns)`` over action tokens, population variances; NaN when ``Var(returns)`` is 0
        or there is no action token, since it is undefined there), ``value_mean``,
        ``return_mean``, ``num_action_tokens``, and ``value_clip_fraction`` when clipping.
    """
    check_token_tensors(action_mask, values=values, returns=returns)
    if (clip_range is None) != (old_values is None):
        raise ValueError("value clipping needs both clip_range and old_values (or neither)")
    if clip_range is not None and not clip_range > 0:
        raise ValueError(f"clip_range must be positive, got {clip_range}")
    check_finite_on_actions("returns", returns, action_mask)

    zeros = torch.zeros_like(values)
    targets = torch.where(action_mask, returns.detach(), zeros)
    # Masking the inputs (not only the per-token losses) keeps the gradient on non-action tokens
    # exactly zero even when the critic emits NaN or inf there.
    safe_values = torch.where(action_mask, values, zeros)
    token_losses = 0.5 * (safe_values - targets) ** 2
    stats: dict[str, float] = {}
    if clip_range is not None and old_values is not None:
        check_token_tensors(action_mask, old_values=old_values)
        old = torch.where(action_mask, old_values.detach(), zeros)
        clipped_values = old + (safe_values - old).clamp(-clip_range, clip_range)
        clipped_losses = 0.5 * (clipped_values - targets) ** 2
        stats["value_clip_fraction"] = token_fraction(
            action_mask & (clipped_losses > token_losses).detach(), int(action_mask.sum())
        )
        token_losses = torch.maximum(token_losses, clipped_losses)
    loss = aggregate_token_losses(token_losses, action_mask)

    action_values = values.detach().masked_select(action_mask).to(torch.float64)
    action_returns = targets.masked_select(action_mask).to(torch.float64)
    num_action_tokens = int(action_mask.sum())
    if num_action_tokens:
        return_variance = float(action_returns.var(correction=0))
        residual_variance = float((action_returns - action_values).var(correction=0))
        # Undefined when the returns do not vary (every reward 0 right after a shift); a variance
        # at float32 rounding level of the returns' magnitude counts as none.
        scale = max(1.0, float(action_returns.abs().max()))
        varies = return_variance > (1e-6 * scale) ** 2
        explained = 1.0 - residual_variance / return_variance if varies else float("nan")
        stats.update(
            value_mean=float(action_values.mean()), return_mean=float(action_returns.mean())
        )
    else:
        explained = float("nan")
        stats.update(value_mean=float("nan"), return_mean=float("nan"))
    stats["explained_variance"] = explained
    stats["num_action_tokens"] = float(num_action_tokens)
    return loss, stats
