"""What a policy does in one regime: reward, quality and the share of each behaviour label."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from sao_online.config import ExperimentConfig
from sao_online.config.run_schedule import resolve_schedule
from sao_online.models import load_policy
from sao_online.rollout import EpisodeRequest
from sao_online.runtime.engines import build_engine
from sao_online.runtime.envs import make_env


def behavior_summary(
    config: ExperimentConfig,
    policy: Any,
    tokenizer: Any,
    *,
    theta: dict[str, Any] | None = None,
    episodes: int = 128,
    seed: int = 0,
) -> dict[str, Any]:
    """Sample ``episodes`` episodes under ``theta`` and summarise them.

    Returns mean reward, the share of episodes whose ``info["quality"]`` is 1 (when the env
    reports it), the share of each ``behavior`` label, and the truncation rate. When the env
    reports ``info["difficulty"]``, ``by_difficulty`` holds per level the episode count, mean
    reward and the rate of each success flag the env reports (``correct``, ``solved``,
    ``reached``).
    """
    options = {"drift": dict(theta)} if theta else None
    requests = iter(
        [
            EpisodeRequest(
                make_env(config, seed=k), seed=seed * 100_003 + k, options=options, prompt_id=k
            )
            for k in range(episodes)
        ]
    )
    with build_engine(
        config, policy, tokenizer, seed=seed, num_slots=min(config.rollout.num_slots, episodes)
    ) as engine:
        trajectories = list(engine.run(lambda: next(requests, None)))
    behaviors = Counter(t.behavior or "none" for t in trajectories)
    quality = [t.info["quality"] for t in trajectories if "quality" in t.info]
    return {
        "episodes": len(trajectories),
        "theta": theta or {},
        "reward_mean": float(np.mean([t.total_reward for t in trajectories])),
        "quality_rate": float(np.mean(quality)) if quality else None,
        "truncated_rate": float(np.mean([t.truncated for t in trajectories])),
        "behavior_shares": {
            label: count / len(trajectories) for label, count in behaviors.most_common()
        },
        **_by_difficulty(trajectories),
    }


SUCCESS_FLAGS = ("correct", "solved", "reached")


def _by_difficulty(trajectories: list[Any]) -> dict[str, Any]:
    levels: dict[Any, list[Any]] = {}
    for trajectory in trajectories:
        if "difficulty" in trajectory.info:
            levels.setdefault(trajectory.info["difficulty"], []).append(trajectory)
    if not levels:
        return {}
    table = {}
    for level in sorted(levels):
        members = levels[level]
        row = {
            "episodes": len(members),
            "reward_mean": float(np.mean([t.total_reward for t in members])),
        }
        for flag in SUCCESS_FLAGS:
            flags = [bool(t.info[flag]) for t in members if flag in t.info]
            if flags:
                row[f"{flag}_rate"] = float(np.mean(flags))
        table[str(level)] = row
    return {"by_difficulty": table}


def warm_start_summary(config: ExperimentConfig, path: Path) -> dict[str, Any]:
    """The warm start at ``path`` as ``sao-online pretrain --summary`` prints it: how it was
    trained (its ``warm_start.json`` without the loss curve) and, under ``behavior``, what it
    does in the schedule's first regime (:func:`behavior_summary`)."""
    policy, tokenizer = load_policy(str(path))
    summary = json.loads((path / "warm_start.json").read_text())
    summary.pop("loss_curve", None)
    summary["behavior"] = behavior_summary(
        config, policy, tokenizer, theta=resolve_schedule(config).at(0).theta
    )
    return summary
