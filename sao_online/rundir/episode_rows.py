"""Rows of ``episodes.parquet``: the column layout of a run's episodes, played or dropped."""

from __future__ import annotations

import functools
import json
import math
from typing import TYPE_CHECKING, Any

import gymnasium

import sao_online.environments  # noqa: F401  (registers the environments)
from sao_online.config import ExperimentConfig
from sao_online.environments.base import PROMPT_KEY_PREFIX, check_prompt_keys, prompt_key_value
from sao_online.learning.types import Trajectory

if TYPE_CHECKING:  # the run directory does not depend on the runtime
    from sao_online.runtime.scheduling.planner import EpisodePlan


def oracle_reward(config: ExperimentConfig, theta: dict[str, Any]) -> float:
    """The env's ceiling under ``theta`` (memoised per env id, env kwargs and theta)."""
    return _oracle_reward(
        config.env.id,
        json.dumps(config.env.kwargs, sort_keys=True),
        json.dumps(theta, sort_keys=True),
    )


@functools.lru_cache(maxsize=1024)
def _oracle_reward(env_id: str, kwargs_json: str, theta_json: str) -> float:
    env = gymnasium.make(env_id, **json.loads(kwargs_json))
    try:
        ceiling = getattr(env.unwrapped, "oracle_reward", None)
        # A plain Gymnasium env may have no oracle: its regret is then unknown (NaN).
        return math.nan if ceiling is None else float(ceiling(json.loads(theta_json)))
    finally:
        env.close()


#: Declared prompt-key type -> the pandas dtype of its column (nullable, so a missing key is null
#: without changing the column's type).
_PROMPT_COLUMN_DTYPES: dict[type, str] = {
    str: "string",
    int: "Int64",
    float: "Float64",
    bool: "boolean",
}


def prompt_keys(config: ExperimentConfig) -> dict[str, type]:
    """The env's declared prompt keys, name -> type (empty for an env that declares none)."""
    return dict(_prompt_keys(config.env.id, json.dumps(config.env.kwargs, sort_keys=True)))


@functools.lru_cache(maxsize=64)
def _prompt_keys(env_id: str, kwargs_json: str) -> tuple[tuple[str, type], ...]:
    env = gymnasium.make(env_id, **json.loads(kwargs_json))
    try:
        declared = getattr(env.unwrapped, "prompt_keys", None) or {}
        where = f"{env_id} prompt_keys"
        return tuple(check_prompt_keys(declared, where=where).items())
    finally:
        env.close()


def episode_column_types(config: ExperimentConfig) -> dict[str, str]:
    """Column -> pandas dtype of the ``prompt/<key>`` columns (for ``RunLog(column_types=)``)."""
    return {
        PROMPT_KEY_PREFIX + key: _PROMPT_COLUMN_DTYPES[kind]
        for key, kind in prompt_keys(config).items()
    }


def prompt_columns(config: ExperimentConfig, prompt_info: dict[str, Any]) -> dict[str, Any]:
    """The ``prompt/<key>`` columns of an episode: each declared key's value, None if absent.

    A value that is not a scalar of the declared type is recorded as None too, so a faulty env
    never stops a run nor changes a column's type.
    """
    return {
        PROMPT_KEY_PREFIX + key: prompt_key_value(prompt_info.get(key), kind)
        for key, kind in prompt_keys(config).items()
    }


#: ``dropped_reason`` of an episode lost with a worker that died (or hung).
DROPPED_WORKER_FAULT = "worker_fault"
#: ``dropped_reason`` of a straggler stopped and run again (``runtime.stragglers: requeue``).
DROPPED_STALE = "stale"


