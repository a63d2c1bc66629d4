"""Advantage estimators: critic GAE (SAO), running mean, group-normalised, leave-one-out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from sao_online.advantages import (
    RunningMeanBaseline,
    broadcast_to_tokens,
    group_advantages,
    length_adaptive_lambda,
    rloo_advantages,
    skip_observation_gae,
    step_level_values,
    zero_variance_group_fraction,
)
from sao_online.algorithms.base import AdvantageResult
from sao_online.batching import Batch


class _Stateless:
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


@dataclass
class CriticGAE(_Stateless):
    """SAO's decoupled skip-observation GAE.

    Critic targets use ``critic_lambda`` (1 by default: Monte-Carlo returns over action tokens);
    policy advantages use the length-adaptive lambda = 1 - 1/(alpha * action tokens).
    ``level`` "last_token" / "average" replaces the token values by one value per turn first
    (the paper's step-level ablations).
    """

    gamma: float = 1.0
    critic_lambda: float = 1.0
    lambda_alpha: float = 1.5
    level: str = "token"
    needs_critic: bool = True

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        if values is None:
            raise ValueError("CriticGAE needs the critic's values")
        if self.level != "token":
            values = step_level_values(values, batch.turn_ids, mode=self.level)
        _, critic_returns = skip_observation_gae(
            batch.rewards, values, batch.action_mask, gamma=self.gamma, lam=self.critic_lambda)
        policy_lambda = length_adaptive_lambda(batch.num_action_tokens, alpha=self.lambda_alpha)
        advantages, _ = skip_observation_gae(
            batch.rewards, values, batch.action_mask, gamma=self.gamma, lam=policy_lambda)
        if self.level != "token":  # one advantage per turn, as the step-level ablations define
            advantages = step_level_values(advantages, batch.turn_ids, mode=self.level)
        mask = batch.action_mask
        stats = {
            "advantage_mean": float(advantages[mask].mean()) if mask.any() else 0.0,
            "advantage_std": float(advantages[mask].std()) if mask.sum() > 1 else 0.0,
            "policy_lambda_mean": float(policy_lambda.mean()),
        }
        return AdvantageResult(advantages, critic_returns, stats)


@dataclass
class RunningMeanAdvantage:
    """Advantage = episode reward minus the mean of the last ``window`` rewards (no critic)."""

    window: int = 128
    needs_critic: bool = False
    baseline: RunningMeanBaseline = field(init=False)

    def __post_init__(self) -> None:
        self.baseline = RunningMeanBaseline(window=self.window)

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        episode_advantages = self.baseline(batch.episode_rewards)
        return AdvantageResult(
            broadcast_to_tokens(episode_advantages, batch.action_mask),
            stats={"advantage_mean": float(episode_advantages.mean())})

    def state_dict(self) -> dict[str, Any]:
        return self.baseline.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baseline.load_state_dict(state)


@dataclass
class GroupNormalized(_Stateless):
    """GRPO's group-relative advantage (Dr.GRPO: without dividing by the group std)."""

    normalize_std: bool = True
    needs_critic: bool = False

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        episode_advantages = group_advantages(
            batch.episode_rewards, batch.group_ids, normalize_std=self.normalize_std)
        stats = {"zero_variance_group_fraction":
                 zero_variance_group_fraction(batch.episode_rewards, batch.group_ids)}
        return AdvantageResult(broadcast_to_tokens(episode_advantages, batch.action_mask), stats=stats)


@dataclass
class LeaveOneOut(_Stateless):
    """RLOO: each rollout's baseline is the mean reward of the other members of its group."""

    needs_critic: bool = False

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        episode_advantages = rloo_advantages(batch.episode_rewards, batch.group_ids)
        stats = {"zero_variance_group_fraction":
                 zero_variance_group_fraction(batch.episode_rewards, batch.group_ids)}
        return AdvantageResult(broadcast_to_tokens(episode_advantages, batch.action_mask), stats=stats)
