"""Off-policy corrections as policy losses: how a token sampled by an older policy is weighted.

Each loss reads the behaviour logprobs recorded at sampling time, so the same loss serves a
trajectory one version old and one eight versions old. With ``r_t = exp(logprobs_t -
behavior_logprobs_t)`` and ``N`` the number of action tokens in the batch, every loss here is
``-sum_t w_t * A_t * logprobs_t / N`` for some detached weight ``w_t`` (decoupled PPO: at its
first gradient step), and differs from the others in ``w_t`` alone:

- :func:`tis_policy_loss`: ``w_t = min(r_t, cap)``, truncated, never zero;
- :func:`masked_is_policy_loss`: one weight per sequence, its geometric-mean ratio, and 0 for
  the whole sequence when that ratio leaves the band;
- :func:`decoupled_ppo_loss`: ``w_t = pi_prox / pi_behav`` times PPO's clipped ratio against the
  proximal policy ``pi_prox``;
- :func:`policy_gradient_loss`: ``w_t = 1``, no correction at all.

SAO's DIS (:func:`~sao_online.learning.losses.dis_policy_loss`) is the same form with
``w_t = r_t`` inside a band and 0 outside. Masked tokens stay in ``N``, as in DIS: masking
shrinks the step rather than re-weighting the tokens that survive. Each loss reports the share
of action tokens it masked, truncated or clipped and the
:func:`~sao_online.learning.losses.effective_sample_size` of its weights.
"""

from __future__ import annotations

import math

import torch

from sao_online.learning.advantages import check_token_tensors
from sao_online.learning.losses.common import (
    aggregate_token_losses,
    check_band,
    check_finite_on_actions,
    effective_sample_size,
    masked_mean,
    ratio_stats,
    token_fraction,
)

__all__ = [
    "decoupled_ppo_loss",
    "masked_is_policy_loss",
    "policy_gradient_loss",
    "tis_policy_loss",
]


def _weighted_policy_loss(
    weight: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
) -> torch.Tensor:
    """``-sum_t weight_t * A_t * logprobs_t / N`` over action tokens; ``weight`` is detached."""
    zeros = torch.zeros_like(logprobs)
    safe_advantages = torch.where(action_mask, advantages.detach(), zeros)
    safe_logprobs = torch.where(action_mask, logprobs, zeros)
    return aggregate_token_losses(-weight.detach() * safe_advantages * safe_logprobs, action_mask)


def _log_ratio(
    logprobs: torch.Tensor, behavior_logprobs: torch.Tensor, action_mask: torch.Tensor
) -> torch.Tensor:
    """Detached ``logprobs - behavior_logprobs`` on action tokens, 0 elsewhere."""
    return torch.where(
        action_mask, logprobs.detach() - behavior_logprobs, torch.zeros_like(logprobs)
    ).detach()


def _check_inputs(
    logprobs: torch.Tensor,
    behavior_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
) -> None:
    check_token_tensors(
        action_mask, logprobs=logprobs, behavior_logprobs=behavior_logprobs, advantages=advantages
    )
    check_finite_on_actions("behavior_logprobs", behavior_logprobs, action_mask)
    check_finite_on_actions("advantages", advantages, action_mask)


