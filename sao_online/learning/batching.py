"""Collating trajectories into padded [batch, time] tensors for the learner."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from sao_online.learning.types import Trajectory


@dataclass
class Batch:
    """Right-padded tensors of a list of trajectories; padding is excluded from every mask."""

    tokens: torch.Tensor  # [B, T] int64
    attention_mask: torch.Tensor  # [B, T] bool, True on real tokens
    action_mask: torch.Tensor  # [B, T] bool
    behavior_logprobs: torch.Tensor  # [B, T] float32
    versions: torch.Tensor  # [B, T] int64, -1 off actions
    rewards: torch.Tensor  # [B, T] float32
    turn_ids: torch.Tensor  # [B, T] int64, -1 off actions
    episode_rewards: torch.Tensor  # [B] float32
    group_ids: torch.Tensor  # [B] int64
    num_action_tokens: torch.Tensor  # [B] int64
    # What each episode's prompt was (task, difficulty, ...), for keyed baselines: the env's last
    # info, overlaid with the reset-info entries it declares as ``prompt_keys`` (those win).
    episode_infos: tuple[dict, ...] = ()
    # The learner's logprobs of the action tokens before this update's gradient step (decoupled
    # PPO's proximal policy), detached; None until the learner's forward pass sets them.
    proximal_logprobs: torch.Tensor | None = None

    @property
    def size(self) -> int:
        return self.tokens.shape[0]

    def to(self, device: torch.device | str) -> Batch:
        """The same batch with every tensor on ``device`` (itself when already there)."""
        if self.tokens.device == torch.device(device):
            return self
        return dataclasses.replace(
            self,
            **{
                field.name: getattr(self, field.name).to(device)
                for field in dataclasses.fields(self)
                if isinstance(getattr(self, field.name), torch.Tensor)
            },
        )


def collate(trajectories: Sequence[Trajectory], pad_token_id: int) -> Batch:
    """Pad trajectories on the right into one :class:`Batch`.

    Raises:
        ValueError: on an empty list.
    """
    if not trajectories:
        raise ValueError("collate: no trajectories")
    batch_size = len(trajectories)
    length = max(len(t.tokens) for t in trajectories)

    def padded(dtype: torch.dtype, fill: float | int | bool) -> torch.Tensor:
        return torch.full((batch_size, length), fill, dtype=dtype)

    tokens = padded(torch.long, pad_token_id)
    attention_mask = padded(torch.bool, False)
    action_mask = padded(torch.bool, False)
    behavior_logprobs = padded(torch.float32, 0.0)
    versions = padded(torch.long, -1)
    rewards = padded(torch.float32, 0.0)
    turn_ids = padded(torch.long, -1)
    for row, traj in enumerate(trajectories):
        n = len(traj.tokens)
        tokens[row, :n] = traj.tokens
        attention_mask[row, :n] = True
        action_mask[row, :n] = traj.action_mask
        behavior_logprobs[row, :n] = traj.behavior_logprobs
        versions[row, :n] = traj.versions
        rewards[row, :n] = traj.rewards
        turn_ids[row, :n] = traj.turn_ids
    return Batch(
        tokens=tokens,
        attention_mask=attention_mask,
        action_mask=action_mask,
        behavior_logprobs=behavior_logprobs,
        versions=versions,
        rewards=rewards,
        turn_ids=turn_ids,
        episode_rewards=rewards.sum(dim=1),
        group_ids=torch.tensor([t.group_id for t in trajectories], dtype=torch.long),
        num_action_tokens=action_mask.sum(dim=1),
        episode_infos=tuple({**t.info, **t.prompt_info} for t in trajectories),
    )
