"""Policy and value losses as pure tensor functions.

Every loss takes ``[batch, time]`` tensors and a bool ``action_mask`` (True where the policy
sampled the token) and returns ``(loss, stats)``: a scalar tensor to backpropagate and a dict of
Python floats for logging (the caller adds a namespace such as ``losses/``). Non-action tokens
never contribute to a loss or to its gradient, whatever values they hold.
"""

from __future__ import annotations

from typing import Literal

import torch

from sao_online.advantages import check_token_tensors

__all__ = [
    "aggregate_token_losses",
    "dis_policy_loss",
    "gspo_loss",
    "masked_mean",
    "ppo_clip_loss",
    "value_loss",
]

Aggregation = Literal["token_mean", "sequence_mean", "constant_normalizer"]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is True; 0 (still attached to the graph) if none is.

    Entries outside the mask are never read arithmetically, so NaN or inf there is harmless.
    """
    selected = torch.where(mask, values, torch.zeros_like(values))
    return selected.sum() / mask.sum().clamp(min=1)


def _fraction(condition: torch.Tensor, count: int) -> float:
    return float(condition.sum()) / count if count else 0.0


def _k3(log_ratio: torch.Tensor) -> torch.Tensor:
    """k3 estimator ``exp(x) - x - 1`` of KL(sampler || other) from ``x = log other/sampler``."""
    return torch.expm1(log_ratio) - log_ratio


def _check_band(eps_low: float, eps_high: float) -> None:
    if not 0.0 < eps_low <= 1.0:
        raise ValueError(f"eps_low must be in (0, 1], got {eps_low}")
    if not eps_high > 0.0:
        raise ValueError(f"eps_high must be positive, got {eps_high}")


def _check_finite_on_actions(name: str, tensor: torch.Tensor, action_mask: torch.Tensor) -> None:
    if not bool(torch.isfinite(tensor.detach().masked_select(action_mask)).all()):
        raise ValueError(f"{name} has NaN or infinite values on action tokens")


def aggregate_token_losses(
    token_losses: torch.Tensor,
    action_mask: torch.Tensor,
    aggregation: Aggregation = "token_mean",
    max_length: int | None = None,
) -> torch.Tensor:
    """Reduces per-token losses to a scalar.

    Args:
        token_losses: ``[batch, time]``.
        action_mask: bool ``[batch, time]``.
        aggregation: ``"token_mean"``: sum over all action tokens / their number in the batch
            (DAPO, SAO). ``"sequence_mean"``: mean over each row's action tokens, then over the
            rows that have any (original GRPO). ``"constant_normalizer"``: sum over action tokens
            / (batch * ``max_length``) (Dr.GRPO), which weights every token equally and does not
            depend on response lengths.
        max_length: the fixed per-sequence normaliser, required for ``"constant_normalizer"``.

    Returns:
        Scalar tensor; 0 when there is no action token.
    """
    masked = torch.where(action_mask, token_losses, torch.zeros_like(token_losses))
    if aggregation == "token_mean":
        return masked.sum() / action_mask.sum().clamp(min=1)
    if aggregation == "sequence_mean":
        tokens_per_row = action_mask.sum(dim=1)
        row_means = masked.sum(dim=1) / tokens_per_row.clamp(min=1)
        return row_means.sum() / (tokens_per_row > 0).sum().clamp(min=1)
    if aggregation == "constant_normalizer":
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise ValueError(
                f"aggregation='constant_normalizer' needs max_length, a positive "
                f"int, got {max_length!r}"
            )
        return masked.sum() / (max(action_mask.shape[0], 1) * max_length)
    raise ValueError(
        f"aggregation must be 'token_mean', 'sequence_mean' or "
        f"'constant_normalizer', got {aggregation!r}"
    )


def dis_policy_loss(
    logprobs: torch.Tensor,
    behavior_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float = 0.3,
    eps_high: float = 5.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """SAO's Direct double-sided Importance Sampling (DIS) policy loss.

    With ``r_t = exp(logprobs_t - behavior_logprobs_t)``, the detached weight is
    ``f(r_t) = r_t`` when ``1 - eps_low < r_t < 1 + eps_high`` (strict) and 0 otherwise, whatever
    the sign of the advantage. The loss is::

        -sum_t f(r_t) * A_t * logprobs_t / (number of action tokens in the batch)

    Out-of-band tokens stay in the denominator, so masking shrinks the step rather than
    re-weighting the surviving tokens. The gradient on an in-band token is
    ``-r_t * A_t * grad logprobs_t / N``; out-of-band and non-action tokens get exactly zero.

    Args:
        logprobs: current policy logprobs of the sampled tokens ``[batch, time]`` (with grad).
        behavior_logprobs: the sampler's logprobs recorded at rollout time.
        advantages: per-token advantages (detached by the caller or not; only read here).
        action_mask: bool ``[batch, time]``.
        eps_low: lower band half-width in ``(0, 1]`` (0.3 by default; 0.8 for coding).
        eps_high: upper band width, positive (5.0 by default; 3.0 for coding).

    Returns:
        ``(loss, stats)``; stats: ``masked_below_fraction`` and ``masked_above_fraction``
        (fractions of action tokens with ``r <= 1 - eps_low`` and ``r >= 1 + eps_high``),
        ``ratio_mean``, ``ratio_max``, ``approx_kl`` (k3 estimate of KL(behaviour || current)),
        ``num_action_tokens``.
    """
    check_token_tensors(
        action_mask, logprobs=logprobs, behavior_logprobs=behavior_logprobs, advantages=advantages
    )
    _check_band(eps_low, eps_high)
    _check_finite_on_actions("behavior_logprobs", behavior_logprobs, action_mask)
    _check_finite_on_actions("advantages", advantages, action_mask)

    log_ratio = torch.where(
        action_mask, logprobs.detach() - behavior_logprobs, torch.zeros_like(logprobs)
    )
    ratio = log_ratio.exp()
    below = action_mask & (ratio <= 1.0 - eps_low)
    above = action_mask & (ratio >= 1.0 + eps_high)
    in_band = action_mask & ~below & ~above
    weight = torch.where(in_band, ratio, torch.zeros_like(ratio))
    safe_advantages = torch.where(action_mask, advantages.detach(), torch.zeros_like(advantages))
    safe_logprobs = torch.where(action_mask, logprobs, torch.zeros_like(logprobs))
    loss = aggregate_token_losses(-weight * safe_advantages * safe_logprobs, action_mask)

    num_action_tokens = int(action_mask.sum())
    action_ratios = ratio.masked_select(action_mask)
    stats = {
        "masked_below_fraction": _fraction(below, num_action_tokens),
        "masked_above_fraction": _fraction(above, num_action_tokens),
        "ratio_mean": float(action_ratios.mean()) if num_action_tokens else 1.0,
        "ratio_max": float(action_ratios.max()) if num_action_tokens else 1.0,
        "approx_kl": float(masked_mean(_k3(log_ratio), action_mask)),
        "num_action_tokens": float(num_action_tokens),
    }
    return loss, stats


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip: float | None = None,
    aggregation: Aggregation = "token_mean",
    max_length: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate, per token: ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)``.

    ``eps_high > eps_low`` is DAPO's clip-higher. With ``dual_clip = c`` (> 1, e.g. 3.0) the
    per-token loss of a negative-advantage token is further capped at ``-c * A`` (Ye et al.,
    2020), so a huge ratio cannot blow up the loss.

    Args:
        logprobs: current policy logprobs ``[batch, time]`` (with grad).
        old_logprobs: logprobs of the policy that produced the data (or the behaviour policy).
        advantages: per-token advantages.
        action_mask: bool ``[batch, time]``.
        eps_low: lower clip width in ``(0, 1]``.
        eps_high: upper clip width, positive.
        dual_clip: the constant ``c > 1`` of dual clip, or None to disable.
        aggregation: see :func:`aggregate_token_losses`.
        max_length: normaliser for ``aggregation="constant_normalizer"``.

    Returns:
        ``(loss, stats)``; stats: ``clip_fraction_low`` / ``clip_fraction_high`` (fractions of
        action tokens where the lower / upper clip binds, i.e. zeroes the gradient),
        ``clip_fraction`` (their sum), ``dual_clip_fraction``, ``ratio_mean``, ``approx_kl``
        (k3 estimate of KL(old || current)), ``num_action_tokens``.
    """
    check_token_tensors(
        action_mask, logprobs=logprobs, old_logprobs=old_logprobs, advantages=advantages
    )
    _check_band(eps_low, eps_high)
    if dual_clip is not None and not dual_clip > 1.0:
        raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip}")
    _check_finite_on_actions("old_logprobs", old_logprobs, action_mask)
    _check_finite_on_actions("advantages", advantages, action_mask)

    zeros = torch.zeros_like(logprobs)
    log_ratio = torch.where(action_mask, logprobs - old_logprobs, zeros)
    ratio = log_ratio.exp()
    safe_advantages = torch.where(action_mask, advantages.detach(), zeros)
    unclipped = -ratio * safe_advantages
    clipped = -ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * safe_advantages
    token_losses = torch.maximum(unclipped, clipped)
    dual_clipped = torch.zeros_like(action_mask)
    if dual_clip is not None:
        cap = -dual_clip * safe_advantages
        dual_clipped = action_mask & (safe_advantages < 0) & (token_losses > cap)
        token_losses = torch.where(dual_clipped, cap, token_losses)
    loss = aggregate_token_losses(token_losses, action_mask, aggregation, max_length)

    detached_ratio = ratio.detach()
    clipped_low = action_mask & (safe_advantages < 0) & (detached_ratio < 1.0 - eps_low)
    clipped_high = action_mask & (safe_advantages > 0) & (detached_ratio > 1.0 + eps_high)
    num_action_tokens = int(action_mask.sum())
    stats = {
        "clip_fraction_low": _fraction(clipped_low, num_action_tokens),
        "clip_fraction_high": _fraction(clipped_high, num_action_tokens),
        "clip_fraction": _fraction(clipped_low | clipped_high, num_action_tokens),
        "dual_clip_fraction": _fraction(dual_clipped, num_action_tokens),
        "ratio_mean": float(masked_mean(detached_ratio, action_mask)) if num_action_tokens else 1.0,
        "approx_kl": float(masked_mean(_k3(log_ratio.detach()), action_mask)),
        "num_action_tokens": float(num_action_tokens),
    }
    return loss, stats


