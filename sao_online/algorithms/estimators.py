"""Advantage estimators: critic GAE (SAO), running means (global, per prompt class),
group-normalised,
leave-one-out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from sao_online.algorithms.base import AdvantageResult
from sao_online.algorithms.baselines import KeyedRunningMeanBaseline, RunningMeanBaseline
from sao_online.learning.advantages import (
    broadcast_to_tokens,
    group_advantages,
    length_adaptive_lambda,
    response_span_mask,
    rloo_advantages,
    skip_observation_gae,
    step_level_values,
    zero_variance_group_fraction,
)
from sao_online.learning.batching import Batch


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

    Ablations: ``policy_lambda`` fixes the policy lambda (1.0: no length adaptation, every
    token's advantage is the Monte-Carlo return minus its value). ``skip_observations=False``
    runs the recursion over every token from the first action to the last, observation tokens
    included as ordinary steps (each with its own value and a ``gamma * lambda`` decay), and
    trains the critic on those tokens too; the policy still learns on action tokens only.
    """

    gamma: float = 1.0
    critic_lambda: float = 1.0
    lambda_alpha: float = 1.5
    level: str = "token"
    policy_lambda: float | None = None
    skip_observations: bool = True
    needs_critic: bool = True

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        if values is None:
            raise ValueError("CriticGAE needs the critic's values")
        if self.level != "token":
            values = step_level_values(values, batch.turn_ids, mode=self.level)
        mask = batch.action_mask
        steps = mask if self.skip_observations else response_span_mask(mask)
        _, critic_returns = skip_observation_gae(
            batch.rewards, values, steps, gamma=self.gamma, lam=self.critic_lambda
        )
        if self.policy_lambda is None:
            policy_lambda = length_adaptive_lambda(batch.num_action_tokens, alpha=self.lambda_alpha)
        else:
            policy_lambda = torch.full((batch.size,), float(self.policy_lambda))
        advantages, _ = skip_observation_gae(
            batch.rewards, values, steps, gamma=self.gamma, lam=policy_lambda
        )
        advantages = torch.where(mask, advantages, torch.zeros_like(advantages))
        if self.level != "token":  # one advantage per turn, as the step-level ablations define
            advantages = step_level_values(advantages, batch.turn_ids, mode=self.level)
        stats = {
            "advantage_mean": float(advantages[mask].mean()) if mask.any() else 0.0,
            "advantage_std": float(advantages[mask].std()) if mask.sum() > 1 else 0.0,
            "policy_lambda_mean": float(policy_lambda.mean()),
        }
        return AdvantageResult(
            advantages, critic_returns, stats, value_mask=None if self.skip_observations else steps
        )


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
            stats={"advantage_mean": float(episode_advantages.mean())},
        )

    def state_dict(self) -> dict[str, Any]:
        return self.baseline.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baseline.load_state_dict(state)


@dataclass
class KeyedRunningMeanAdvantage:
    """Advantage = episode reward minus the running mean of its prompt class (no critic).

    The prompt class is the values of ``keys`` joined by ``/`` (e.g. ``keys=("task",
    "difficulty")`` gives ``"add/3"``), read from what the reset said the prompt was (the env's
    ``prompt_keys``), else from the episode's last ``info``, so envs that declare no
    ``prompt_keys`` work too. The paper's per-prompt running-mean ablation, with prompts grouped
    by what the env reports.

    Raises (when called):
        ValueError: an episode's info lacks one of ``keys`` (the message lists what it has).
    """

    keys: tuple[str, ...] = ("difficulty",)
    window: int = 32
    needs_critic: bool = False
    baseline: KeyedRunningMeanBaseline = field(init=False)

    def __post_init__(self) -> None:
        if not self.keys or not all(isinstance(key, str) and key for key in self.keys):
            raise ValueError(f"keys: expected one or more info key names, got {self.keys!r}")
        self.keys = tuple(self.keys)
        self.baseline = KeyedRunningMeanBaseline(window=self.window)

    def prompt_class(self, info: dict[str, Any]) -> str:
        missing = [key for key in self.keys if key not in info]
        if missing:
            raise ValueError(
                f"algorithm.baseline_keys: episode info has no {missing[0]!r}; "
                f"it has {', '.join(sorted(info)) or 'nothing'}"
            )
        return "/".join(str(info[key]) for key in self.keys)

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        if len(batch.episode_infos) != batch.size:
            raise ValueError("KeyedRunningMeanAdvantage needs each episode's info in the batch")
        classes = [self.prompt_class(info) for info in batch.episode_infos]
        episode_advantages = self.baseline(batch.episode_rewards, classes)
        return AdvantageResult(
            broadcast_to_tokens(episode_advantages, batch.action_mask),
            stats={
                "advantage_mean": float(episode_advantages.mean()),
                "baseline_classes": float(len(set(classes))),
            },
        )

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
            batch.episode_rewards, batch.group_ids, normalize_std=self.normalize_std
        )
        stats = {
            "zero_variance_group_fraction": zero_variance_group_fraction(
                batch.episode_rewards, batch.group_ids
            )
        }
        return AdvantageResult(
            broadcast_to_tokens(episode_advantages, batch.action_mask), stats=stats
        )


@dataclass
class LeaveOneOut(_Stateless):
    """RLOO: each rollout's baseline is the mean reward of the other members of its group."""

    needs_critic: bool = False

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        episode_advantages = rloo_advantages(batch.episode_rewards, batch.group_ids)
        stats = {
            "zero_variance_group_fraction": zero_variance_group_fraction(
                batch.episode_rewards, batch.group_ids
            )
        }
        return AdvantageResult(
            broadcast_to_tokens(episode_advantages, batch.action_mask), stats=stats
        )


@dataclass
class ZeroAdvantage(_Stateless):
    """Advantage 0 on every token: no learning signal (the ``frozen`` method's estimator)."""

    needs_critic: bool = False

    def __call__(self, batch: Batch, values: torch.Tensor | None) -> AdvantageResult:
        return AdvantageResult(torch.zeros_like(batch.rewards), stats={"advantage_mean": 0.0})
