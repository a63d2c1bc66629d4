"""Next-token sampling with temperature and nucleus (top-p) truncation, and the logprob to record.

Which logprob is recorded matters for SAO: the DIS ratio compares the learner's logprob with the
behavior logprob, so both must describe the same distribution. The recorded logprob is that of
the temperature-scaled distribution ``softmax(logits / temperature)`` without top-p truncation;
the learner computes its logprobs with the same temperature (``token_logprobs(...,
temperature=)``). With ``top_p < 1`` the token is drawn from the truncated, renormalised nucleus,
so the recorded logprob is not exactly the sampling distribution's; keep ``top_p = 1`` (the
default) for exact off-policy ratios. Greedy decoding (``temperature = 0``) records the logprob
at temperature 1.
"""

from __future__ import annotations

import torch


def validate_sampling(temperature: float, top_p: float) -> None:
    """Raises ValueError for a negative temperature or a top_p outside (0, 1]."""
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def sample_tokens(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draws one token per row and returns it with its recorded logprob.

    Sampling inverts the cumulative distribution with one uniform number per row (the first
    token whose cumulative probability exceeds it), an exact draw that costs one random number
    per row instead of one per vocabulary entry.

    Args:
        logits: [N, V] next-token logits.
        temperature: 0 for greedy, otherwise divides the logits.
        top_p: nucleus mass kept before drawing (1 keeps everything).
        generator: the random stream; the same stream state gives the same tokens.

    Returns:
        ``(tokens, logprobs)``: [N] int64 ids and [N] float32 logprobs under
        ``softmax(logits / temperature)`` (temperature 1 when greedy), untruncated.
    """
    validate_sampling(temperature, top_p)
    logits = logits.float()
    if temperature == 0:
        log_probabilities = torch.log_softmax(logits, dim=-1)
        tokens = logits.argmax(dim=-1)
    else:
        log_probabilities = torch.log_softmax(logits / temperature, dim=-1)
        uniform = torch.rand(
            (logits.shape[0], 1), generator=generator, device=logits.device, dtype=torch.float32
        )
        if top_p >= 1:
            tokens = _invert_cdf(log_probabilities.exp(), uniform)
        else:
            sorted_probabilities, order = log_probabilities.exp().sort(dim=-1, descending=True)
            mass_before = sorted_probabilities.cumsum(dim=-1) - sorted_probabilities
            # The most likely token is always kept (its mass_before is 0).
            nucleus = torch.where(mass_before < top_p, sorted_probabilities, 0.0)
            tokens = order.gather(-1, _invert_cdf(nucleus, uniform).unsqueeze(-1)).squeeze(-1)
    logprobs = log_probabilities.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens, logprobs


def _invert_cdf(weights: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Index of the first entry whose cumulative weight exceeds ``uniform`` x total, per row.

    Entries of zero weight are never chosen: their cumulative weight equals the previous one,
    which would already have exceeded the threshold.
    """
    cumulative = weights.cumsum(dim=-1)
    threshold = uniform * cumulative[:, -1:]
    index = torch.searchsorted(cumulative, threshold, right=True).squeeze(-1)
    return index.clamp_(max=weights.shape[-1] - 1)
