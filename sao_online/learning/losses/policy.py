"""The policy losses of SAO and the group-rollout baselines: DIS, PPO clip and GSPO."""

from __future__ import annotations

import torch

from sao_online.learning.advantages import check_token_tensors
from sao_online.learning.losses.common import (
    Aggregation,
    aggregate_token_losses,
    check_band,
    check_finite_on_actions,
    effective_sample_size,
    k3_estimate,
    masked_mean,
    ratio_stats,
    token_fraction,
)

__all__ = ["dis_policy_loss", "gspo_loss", "ppo_clip_loss"]


def dis_policy_loss(
    logprobs: torch.Tensor,
    behavior_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
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
        eps_low: lower band half-width in ``(0, 1]`` (a run's is ``algorithm.dis_eps_low``;
            0.8 for coding in the paper).
        eps_high: upper band width, positive (``algorithm.dis_eps_high``; 3.0 for coding).

    Returns:
        ``(loss, stats)``; stats: ``masked_below_fraction`` and ``masked_above_fraction``
        (fractions of action tokens with ``r <= 1 - eps_low`` and ``r >= 1 + eps_high``),
        ``ratio_mean``, ``ratio_max``, ``approx_kl`` (k3 estimate of KL(behaviour || current)),
        ``effective_sample_size`` (of the weights ``f(r_t)``, see
        :func:`~sao_online.learning.losses.effective_sample_size`), ``num_action_tokens``.
    """
    check_token_tensors(
        action_mask, logprobs=logprobs, behavior_logprobs=behavior_logprobs, advantages=advantages
    )
    check_band(eps_low, eps_high)
    check_finite_on_actions("behavior_logprobs", behavior_logprobs, action_mask)
    check_finite_on_actions("advantages", advantages, action_mask)

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
    stats = {
        "masked_below_fraction": token_fraction(below, num_action_tokens),
        "masked_above_fraction": token_fraction(above, num_action_tokens),
        **ratio_stats(log_ratio, action_mask),
        "effective_sample_size": effective_sample_size(weight, action_mask),
        "num_action_tokens": float(num_action_tokens),
    }
    return loss, stats


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
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
        (k3 estimate of KL(old || current)), ``effective_sample_size`` (of each token's
        gradient weight: ``r_t`` where no clip binds, 0 where one does), ``num_action_tokens``.
    """
    check_token_tensors(
        action_mask, logprobs=logprobs, old_logprobs=old_logprobs, advantages=advantages
    )
    check_band(eps_low, eps_high)
    if dual_clip is not None and not dual_clip > 1.0:
        raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip}")
    check_finite_on_actions("old_logprobs", old_logprobs, action_mask)
    check_finite_on_actions("advantages", advantages, action_mask)

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
    no_gradient = clipped_low | clipped_high | dual_clipped
    gradient_weight = torch.where(no_gradient, torch.zeros_like(detached_ratio), detached_ratio)
    num_action_tokens = int(action_mask.sum())
    stats = {
        "clip_fraction_low": token_fraction(clipped_low, num_action_tokens),
        "clip_fraction_high": token_fraction(clipped_high, num_action_tokens),
        "clip_fraction": token_fraction(clipped_low | clipped_high, num_action_tokens),
        "dual_clip_fraction": token_fraction(dual_clipped, num_action_tokens),
        "ratio_mean": float(masked_mean(detached_ratio, action_mask)) if num_action_tokens else 1.0,
        "approx_kl": float(masked_mean(k3_estimate(log_ratio.detach()), action_mask)),
        "effective_sample_size": effective_sample_size(gradient_weight, action_mask),
        "num_action_tokens": float(num_action_tokens),
    }
    return loss, stats


def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO: PPO clipping on a length-normalised sequence ratio (Zheng et al., 2025).

    ``s_i = exp(mean over row i's action tokens of (logprobs - old_logprobs))``; the loss is
    ``-mean_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)`` over rows that have an
    action token. The band a run takes where its config leaves the clip unset, 3e-4 / 4e-4
    (``GSPO_CLIP`` of ``sao_online.config.sections``), is the left / right clipping ranges the
    GSPO paper (arXiv 2507.18071) reports using; a sequence-level ratio moves far less than
    token ratios, hence the tiny band.

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
        ``approx_kl`` (token-level k3 of KL(old || current)), ``effective_sample_size`` (over
        sequences, of ``s_i`` where the clip does not bind and 0 where it does),
        ``num_sequences``.
    """
    check_token_tensors(action_mask, logprobs=logprobs, old_logprobs=old_logprobs)
    check_band(eps_low, eps_high)
    check_finite_on_actions("old_logprobs", old_logprobs, action_mask)
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
    sequence_weight = torch.where(
        clipped_low | clipped_high, torch.zeros_like(detached_ratio), detached_ratio
    )
    stats = {
        "clip_fraction_low": token_fraction(clipped_low, num_sequences),
        "clip_fraction_high": token_fraction(clipped_high, num_sequences),
        "clip_fraction": token_fraction(clipped_low | clipped_high, num_sequences),
        "sequence_ratio_mean": float(detached_ratio[has_tokens].mean()) if num_sequences else 1.0,
        "approx_kl": float(masked_mean(k3_estimate(log_ratio.detach()), action_mask)),
        "effective_sample_size": effective_sample_size(sequence_weight, has_tokens),
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
        check_finite_on_actions("advantages", advantages, action_mask)
        token_sums = torch.where(action_mask, advantages, torch.zeros_like(advantages)).sum(dim=1)
        return token_sums / tokens_per_row.clamp(min=1)
    if not bool(torch.isfinite(advantages).all()):
        raise ValueError("advantages has NaN or infinite values")
    return advantages
