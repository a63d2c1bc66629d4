"""Synthetic run directories for the analysis tests, written with pandas as the runtime would.

(A uniquely named helper module rather than conftest.py, so test files can import it.)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

STYLES = ["cute", "chuunibyou", "classical"]


def episodes_frame(
    rewards, *, world_time=None, phase=None, oracle=1.0, behavior=None, seed: int = 0
) -> pd.DataFrame:
    """An episodes table with every contract column; rewards and times as given."""
    rewards = np.asarray(rewards, dtype=float)
    count = len(rewards)
    rng = np.random.default_rng(seed)
    world_time = np.arange(count, dtype=float) if world_time is None else np.asarray(world_time)
    tokens = rng.integers(20, 60, size=count)
    return pd.DataFrame(
        {
            "episode": np.arange(count),
            "world_time": world_time.astype(float),
            "phase": np.zeros(count, dtype=int) if phase is None else np.asarray(phase, dtype=int),
            "reward": rewards,
            "oracle_reward": np.broadcast_to(np.asarray(oracle, dtype=float), (count,)).copy(),
            "behavior": ["cute"] * count if behavior is None else list(behavior),
            "policy_version": np.arange(count) // 8,
            "staleness": rng.integers(-1, 5, size=count),
            "num_action_tokens": tokens,
            "num_tokens": tokens + 40,
            "wall_time": np.cumsum(rng.uniform(0.05, 0.15, size=count)),
            "group_id": np.arange(count),
            "group_straddles_change": np.zeros(count, dtype=bool),
            "theta": [json.dumps({"preferred": "cute"})] * count,
            "env_id": ["sao_online/StyleShift-v0"] * count,
            "terminated": np.ones(count, dtype=bool),
            "truncated": np.zeros(count, dtype=bool),
            "dropped": np.zeros(count, dtype=bool),
        }
    )


def simulated_episodes(
    *, phase_length: int, phases: int, recovery_episodes: float, seed: int, plateau: float = 0.9
) -> pd.DataFrame:
    """Binary rewards whose success rate falls to 0 at each shift and climbs back linearly.

    The behaviour label is the phase's style when the episode succeeds, else the old style, so
    behaviour shares switch over after each shift like a policy changing its writing style.
    """
    rng = np.random.default_rng(seed)
    count = phase_length * phases
    world_time = np.arange(count)
    phase = world_time // phase_length
    since_shift = world_time - phase * phase_length
    ramp = np.clip(since_shift / recovery_episodes, 0, 1) * plateau
    success_rate = np.where(
        phase == 0, np.clip(world_time / recovery_episodes, 0, 1) * plateau, ramp
    )
    success = rng.random(count) < success_rate
    new_style = np.array(STYLES)[phase % len(STYLES)]
    old_style = np.array(STYLES)[(phase - 1) % len(STYLES)]
    behavior = np.where(success, new_style, old_style)
    frame = episodes_frame(
        success.astype(float), world_time=world_time, phase=phase, behavior=behavior, seed=seed
    )
    frame["theta"] = [json.dumps({"preferred": style}) for style in new_style]
    frame["group_straddles_change"] = False
    return frame


def updates_frame(
    episodes: pd.DataFrame, *, batch: int = 8, seed: int = 0, with_value_loss: bool = True
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    count = len(episodes) // batch
    frame = pd.DataFrame(
        {
            "version": np.arange(1, count + 1),
            "wall_time": np.linspace(0.5, float(episodes["wall_time"].max()), count),
            "episodes_seen": np.arange(1, count + 1) * batch,
            "losses/policy": rng.normal(0, 0.1, count),
            "charts/masked_below_fraction": rng.uniform(0, 0.05, count),
            "charts/masked_above_fraction": rng.uniform(0, 0.02, count),
            "charts/zero_variance_group_fraction": rng.uniform(0, 0.5, count),
            "charts/reward_mean": rng.uniform(0, 1, count),
            "staleness/mean": rng.uniform(0, 3, count),
            "staleness/max": rng.integers(0, 5, count),
        }
    )
    if with_value_loss:
        frame["losses/value"] = rng.uniform(0, 1, count)
        frame["charts/explained_variance"] = np.linspace(-0.5, 0.8, count)
    return frame


def write_table(run_dir: Path, table: str, frame: pd.DataFrame, parts: int) -> None:
    """As one parquet file (parts=0) or a folder of ``parts`` part files."""
    if parts == 0:
        frame.to_parquet(run_dir / f"{table}.parquet", index=False)
        return
    folder = run_dir / f"{table}.parquet"
    folder.mkdir()
    for index, chunk in enumerate(np.array_split(np.arange(len(frame)), parts)):
        frame.iloc[chunk].to_parquet(folder / f"part-{index:05d}.parquet", index=False)


def write_run(
    root: Path,
    experiment: str,
    method: str,
    seed: int,
    episodes: pd.DataFrame,
    *,
    change_points=(),
    phase_names=(),
    updates: pd.DataFrame | None = None,
    evals: pd.DataFrame | None = None,
    parts: int = 0,
    config_overrides: dict | None = None,
) -> Path:
    run_dir = Path(root) / experiment / method / f"seed-{seed}"
    run_dir.mkdir(parents=True)
    config = {
        "experiment": experiment,
        "method": method,
        "seed": seed,
        "budget": {"episodes": len(episodes)},
        "change_points": list(change_points),
        "phase_names": list(phase_names),
        "clock": "episodes",
    }
    config.update(config_overrides or {})
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    write_table(run_dir, "episodes", episodes, parts)
    write_table(
        run_dir,
        "updates",
        updates if updates is not None else updates_frame(episodes, seed=seed),
        parts,
    )
    if evals is not None:
        write_table(run_dir, "evals", evals, parts)
    return run_dir


def evals_frame(*, phase_length: int, phases: int, every: int, seed: int) -> pd.DataFrame:
    """Evals on every phase seen so far; earlier phases decay a little after they end."""
    rng = np.random.default_rng(seed)
    rows = []
    for time in range(every, phase_length * phases, every):
        current = time // phase_length
        for eval_phase in range(current + 1):
            age = (time - (eval_phase + 1) * phase_length) / phase_length
            level = 0.8 if eval_phase == current else max(0.8 - 0.2 * age, 0.0)
            rows.append(
                {
                    "policy_version": time // 8,
                    "world_time": float(time),
                    "current_phase": current,
                    "eval_phase": eval_phase,
                    "mean_reward": level + rng.normal(0, 0.01),
                    "num_episodes": 16,
                }
            )
    return pd.DataFrame(rows)


def build_simulated_root(root: Path) -> Path:
    """Two methods x three seeds, three phases of 200 episodes, one method recovering faster."""
    for offset, (method, recovery) in enumerate((("sao", 40.0), ("grpo", 120.0))):
        for seed in range(3):
            episodes = simulated_episodes(
                phase_length=200, phases=3, recovery_episodes=recovery, seed=seed + 10 * offset
            )
            write_run(
                root,
                "style-shift",
                method,
                seed,
                episodes,
                change_points=[200, 400],
                phase_names=["preferred=cute", "preferred=chuunibyou", "preferred=classical"],
                updates=updates_frame(
                    episodes, seed=seed + 10 * offset, with_value_loss=method == "sao"
                ),
                evals=evals_frame(phase_length=200, phases=3, every=50, seed=seed),
                parts=2 if seed % 2 else 0,
            )
    return root
