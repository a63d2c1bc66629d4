"""Per-token log-probabilities of given token ids under a causal language model."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel


class TokenLogprobs(NamedTuple):
    """What ``token_logprobs`` returns when entropy or logits are asked for.

    Attributes:
        logprobs: [B, T] log-probability of token t given tokens < t (0 where undefined).
        entropy: [B, T] entropy of the (temperature-scaled) next-token distribution that
            predicted token t (0 where undefined), or None when not requested.
        logits: [B, T, V] raw logits at each position (row t predicts token t + 1), or None.
    """

    logprobs: torch.Tensor
    entropy: torch.Tensor | None
    logits: torch.Tensor | None


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position of each token counted from the first real token of its row.

    Works for left and right padding alike, and matches the positions the rollout engine uses
    (each episode starts at position 0).

    Args:
        attention_mask: [B, T] with 1 for real tokens and 0 for padding.

    Returns:
        [B, T] int64 positions (padding positions are clamped to 0).
    """
    return (attention_mask.long().cumsum(dim=-1) - 1).clamp(min=0)


def token_logprobs(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    temperature: float = 1.0,
    return_entropy: bool = False,
    return_logits: bool = False,
) -> torch.Tensor | TokenLogprobs:
    """Log-probability of each token given the tokens before it, for a padded batch.

    Token t's logprob comes from the logits at position t - 1, divided by ``temperature``: pass
    the rollout engine's temperature so learner logprobs and behavior logprobs are of the same
    distribution. Position 0 of every row, the first real token of a left-padded row and every
    padding position get 0. Gradients flow when called outside ``torch.no_grad``.

    The logprob is ``logit[token] - logsumexp(logits)``, so no [B, T, V] log-softmax copy is kept
    beyond what the model itself returns (the entropy, when requested, needs one softmax).

    Args:
        model: a causal LM returning ``.logits`` of shape [B, T, V].
        input_ids: [B, T] int64 token ids.
        attention_mask: [B, T] 1 for real tokens, 0 for padding; all ones when None.
        temperature: divides the logits before normalising; must be positive.
        return_entropy: also return the per-position entropy.
        return_logits: also return the raw logits.

    Returns:
        The [B, T] float32 logprobs, or a ``TokenLogprobs`` when entropy or logits are requested.

    Raises:
        ValueError: wrong shapes or a non-positive temperature.

    Example:
        >>> logprobs = token_logprobs(model, batch["input_ids"], batch["attention_mask"])
        >>> sequence_logprob = (logprobs * action_mask).sum(-1)
    """
    if input_ids.dim() != 2:
        raise ValueError(
            f"token_logprobs: input_ids must be [batch, time], got {tuple(input_ids.shape)}"
        )
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"token_logprobs: attention_mask shape {tuple(attention_mask.shape)} != "
            f"input_ids shape {tuple(input_ids.shape)}"
        )
    if not temperature > 0:
        raise ValueError(f"token_logprobs: temperature must be positive, got {temperature}")

    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        use_cache=False,
    ).logits
    predicting = logits[:, :-1]
    if predicting.dtype != torch.float32:
        predicting = predicting.float()
    if temperature != 1.0:
        predicting = predicting / temperature
    targets = input_ids[:, 1:].unsqueeze(-1)
    log_normalizer = torch.logsumexp(predicting, dim=-1)
    shifted_logprobs = predicting.gather(-1, targets).squeeze(-1) - log_normalizer

    real = attention_mask.bool()
    defined = real[:, 1:] & real[:, :-1]
    # Padding on the left of the time axis puts token t's value at column t.
    logprobs = F.pad(torch.where(defined, shifted_logprobs, 0.0), (1, 0))
    if not (return_entropy or return_logits):
        return logprobs

    entropy = None
    if return_entropy:
        probabilities = torch.softmax(predicting, dim=-1)
        shifted_entropy = log_normalizer - (probabilities * predicting).sum(-1)
        entropy = F.pad(torch.where(defined, shifted_entropy, 0.0), (1, 0))
    return TokenLogprobs(logprobs, entropy, logits if return_logits else None)
