"""Core records passed between the rollout engine, the runtime and the learner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

#: The longest final observation a trajectory keeps (characters).
FINAL_OBSERVATION_CHARS = 2000


@dataclass
class Trajectory:
    """One episode as one token sequence: prompt, then alternating action and observation segments.

    All per-token fields have the same length ``len(tokens)``. Only positions where
    ``action_mask`` is True were sampled by the policy; the others are prompt or observation tokens.

    Attributes:
        tokens: int64 token ids of the whole episode.
        action_mask: bool, True for tokens the policy sampled.
        behavior_logprobs: float32, the sampler's logprob of each action token (0 elsewhere).
        versions: int64, the policy version that sampled each action token (-1 elsewhere).
        rewards: float32, reward per token; the episode reward sits on the last action token of
            the turn it was earned in (per-turn rewards allowed).
        turn_ids: int64, index of the action turn each action token belongs to (-1 elsewhere).
        prompt_id: identifies the task instance (seed + theta); distinct per SAO sample.
        group_id: identifies the group of rollouts sharing one prompt (== prompt_id for SAO).
        env_id: the Gymnasium id of the environment.
        phase: regime index when the episode started.
        theta: drift parameters in force for the episode.
        world_time: clock reading when the episode started.
        seed: the environment's reset seed.
        terminated: the environment ended the episode.
        truncated: a turn or token cap ended the episode.
        behavior: the environment's ``info["behavior"]`` label at the end ("" if none).
        info: anything else the environment put in its last ``info`` (JSON-able values only).
        prompt_info: the entries of the reset ``info`` named by the environment's
            ``prompt_keys`` (what kind of prompt the episode got, e.g. its difficulty).
        started_at / finished_at: wall-clock seconds (time.time()).
        env_seconds: seconds spent inside env.step/reset for this episode.
        latency_seconds: the part of ``env_seconds`` the environment reports as simulated
            latency (``info["latency"]``, e.g. from ``LatencyWrapper``).
        env_steps: ``env.step`` calls of the episode (an action cut by a cap is not stepped).
        tag: the ``EpisodeRequest.tag`` the episode was started with.
        final_observation: the environment's answer to the last action, which no later token
            holds (what explains a zero reward, often); cut to ``FINAL_OBSERVATION_CHARS``.
    """

    tokens: torch.Tensor
    action_mask: torch.Tensor
    behavior_logprobs: torch.Tensor
    versions: torch.Tensor
    rewards: torch.Tensor
    turn_ids: torch.Tensor
    prompt_id: int
    group_id: int
    env_id: str
    phase: int
    theta: dict[str, Any]
    world_time: float
    seed: int
    terminated: bool
    truncated: bool
    behavior: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    prompt_info: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    finished_at: float = 0.0
    env_seconds: float = 0.0
    latency_seconds: float = 0.0
    env_steps: int = 0
    tag: Any = None
    final_observation: str = ""

    def __post_init__(self) -> None:
        n = len(self.tokens)
        for name in ("action_mask", "behavior_logprobs", "versions", "rewards", "turn_ids"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"Trajectory.{name} has length {len(getattr(self, name))}, tokens has {n}"
                )

    @property
    def total_reward(self) -> float:
        return float(self.rewards.sum())

    @property
    def num_action_tokens(self) -> int:
        return int(self.action_mask.sum())

    @property
    def num_turns(self) -> int:
        return int(self.turn_ids.max().item()) + 1 if self.num_action_tokens else 0

    @property
    def oldest_version(self) -> int:
        """The oldest policy version among the action tokens (-1 when there are none)."""
        if not self.num_action_tokens:
            return -1
        return int(self.versions[self.action_mask].min())
