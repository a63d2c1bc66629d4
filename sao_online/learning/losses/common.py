"""What the losses share: masked means, aggregation over tokens, the effective sample size of
importance weights, and the checks every loss runs on its inputs."""

from __future__ import annotations

from typing import Literal

import torch

Aggregation = Literal["token_mean", "sequence_mean", "constant_normalizer"]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is True; 0 (still attached to the graph) if none is.

    Entries outside the mask are never read arithmetically, so NaN or inf there is harmless.
    """
    selected = torch.where(mask, values, torch.zeros_like(values))
    return selected.sum() / mask.sum().clamp(min=1)


def token_fraction(condition: torch.Tensor, count: int) -> float:
    """Share of ``count`` tokens where ``condition`` holds (0 when ``count`` is 0)."""
    return float(condition.sum()) / count if count else 0.0


def k3_estimate(log_ratio: torch.Tensor) -> torch.Tensor:
    """k3 estimator ``exp(x) - x - 1`` of KL(sampler || other) from ``x = log other/sampler``."""
    return torch.expm1(log_ratio) - log_ratio


def ratio_stats(log_ratio: torch.Tensor, action_mask: torch.Tensor) -> dict[str, float]:
    """``ratio_mean``, ``ratio_max`` and ``approx_kl`` (k3) of detached per-token log ratios
    ``log current/behaviour`` over the action tokens (1, 1 and 0 when there is none)."""
    log_ratio = log_ratio.detach()
    ratios = log_ratio.masked_select(action_mask).exp()
    return {
        "ratio_mean": float(ratios.mean()) if ratios.numel() else 1.0,
        "ratio_max": float(ratios.max()) if ratios.numel() else 1.0,
        "approx_kl": float(masked_mean(k3_estimate(log_ratio), action_mask)),
    }


def check_band(eps_low: float, eps_high: float) -> None:
    """ValueError unless ``eps_low`` is in (0, 1] and ``eps_high`` positive (a non-empty band)."""
    if not 0.0 < eps_low <= 1.0:
        raise ValueError(f"eps_low must be in (0, 1], got {eps_low}")
    if not eps_high > 0.0:
        raise ValueError(f"eps_high must be positive, got {eps_high}")


def check_finite_on_actions(name: str, tensor: torch.Tensor, action_mask: torch.Tensor) -> None:
    """ValueError naming ``name`` when ``tensor`` is NaN or infinite on an action token."""
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


def effective_sample_size(weights: torch.Tensor, action_mask: torch.Tensor) -> float:
    """Normalized effective sample size of per-token weights (Kish): ``(sum w)^2 / (n sum w^2)``.

    The sums run over the ``n`` action tokens; ``w`` is the weight a loss gives each token's
    ``A_t * grad logprobs_t`` (0 for a masked token). 1 when every token weighs the same, ``k / n``
    when ``k`` tokens weigh the same and the rest nothing, ``1 / n`` when one token carries all
    the weight; 0 when every weight is 0; NaN when there is no action token. Computed in float64
    (the squares of large weights would lose precision in float32).

    Args:
        weights: non-negative ``[batch, time]`` weights (read where ``action_mask`` is True only).
        action_mask: bool ``[batch, time]``.

    Example:
        >>> mask = torch.tensor([[True, True, True, True, False]])
        >>> effective_sample_size(torch.tensor([[2.0, 2.0, 0.0, 0.0, 9.0]]), mask)
        0.5
    """
    selected = weights.detach().masked_select(action_mask).to(torch.float64)
    count = selected.numel()
    if count == 0:
        return float("nan")
    squares = float((selected * selected).sum())
    if squares == 0.0:
        return 0.0
    return float(selected.sum()) ** 2 / (count * squares)
