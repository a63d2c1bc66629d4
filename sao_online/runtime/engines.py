"""The rollout engine of a run, with the config's sampling settings and caps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from sao_online.config import ExperimentConfig
from sao_online.rollout import EnvCallStrategy, RolloutEngine


def build_engine(
    config: ExperimentConfig,
    model: torch.nn.Module,
    tokenizer: Any,
    *,
    seed: int,
    num_slots: int,
    env_calls: EnvCallStrategy | None = None,
    clock: Callable[[], float] = time.time,
) -> RolloutEngine:
    """A rollout engine with the config's sampling settings and caps (the one place they are read).

    With simulated env latency (``env.latency_mean > 0``) environments are stepped by a thread per
    slot, so one slow step stalls only its own episode; without it they are stepped one at a
    time, which keeps a run deterministic for its seed. Either way each call has the deadline
    ``env.step_timeout`` (``env.on_step_timeout`` says what a step past it does). A caller with
    its own ``env_calls`` and ``clock`` (the simulated runtime) replaces both.
    """
    rollout = config.rollout
    env_workers = num_slots if config.env.latency_mean > 0 else 0
    return RolloutEngine(
        model,
        tokenizer,
        num_slots=num_slots,
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        max_turns=rollout.max_turns,
        max_action_tokens=rollout.max_action_tokens,
        max_episode_tokens=rollout.max_episode_tokens,
        seed=seed,
        env_workers=env_workers,
        on_action_cap=rollout.on_action_cap,
        system_prompt=config.model.system_prompt,
        observation_role=config.model.observation_role,
        lean_forward=rollout.lean_forward,
        env_step_timeout=config.env.step_timeout,
        on_env_step_timeout=config.env.on_step_timeout,
        env_calls=env_calls,
        clock=clock,
    )
