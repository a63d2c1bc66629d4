"""Policy objectives: DIS (SAO), PPO clip (GRPO family, DAPO, Dr.GRPO), GSPO.

Each compares the learner's logprobs with the behaviour logprobs recorded at sampling time, so
no separate old-policy forward pass is needed and weights may change mid-episode.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sao_online.batching import Batch
from sao_online.losses import dis_policy_loss, gspo_loss, ppo_clip_loss


@dataclass
class DoubleSidedIS:
    """SAO's strict double-sided token masking: a token whose ratio is outside the band gets no
    gradient."""

    eps_low: float = 0.3
    eps_high: float = 5.0

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

    eps_low: float = 0.2
    eps_high: float = 0.2
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

    eps_low: float = 3e-4
    eps_high: float = 4e-4

    def __call__(self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor):
        return gspo_loss(
            logprobs,
            batch.behavior_logprobs,
            advantages,
            batch.action_mask,
            eps_low=self.eps_low,
            eps_high=self.eps_high,
        )