def tis_policy_loss(
    logprobs: torch.Tensor,
    behavior_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    cap: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level truncated importance sampling (TIS).

    With ``r_t = exp(logprobs_t - behavior_logprobs_t)``, each token's detached weight is
    ``w_t = min(r_t, cap)``, and the loss is::

        -sum_t min(r_t, cap) * A_t * logprobs_t / (number of action tokens in the batch)

    The gradient on a token is ``-min(r_t, cap) * A_t * grad logprobs_t / N``: the importance-
    sampled policy gradient, with a token whose ratio passes the cap still learning at weight
    ``cap`` (where DIS gives it none). ``cap = inf`` is untruncated importance sampling.

    Args:
        logprobs: current policy logprobs of the sampled tokens ``[batch, time]`` (with grad).
        behavior_logprobs: the sampler's logprobs recorded at rollout time.
        advantages: per-token advantages (only read).
        action_mask: bool ``[batch, time]``.
        cap: the truncation, positive (a run's is ``algorithm.tis_cap``; ``math.inf``: none).

    Returns:
        ``(loss, stats)``; stats: ``truncated_fraction`` (share of action tokens with
        ``r_t > cap``), ``ratio_mean``, ``ratio_max``, ``approx_kl`` (k3 estimate of
        KL(behaviour || current)), ``effective_sample_size`` (of the weights ``w_t``),
        ``num_action_tokens``.

    Example:
        >>> mask = torch.tensor([[True, True]])
        >>> logprobs = torch.tensor([[-1.0, -2.0]], requires_grad=True)
        >>> behavior = logprobs.detach() - torch.tensor([[0.0, math.log(4.0)]])  # ratios 1, 4
        >>> loss, stats = tis_policy_loss(logprobs, behavior, torch.ones(1, 2), mask, cap=2.0)
        >>> round(loss.item(), 4), stats["truncated_fraction"]  # -(1 * -1 + 2 * -2) / 2
        (2.5, 0.5)
    """
    _check_inputs(logprobs, behavior_logprobs, advantages, action_mask)
    if not cap > 0:
        raise ValueError(f"cap must be positive, got {cap}")
    log_ratio = _log_ratio(logprobs, behavior_logprobs, action_mask)
    ratio = log_ratio.exp()
    weight = torch.where(action_mask, ratio.clamp(max=cap), torch.zeros_like(ratio))
    loss = _weighted_policy_loss(weight, logprobs, advantages, action_mask)
    num_action_tokens = int(action_mask.sum())
    stats = {
        "truncated_fraction": token_fraction(action_mask & (ratio > cap), num_action_tokens),
        **ratio_stats(log_ratio, action_mask),
        "effective_sample_size": effective_sample_size(weight, action_mask),
        "num_action_tokens": float(num_action_tokens),
    }
    return loss, stats


def masked_is_policy_loss(
    logprobs: torch.Tensor,
    behavior_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    low: float,
    high: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Sequence-level masked importance sampling (MIS): a sequence is kept or rejected whole.

    Each sequence ``i`` with action tokens ``T_i`` gets its geometric-mean ratio::

        rho_i = exp(mean over t in T_i of (logprobs_t - behavior_logprobs_t))

    the length-normalised sequence ratio GSPO uses. A sequence with ``low < rho_i < high``
    (strict, as DIS's band) keeps ``rho_i`` as the detached weight of each of its tokens; any
    other sequence is rejected: weight 0 on every token, whatever its advantage. The loss is::

        -sum_i sum_{t in T_i} 1[low < rho_i < high] * rho_i * A_t * logprobs_t / N

    with ``N`` the number of action tokens in the batch, rejected ones included. A sequence
    that drifted far from its sampler is dropped rather than truncated token by token, and a
    kept sequence's weight lies inside the band, so no weight exceeds ``high``.

    Args:
        logprobs: current policy logprobs of the sampled tokens ``[batch, time]`` (with grad).
        behavior_logprobs: the sampler's logprobs recorded at rollout time.
        advantages: per-token advantages (only read).
        action_mask: bool ``[batch, time]``.
        low: lower edge of the band, in ``[0, high)`` (a run's is ``algorithm.mis_low``; 0: no
            lower edge).
        high: upper edge, above ``low`` (``algorithm.mis_high``; ``math.inf``: no upper edge).

    Returns:
        ``(loss, stats)``; stats: ``masked_below_fraction`` and ``masked_above_fraction``
        (shares of action tokens in sequences rejected with ``rho_i <= low`` and with
        ``rho_i >= high``), ``rejected_sequence_fraction`` (share of sequences with action
        tokens rejected), ``sequence_ratio_mean`` and ``sequence_ratio_max`` (of ``rho_i``),
        ``ratio_mean``, ``ratio_max`` and ``approx_kl`` (of the token ratios ``r_t``; k3
        estimate of KL(behaviour || current)),
        ``effective_sample_size`` (over action tokens, each carrying its sequence's weight),
        ``num_action_tokens``, ``num_sequences``.
    """
    _check_inputs(logprobs, behavior_logprobs, advantages, action_mask)
    if not (0.0 <= low < high):
        raise ValueError(
            f"the band (low, high) = ({low}, {high}) is empty: low must be >= 0 and below high"
        )
    log_ratio = _log_ratio(logprobs, behavior_logprobs, action_mask)
    tokens_per_row = action_mask.sum(dim=1)
    has_tokens = tokens_per_row > 0
    mean_log_ratio = log_ratio.sum(dim=1) / tokens_per_row.clamp(min=1)
    # Compared in log space: a ratio that underflows to 0 is still above a lower edge of 0.
    log_low = math.log(low) if low > 0 else -math.inf
    below = has_tokens & (mean_log_ratio <= log_low)
    above = has_tokens & (mean_log_ratio >= math.log(high))
    kept = has_tokens & ~below & ~above
    sequence_ratio = mean_log_ratio.exp()
    row_weight = torch.where(kept, sequence_ratio, torch.zeros_like(sequence_ratio))
    weight = torch.where(action_mask, row_weight.unsqueeze(1), torch.zeros_like(log_ratio))
    loss = _weighted_policy_loss(weight, logprobs, advantages, action_mask)

    num_action_tokens = int(tokens_per_row.sum())
    num_sequences = int(has_tokens.sum())
    seen_ratios = sequence_ratio[has_tokens]
    stats = {
        "masked_below_fraction": token_fraction(tokens_per_row[below].sum(), num_action_tokens),
        "masked_above_fraction": token_fraction(tokens_per_row[above].sum(), num_action_tokens),
        "rejected_sequence_fraction": token_fraction(below | above, num_sequences),
        "sequence_ratio_mean": float(seen_ratios.mean()) if num_sequences else 1.0,
        "sequence_ratio_max": float(seen_ratios.max()) if num_sequences else 1.0,
        **ratio_stats(log_ratio, action_mask),
        "effective_sample_size": effective_sample_size(weight, action_mask),
        "num_action_tokens": float(num_action_tokens),
        "num_sequences": float(num_sequences),
    }
    return loss, stats


def decoupled_ppo_loss(
    logprobs: torch.Tensor,
    proximal_logprobs: torch.Tensor,
    behavior_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
    weight_cap: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Decoupled PPO (AReaL; Fu et al., 2025, arXiv 2505.24298): PPO's clip against a proximal
    policy, weighted by proximal over behaviour.

    The policy that sampled a token (behaviour, ``pi_behav``) and the policy the update must
    stay close to (proximal, ``pi_prox``) are decoupled. With the detached behaviour weight
    ``w_t = pi_prox(t) / pi_behav(t)`` and the ratio to the proximal policy
    ``u_t = pi_theta(t) / pi_prox(t)`` (with grad), the loss is::

        -sum_t w_t * min(u_t * A_t, clip(u_t, 1 - eps_low, 1 + eps_high) * A_t) / N

    over the ``N`` action tokens of the batch. With ``weight_cap = c``, a token with
    ``w_t > c`` gets ``w_t = 0`` (no gradient), as AReaL's behaviour-weight cap does.

    At ``logprobs == proximal_logprobs`` (the first gradient step after the proximal policy's
    forward pass, which is every step of a learner that steps once per batch) ``u_t = 1``, no
    clip binds, the loss value is ``-sum_t w_t A_t / N`` and its gradient is
    ``-sum_t w_t A_t grad logprobs_t / N`` with ``w_t = pi_theta / pi_behav``: untruncated
    token-level importance sampling (:func:`tis_policy_loss` with ``cap = inf``), or with a cap,
    importance sampling with the tokens above the cap masked.

    Args:
        logprobs: current policy logprobs of the sampled tokens ``[batch, time]`` (with grad).
        proximal_logprobs: the proximal policy's logprobs (detached here).
        behavior_logprobs: the sampler's logprobs recorded at rollout time.
        advantages: per-token advantages (only read).
        action_mask: bool ``[batch, time]``.
        eps_low: lower clip width in ``(0, 1]``.
        eps_high: upper clip width, positive.
        weight_cap: positive cap on ``w_t`` above which a token is masked, or None for none.

    Returns:
        ``(loss, stats)``; stats: ``clip_fraction_low`` / ``clip_fraction_high`` /
        ``clip_fraction`` (shares of action tokens where the clip against the proximal policy
        binds), ``masked_above_fraction`` (share with ``w_t`` above the cap),
        ``behavior_weight_mean`` and ``behavior_weight_max`` (of ``w_t`` before the cap),
        ``proximal_ratio_mean`` (of ``u_t``), ``ratio_mean``, ``ratio_max`` and ``approx_kl``
        (of current over behaviour, as the other losses report them), ``effective_sample_size``
        (of each token's gradient weight ``w_t * u_t``, 0 where a clip binds or the cap masks),
        ``num_action_tokens``.
    """
    _check_inputs(logprobs, behavior_logprobs, advantages, action_mask)
    check_token_tensors(action_mask, proximal_logprobs=proximal_logprobs)
    check_band(eps_low, eps_high)
    if weight_cap is not None and not weight_cap > 0:
        raise ValueError(f"weight_cap must be positive (or None), got {weight_cap}")
    check_finite_on_actions("proximal_logprobs", proximal_logprobs, action_mask)

    zeros = torch.zeros_like(logprobs)
    behavior_weight = _log_ratio(proximal_logprobs, behavior_logprobs, action_mask).exp()
    capped = torch.zeros_like(action_mask)
    if weight_cap is not None:
        capped = action_mask & (behavior_weight > weight_cap)
    weight = torch.where(action_mask & ~capped, behavior_weight, zeros)
    ratio = torch.where(action_mask, logprobs - proximal_logprobs.detach(), zeros).exp()
    safe_advantages = torch.where(action_mask, advantages.detach(), zeros)
    surrogate = torch.minimum(
        ratio * safe_advantages, ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * safe_advantages
    )
    loss = aggregate_token_losses(-weight * surrogate, action_mask)

    detached_ratio = ratio.detach()
    clipped_low = action_mask & (safe_advantages < 0) & (detached_ratio < 1.0 - eps_low)
    clipped_high = action_mask & (safe_advantages > 0) & (detached_ratio > 1.0 + eps_high)
    clipped = clipped_low | clipped_high
    gradient_weight = torch.where(clipped, zeros, weight * detached_ratio)
    num_action_tokens = int(action_mask.sum())
    behavior_weights = behavior_weight.masked_select(action_mask)
    stats = {
        "clip_fraction_low": token_fraction(clipped_low, num_action_tokens),
        "clip_fraction_high": token_fraction(clipped_high, num_action_tokens),
        "clip_fraction": token_fraction(clipped, num_action_tokens),
        "masked_above_fraction": token_fraction(capped, num_action_tokens),
        "behavior_weight_mean": float(behavior_weights.mean()) if num_action_tokens else 1.0,
        "behavior_weight_max": float(behavior_weights.max()) if num_action_tokens else 1.0,
        "proximal_ratio_mean": float(masked_mean(detached_ratio, action_mask))
        if num_action_tokens
        else 1.0,
        **ratio_stats(_log_ratio(logprobs, behavior_logprobs, action_mask), action_mask),
        "effective_sample_size": effective_sample_size(gradient_weight, action_mask),
        "num_action_tokens": float(num_action_tokens),
    }
    return loss, stats


def policy_gradient_loss(
    logprobs: torch.Tensor,
    behavior_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The plain policy gradient, no off-policy correction: every token weighs 1, however stale.

    The loss is::

        -sum_t A_t * logprobs_t / (number of action tokens in the batch)

    whose gradient is the on-policy REINFORCE gradient; on stale data it is biased towards the
    behaviour policy, and nothing is masked, truncated or clipped. The behaviour logprobs are
    read only to report how far the data was from the current policy.

    Args:
        logprobs: current policy logprobs of the sampled tokens ``[batch, time]`` (with grad).
        behavior_logprobs: the sampler's logprobs recorded at rollout time (diagnostics only).
        advantages: per-token advantages (only read).
        action_mask: bool ``[batch, time]``.

    Returns:
        ``(loss, stats)``; stats: ``ratio_mean``, ``ratio_max``, ``approx_kl`` (of current over
        behaviour, unused by the loss), ``effective_sample_size`` (1: every weight is 1; NaN
        with no action token), ``num_action_tokens``.
    """
    _check_inputs(logprobs, behavior_logprobs, advantages, action_mask)
    weight = action_mask.to(logprobs.dtype)
    loss = _weighted_policy_loss(weight, logprobs, advantages, action_mask)
    stats = {
        **ratio_stats(_log_ratio(logprobs, behavior_logprobs, action_mask), action_mask),
        "effective_sample_size": effective_sample_size(weight, action_mask),
        "num_action_tokens": float(action_mask.sum()),
    }
    return loss, stats