def _planned_columns(
    config: ExperimentConfig,
    index: int,
    *,
    world_time: float,
    phase: int,
    theta: dict[str, Any],
    prompt_id: int,
    group_id: int,
    straddles_change: bool,
    wall_time: float,
) -> dict[str, Any]:
    """The columns of an episode row known before it runs (shared by run and dropped episodes)."""
    return {
        "episode": index,
        "world_time": float(world_time),
        "phase": int(phase),
        "oracle_reward": oracle_reward(config, theta),
        "wall_time": wall_time,
        "prompt_id": prompt_id,
        "group_id": group_id,
        "group_straddles_change": straddles_change,
        "theta": json.dumps(theta, sort_keys=True),
        "env_id": config.env.id,
    }


def episode_record(
    config: ExperimentConfig,
    trajectory: Trajectory,
    index: int,
    *,
    trained_version: int,
    straddles_change: bool,
    wall_time: float,
    finished_time: float = math.nan,
) -> dict[str, Any]:
    """One row of ``episodes.parquet`` (see the analysis package for the column contract).

    ``wall_time`` is when the learner took the episode, ``finished_time`` when it finished, both
    in seconds since the run started on the run's clock (virtual for a simulated run).
    """
    oldest = trajectory.oldest_version
    return {
        **_planned_columns(
            config,
            index,
            world_time=trajectory.world_time,
            phase=trajectory.phase,
            theta=trajectory.theta,
            prompt_id=trajectory.prompt_id,
            group_id=trajectory.group_id,
            straddles_change=straddles_change,
            wall_time=wall_time,
        ),
        "finished_time": float(finished_time),
        "reward": trajectory.total_reward,
        "behavior": trajectory.behavior,
        "policy_version": oldest,
        "staleness": (trained_version - oldest) if trained_version >= 0 and oldest >= 0 else -1,
        "num_action_tokens": trajectory.num_action_tokens,
        "num_tokens": len(trajectory.tokens),
        "num_turns": trajectory.num_turns,
        "terminated": trajectory.terminated,
        "truncated": trajectory.truncated,
        "dropped": False,
        "dropped_reason": "",
        "env_seconds": trajectory.env_seconds,
        "env_latency_seconds": trajectory.latency_seconds,
        "env_steps": trajectory.env_steps,
        **prompt_columns(config, trajectory.prompt_info),
    }


def dropped_episode_record(
    config: ExperimentConfig,
    plan: EpisodePlan,
    index: int,
    *,
    wall_time: float,
    reason: str = DROPPED_WORKER_FAULT,
    spent: Trajectory | None = None,
) -> dict[str, Any]:
    """An ``episodes.parquet`` row for an episode that was not trained on (reward NaN).

    Args:
        reason: the ``dropped_reason`` column: ``DROPPED_WORKER_FAULT`` or ``DROPPED_STALE``.
        spent: what the episode did before it was dropped (its tokens, env seconds), when its
            worker reported it; None records nothing spent (a worker that died took it along).
    """
    oldest = spent.oldest_version if spent is not None else -1
    return {
        **_planned_columns(
            config,
            index,
            world_time=plan.world_time,
            phase=plan.state.phase,
            theta=dict(plan.state.theta),
            prompt_id=plan.prompt_id,
            group_id=plan.group_id,
            straddles_change=plan.straddles_change,
            wall_time=wall_time,
        ),
        "finished_time": math.nan,
        "reward": math.nan,
        "behavior": "",
        "policy_version": oldest,
        "staleness": -1,
        "num_action_tokens": spent.num_action_tokens if spent is not None else 0,
        "num_tokens": len(spent.tokens) if spent is not None else 0,
        "num_turns": spent.num_turns if spent is not None else 0,
        "terminated": False,
        "truncated": False,
        "dropped": True,
        "dropped_reason": reason,
        "env_seconds": spent.env_seconds if spent is not None else 0.0,
        "env_latency_seconds": spent.latency_seconds if spent is not None else 0.0,
        "env_steps": spent.env_steps if spent is not None else 0,
        **prompt_columns(config, spent.prompt_info if spent is not None else {}),
    }
