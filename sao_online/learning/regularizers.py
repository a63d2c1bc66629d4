"""Optional regularisers: KL to a reference policy and an entropy bonus.

Available to every method and off by default for SAO (the paper uses no KL and no entropy
term). Each function returns a differentiable scalar tensor averaged over action tokens; the
caller decides the sign and the coefficient (``loss + kl_coef * kl - entropy_coef * entropy``)
and logs ``float(value)`` itself.
"""

from __future__ import annotations

import torch

from sao_online.learning.advantages import check_token_tensors
from sao_online.learning.losses import masked_mean

__all__ = ["entropy_bonus", "exact_kl", "k3_kl", "token_entropy", "token_exact_kl"]


def _check_logits(action_mask: torch.Tensor, **logits: torch.Tensor) -> None:
    check_token_tensors(action_mask)
    shapes = set()
    for name, tensor in logits.items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor")
        if tensor.dim() != 3 or tensor.shape[:2] != action_mask.shape:
            raise ValueError(
                f"{name} must have shape [batch, time, vocab] with [batch, time] = "
                f"{tuple(action_mask.shape)}, got {tuple(tensor.shape)}"
            )
        shapes.add(tuple(tensor.shape))
    if len(shapes) > 1:
        raise ValueError(f"logits shapes differ: {sorted(shapes)}")


def token_exact_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """Per-position ``KL(pi_theta || pi_ref)`` summed over the vocabulary, ``[batch, time]``.

    Computed in float32 (or float64) from log-softmax. Vocabulary entries that the policy gives
    probability 0 (logit -inf) contribute 0, as ``0 * log 0 = 0``; an entry the reference gives
    probability 0 but the policy does not makes the KL infinite, which is the true value.
    """
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    log_policy = torch.log_softmax(logits.to(dtype), dim=-1)
    log_reference = torch.log_softmax(ref_logits.to(dtype), dim=-1)
    policy = log_policy.exp()
    support = policy > 0
    # Masking the log difference (not the product) keeps gradients finite off the support.
    log_difference = torch.where(support, log_policy - log_reference, torch.zeros_like(log_policy))
    return (policy * log_difference).sum(dim=-1)


def exact_kl(
    logits: torch.Tensor, ref_logits: torch.Tensor, action_mask: torch.Tensor
) -> torch.Tensor:
    """Exact ``KL(pi_theta || pi_ref)`` over the vocabulary, averaged over action tokens.

    Args:
        logits: policy logits ``[batch, time, vocab]`` (with grad) at the positions that
            predict each token (already shifted by the caller).
        ref_logits: reference-policy logits, same shape (usually without grad).
        action_mask: bool ``[batch, time]``.

    Returns:
        Scalar tensor, 0 when there is no action token.
    """
    _check_logits(action_mask, logits=logits, ref_logits=ref_logits)
    return _mean_over_actions(token_exact_kl, action_mask, logits, ref_logits)


def k3_kl(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, action_mask: torch.Tensor
) -> torch.Tensor:
    """k3 estimate of ``KL(pi_theta || pi_ref)`` from sampled tokens, averaged over action tokens.

    Per token, with ``x = ref_logprobs - logprobs``: ``k3 = exp(x) - x - 1`` (>= 0). It is an
    unbiased estimate when tokens are sampled from ``pi_theta``; with off-policy samples (from a
    stale behaviour policy) it estimates the KL only approximately.

    Args:
        logprobs: current policy logprobs of the sampled tokens ``[batch, time]`` (with grad).
        ref_logprobs: reference-policy logprobs of the same tokens.
        action_mask: bool ``[batch, time]``.

    Returns:
        Scalar tensor, 0 when there is no action token.
    """
    check_token_tensors(action_mask, logprobs=logprobs, ref_logprobs=ref_logprobs)
    log_ratio = torch.where(action_mask, ref_logprobs - logprobs, torch.zeros_like(logprobs))
    return masked_mean(torch.expm1(log_ratio) - log_ratio, action_mask)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last axis, ``[batch, time]`` (float32 or float64)."""
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    log_probs = torch.log_softmax(logits.to(dtype), dim=-1)
    probs = log_probs.exp()
    safe_log_probs = torch.where(probs > 0, log_probs, torch.zeros_like(log_probs))
    return -(probs * safe_log_probs).sum(dim=-1)


def entropy_bonus(logits: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Mean policy entropy over action tokens; the caller subtracts ``coef * entropy_bonus``.

    Args:
        logits: policy logits ``[batch, time, vocab]`` (with grad).
        action_mask: bool ``[batch, time]``.

    Returns:
        Scalar tensor, 0 when there is no action token.
    """
    _check_logits(action_mask, logits=logits)
    return _mean_over_actions(token_entropy, action_mask, logits)


def _mean_over_actions(per_token, action_mask: torch.Tensor, *logits: torch.Tensor) -> torch.Tensor:
    """``masked_mean(per_token(*logits), action_mask)``, computed on the action rows only.

    The vocabulary-wide softmaxes then run on the action tokens (about a third of a GRPO batch's
    positions) instead of every position; the value and its gradient are the same.
    """
    selected = [tensor[action_mask] for tensor in logits]
    return per_token(*selected).sum() / action_mask.sum().clamp(min=1)