def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float = 3e-4,
    eps_high: float = 4e-4,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO: PPO clipping on a length-normalised sequence ratio (Zheng et al., 2025).

    ``s_i = exp(mean over row i's action tokens of (logprobs - old_logprobs))``; the loss is
    ``-mean_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)`` over rows that have an
    action token. The defaults 3e-4 / 4e-4 are the left / right clipping ranges the GSPO paper
    (arXiv 2507.18071) reports using; a sequence-level ratio moves far less than token ratios,
    hence the tiny band.

    Args:
        logprobs: current policy logprobs ``[batch, time]`` (with grad).
        old_logprobs: logprobs of the policy that produced the data.
        advantages: sequence-level advantages ``[batch]`` (e.g. :func:`group_advantages`), or
            token-level ``[batch, time]`` ones, reduced to the mean over each row's action
            tokens (exactly the sequence advantage when it was broadcast onto the tokens).
        action_mask: bool ``[batch, time]``.
        eps_low: lower clip width in ``(0, 1]``.
        eps_high: upper clip width, positive.

    Returns:
        ``(loss, stats)``; stats: ``clip_fraction_low`` / ``clip_fraction_high`` /
        ``clip_fraction`` (fractions of sequences where the clip binds), ``sequence_ratio_mean``,
        ``approx_kl`` (token-level k3 of KL(old || current)), ``num_sequences``.
    """
    check_token_tensors(action_mask, logprobs=logprobs, old_logprobs=old_logprobs)
    _check_band(eps_low, eps_high)
    _check_finite_on_actions("old_logprobs", old_logprobs, action_mask)
    zeros = torch.zeros_like(logprobs)
    tokens_per_row = action_mask.sum(dim=1)
    has_tokens = tokens_per_row > 0
    sequence_advantages = _sequence_advantages(advantages, action_mask, tokens_per_row)

    log_ratio = torch.where(action_mask, logprobs - old_logprobs, zeros)
    sequence_ratio = (log_ratio.sum(dim=1) / tokens_per_row.clamp(min=1)).exp()
    sequence_advantages = sequence_advantages.to(sequence_ratio.dtype)
    unclipped = -sequence_ratio * sequence_advantages
    clipped = -sequence_ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * sequence_advantages
    sequence_losses = torch.where(
        has_tokens, torch.maximum(unclipped, clipped), torch.zeros_like(unclipped)
    )
    num_sequences = int(has_tokens.sum())
    loss = sequence_losses.sum() / max(num_sequences, 1)

    detached_ratio = sequence_ratio.detach()
    clipped_low = has_tokens & (sequence_advantages < 0) & (detached_ratio < 1.0 - eps_low)
    clipped_high = has_tokens & (sequence_advantages > 0) & (detached_ratio > 1.0 + eps_high)
    stats = {
        "clip_fraction_low": _fraction(clipped_low, num_sequences),
        "clip_fraction_high": _fraction(clipped_high, num_sequences),
        "clip_fraction": _fraction(clipped_low | clipped_high, num_sequences),
        "sequence_ratio_mean": float(detached_ratio[has_tokens].mean()) if num_sequences else 1.0,
        "approx_kl": float(masked_mean(_k3(log_ratio.detach()), action_mask)),
        "num_sequences": float(num_sequences),
    }
    return loss, stats


def _sequence_advantages(
    advantages: torch.Tensor, action_mask: torch.Tensor, tokens_per_row: torch.Tensor
) -> torch.Tensor:
    """``[batch]`` advantages from ``[batch]`` ones or from ``[batch, time]`` token ones."""
    batch_size = action_mask.shape[0]
    if not isinstance(advantages, torch.Tensor) or advantages.shape not in (
        (batch_size,),
        action_mask.shape,
    ):
        found = tuple(advantages.shape) if isinstance(advantages, torch.Tensor) else None
        raise ValueError(
            f"advantages must have shape [batch]=({batch_size},) or [batch, time]="
            f"{tuple(action_mask.shape)}, got {found}"
        )
    advantages = advantages.detach()
    if advantages.dim() == 2:
        _check_finite_on_actions("advantages", advantages, action_mask)
        token_sums = torch.where(action_mask, advantages, torch.zeros_like(advantages)).sum(dim=1)
        return token_sums / tokens_per_row.clamp(min=1)
    if not bool(torch.isfinite(advantages).all()):
        raise ValueError("advantages has NaN or infinite values")
    return advantages


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
    _check_finite_on_actions("returns", returns, action_mask)

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
        stats["value_clip_fraction"] = _fraction(
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
