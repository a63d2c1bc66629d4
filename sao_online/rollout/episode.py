"""Per-episode bookkeeping of the rollout engine: what was asked, what happened, the result.

``EpisodeRequest`` is what a caller hands the engine; ``EpisodeState`` is the mutable record of
the episode running in one slot (tokens, masks, logprobs, versions, rewards per token); its
``to_trajectory`` builds the ``Trajectory`` the learner trains on.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from sao_online.learning.types import Trajectory

# Key of Trajectory.info naming what truncated an episode: "action_tokens", "turns",
# "episode_tokens", "env" (the environment's own truncation), "step_timeout" (an env step ran
# past the engine's env_step_timeout) or INTERRUPTED.
TRUNCATED_BY_KEY = "rollout/truncated_by"
#: What truncated an episode stopped by ``RolloutEngine.interrupt``.
INTERRUPTED = "interrupted"


@dataclass
class EpisodeRequest:
    """One episode to run, handed out by the caller's source.

    Attributes:
        env: a Gymnasium ``Env[str, str]``; the engine calls ``reset`` and ``step`` on it.
        seed: passed to ``env.reset(seed=)``.
        options: passed to ``env.reset(options=)`` (e.g. ``{"drift": {...}}``).
        prompt_id: identifies the task instance.
        group_id: the group sharing this prompt; ``prompt_id`` when None.
        world_time: the run clock's reading when the episode was admitted.
        tag: the caller's own label for the episode, copied to ``Trajectory.tag`` (members of a
            group are otherwise indistinguishable and finish in any order).
    """

    env: Any
    seed: int | None = None
    options: dict[str, Any] | None = None
    prompt_id: int = 0
    group_id: int | None = None
    world_time: float = 0.0
    tag: Any = None


@dataclass
class RolloutStats:
    """Counters of an engine since it was built (for tests, benchmarks and profiling).

    Attributes:
        decode_steps: sampling rounds (each samples one token for every active slot).
        sampled_tokens: action tokens sampled.
        episodes_started / episodes_finished: episodes admitted / completed.
        episodes_interrupted: episodes stopped by ``RolloutEngine.interrupt``.
        env_seconds: time inside ``env.reset`` and ``env.step`` (summed over calls, so with
            ``env_workers`` it can exceed the wall time).
        model_seconds: time inside model forwards and sampling.
    """

    decode_steps: int = 0
    sampled_tokens: int = 0
    episodes_started: int = 0
    episodes_finished: int = 0
    episodes_interrupted: int = 0
    env_seconds: float = 0.0
    model_seconds: float = 0.0


@dataclass
class EpisodeState:
    """Mutable state of the episode running in one slot."""

    request: EpisodeRequest
    env_id: str = ""
    phase: int = 0
    theta: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    env_seconds: float = 0.0
    latency_seconds: float = 0.0
    messages: list[dict[str, str]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    action_mask: list[bool] = field(default_factory=list)
    behavior_logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    turn_ids: list[int] = field(default_factory=list)
    turn: int = 0
    action_start: int = 0
    last_info: dict[str, Any] = field(default_factory=dict)
    prompt_info: dict[str, Any] = field(default_factory=dict)
    final_observation: str = ""  # the environment's answer to the episode's last action

    def append_context(self, tokens: list[int]) -> None:
        """Adds prompt or observation tokens (not sampled by the policy)."""
        self.tokens.extend(tokens)
        count = len(tokens)
        self.action_mask.extend([False] * count)
        self.behavior_logprobs.extend([0.0] * count)
        self.versions.extend([-1] * count)
        self.rewards.extend([0.0] * count)
        self.turn_ids.extend([-1] * count)

    def append_action_token(self, token: int, logprob: float, version: int) -> None:
        self.tokens.append(token)
        self.action_mask.append(True)
        self.behavior_logprobs.append(logprob)
        self.versions.append(version)
        self.rewards.append(0.0)
        self.turn_ids.append(self.turn)

    def to_trajectory(
        self, *, terminated: bool, truncated_by: str | None, finished_at: float | None = None
    ) -> Trajectory:
        """The finished episode as a ``Trajectory``.

        ``truncated_by`` names what truncated it (a cap or the environment), recorded in the
        trajectory's info under ``TRUNCATED_BY_KEY``; None when it was not truncated.
        ``finished_at`` is its end on the caller's clock (None: ``time.time()``).
        """
        request = self.request
        info = _json_safe(self.last_info)
        if truncated_by is not None:
            info[TRUNCATED_BY_KEY] = truncated_by
        return Trajectory(
            tokens=torch.tensor(self.tokens, dtype=torch.int64),
            action_mask=torch.tensor(self.action_mask, dtype=torch.bool),
            behavior_logprobs=torch.tensor(self.behavior_logprobs, dtype=torch.float32),
            versions=torch.tensor(self.versions, dtype=torch.int64),
            rewards=torch.tensor(self.rewards, dtype=torch.float32),
            turn_ids=torch.tensor(self.turn_ids, dtype=torch.int64),
            prompt_id=request.prompt_id,
            group_id=request.prompt_id if request.group_id is None else request.group_id,
            env_id=self.env_id,
            phase=self.phase,
            theta=self.theta,
            world_time=request.world_time,
            seed=request.seed if request.seed is not None else -1,
            terminated=terminated,
            truncated=truncated_by is not None,
            behavior=str(self.last_info.get("behavior", "")),
            info=info,
            prompt_info=dict(self.prompt_info),
            started_at=self.started_at,
            finished_at=time.time() if finished_at is None else finished_at,
            env_seconds=self.env_seconds,
            latency_seconds=self.latency_seconds,
            env_steps=self.turn,
            tag=request.tag,
            final_observation=self.final_observation,
        )


def _json_safe(info: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``info`` that survive a JSON round trip unchanged in kind."""
    kept = {}
    for key, value in info.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        kept[str(key)] = value
    return kept


def prompt_info(env: Any, reset_info: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``reset_info`` named by the env's ``prompt_keys``, JSON-able ones only.

    A plain Gymnasium env (no ``prompt_keys``) and keys the reset left out give nothing here;
    the run records them as null.
    """
    keys = getattr(getattr(env, "unwrapped", env), "prompt_keys", None) or {}
    return _json_safe({key: reset_info[key] for key in keys if key in reset_info})
