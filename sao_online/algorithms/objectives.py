"""Policy objectives: DIS (SAO), PPO clip (GRPO family, DAPO, Dr.GRPO), GSPO, and the off-policy
corrections token TIS, sequence-level masked IS, decoupled PPO and none.

Each compares the learner's logprobs with the behaviour logprobs recorded at sampling time, so
no separate old-policy forward pass is needed and weights may change mid-episode. Any of them
goes with any advantage estimator; the formulas are in :mod:`sao_online.learning.losses`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sao_online.learning.batching import Batch
from sao_online.learning.losses import (
    decoupled_ppo_loss,
    dis_policy_loss,
    gspo_loss,
    masked_is_policy_loss,
    policy_gradient_loss,
    ppo_clip_loss,
    tis_policy_loss,
)


@dataclass
class DoubleSidedIS:
    """SAO's strict double-sided token masking: a token whose ratio is outside the band gets no
    gradient."""

    eps_low: float
    eps_high: float

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        return dis_policy_loss(
            logprobs,
            batch.behavior_logprobs,
            advantages,
            batch.action_mask,
            eps_low=self.eps_low,
            eps_high=self.eps_high,
        )


@dataclass
class PPOClip:
    """PPO's clipped surrogate, with clip-higher (asymmetric eps), dual clip and aggregations."""

    eps_low: float
    eps_high: float
    dual_clip: float | None = None
    aggregation: str = "token_mean"
    max_length: int | None = None  # the constant normaliser of "constant_normalizer" (Dr.GRPO)

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        return ppo_clip_loss(
            logprobs,
            batch.behavior_logprobs,
            advantages,
            batch.action_mask,
            eps_low=self.eps_low,
            eps_high=self.eps_high,
            dual_clip=self.dual_clip,
            aggregation=self.aggregation,
            max_length=self.max_length,
        )


@dataclass
class SequenceRatio:
    """GSPO: one length-normalised importance ratio per sequence, clipped at sequence level."""

    eps_low: float
    eps_high: float

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        return gspo_loss(
            logprobs,
            batch.behavior_logprobs,
            advantages,
            batch.action_mask,
            eps_low=self.eps_low,
            eps_high=self.eps_high,
        )


@dataclass
class TruncatedIS:
    """Token-level truncated importance sampling: weight ``min(r_t, cap)``, detached, never 0
    (:func:`~sao_online.learning.losses.tis_policy_loss`)."""

    cap: float

    def __post_init__(self) -> None:
        if not self.cap > 0:
            raise ValueError(f"TruncatedIS.cap must be positive, got {self.cap}")

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        return tis_policy_loss(
            logprobs, batch.behavior_logprobs, advantages, batch.action_mask, cap=self.cap
        )


@dataclass
class SequenceMaskedIS:
    """Sequence-level masked importance sampling: a sequence whose geometric-mean ratio leaves
    ``(low, high)`` is rejected whole; a kept one is weighted by that ratio
    (:func:`~sao_online.learning.losses.masked_is_policy_loss`)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not 0 <= self.low < self.high:
            raise ValueError(
                f"SequenceMaskedIS: the band (low, high) = ({self.low}, {self.high}) is empty; "
                "low must be >= 0 and below high"
            )

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        return masked_is_policy_loss(
            logprobs,
            batch.behavior_logprobs,
            advantages,
            batch.action_mask,
            low=self.low,
            high=self.high,
        )


@dataclass
class DecoupledPPO:
    """AReaL's decoupled PPO: the clip against the proximal policy, weighted by proximal over
    behaviour (:func:`~sao_online.learning.losses.decoupled_ppo_loss`).

    The proximal policy is the learner's policy before this update's gradient step; its
    logprobs are ``batch.proximal_logprobs``, which the learner sets from the forward pass it
    runs anyway (no extra pass). The learner takes one gradient step per batch, so the step is
    taken at the proximal policy itself: the clip never binds and the update is token-level
    importance sampling with weight ``pi_theta / pi_behav``, untruncated (tokens above
    ``weight_cap`` masked when one is set).

    Raises (when called):
        ValueError: the batch carries no proximal logprobs (a caller other than the learner).
    """

    eps_low: float
    eps_high: float
    weight_cap: float | None = None

    def __post_init__(self) -> None:
        if not (0 < self.eps_low <= 1 and self.eps_high > 0):
            raise ValueError(
                f"DecoupledPPO: eps_low must be in (0, 1] and eps_high positive, got "
                f"{self.eps_low} and {self.eps_high}"
            )
        if self.weight_cap is not None and not self.weight_cap > 0:
            raise ValueError(f"DecoupledPPO.weight_cap must be positive, got {self.weight_cap}")

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        if batch.proximal_logprobs is None:
            raise ValueError(
                "DecoupledPPO needs batch.proximal_logprobs, the logprobs of the policy before "
                "this update (the learner sets them from its forward pass)"
            )
        return decoupled_ppo_loss(
            logprobs,
            batch.proximal_logprobs,
            batch.behavior_logprobs,
            advantages,
            batch.action_mask,
            eps_low=self.eps_low,
            eps_high=self.eps_high,
            weight_cap=self.weight_cap,
        )


@dataclass
class PlainPolicyGradient:
    """No off-policy correction: the policy gradient with weight 1 on every token, however
    stale (:func:`~sao_online.learning.losses.policy_gradient_loss`)."""

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        return policy_gradient_loss(
            logprobs, batch.behavior_logprobs, advantages, batch.action_mask
        )
