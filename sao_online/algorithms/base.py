"""The two pieces a method is made of, and the method itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from sao_online.learning.batching import Batch


@dataclass
class AdvantageResult:
    """Per-token advantages for the policy and, for critic methods, the critic's targets."""

    advantages: torch.Tensor  # [B, T], zero off action tokens
    critic_returns: torch.Tensor | None = None  # [B, T] targets for the value loss
    stats: dict[str, float] = field(default_factory=dict)
    value_mask: torch.Tensor | None = None  # [B, T] tokens with a value target; None: actions


class AdvantageEstimator(Protocol):
    """Turns a batch (and the critic's values, when it uses one) into advantages."""

    needs_critic: bool

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class PolicyObjective(Protocol):
    """A policy loss over action tokens: (loss, stats)."""

    def __call__(
        self, logprobs: torch.Tensor, batch: Batch, advantages: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]: ...


@dataclass
class Method:
    """A configured method: how many rollouts per prompt, how to score them, how to learn.

    ``updates_policy=False`` makes a method that never changes its weights: the learner still
    takes each batch (episodes are logged, versions counted, on the same schedule and seeds)
    but runs no critic or policy update. The built-in ``frozen`` method is that: the warm start
    as it is, the floor of the benchmark's normalized score.
    """

    name: str
    group_size: int
    estimator: AdvantageEstimator
    objective: PolicyObjective
    updates_policy: bool = True

    @property
    def uses_critic(self) -> bool:
        return self.estimator.needs_critic
