"""One clock per run, owned by the runtime: episodes (default), env steps, versions, seconds.

Each test runs a real (tiny) run and checks every episode row against what its clock must
have read when the episode was planned, and its phase against the schedule at that reading.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml
from tiny_model import tiny_overrides

from sao_online.config import load_config
from sao_online.drift_schedules import Schedule
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.launch import run_experiment

TINY = tiny_overrides(
    "rollout.max_action_tokens=8",
    "algorithm.critic_warmup_steps=0",
    "logging.checkpoint_every=0",
)


def schedule_on(clock: str, shift_at: float) -> dict:
    return {
        "clock": clock,
        "seed": 0,
        "parameters": {
            "preferred": {"kind": "abrupt", "values": ["cute", "chuunibyou"], "at": [0, shift_at]}
        },
    }


def read_table(run_dir: str | Path, table: str) -> pd.DataFrame:
    return RunLog(run_dir).read(table)


def run(tmp_path: Path, schedule: dict, overrides: list[str]) -> tuple[pd.DataFrame, dict]:
    config = load_config({"schedule": schedule}, TINY + overrides)
    run_experiment(config, tmp_path, threads=1)
    resolved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    return read_table(tmp_path, "episodes"), resolved


def assert_phases_follow_the_clock(episodes: pd.DataFrame, schedule: dict) -> None:
    expected = [Schedule.from_dict(schedule).at(t).phase for t in episodes["world_time"]]
    assert episodes["phase"].tolist() == expected


def test_versions_clock_in_a_sync_run(tmp_path):
    schedule = schedule_on("versions", 2)
    episodes, resolved = run(tmp_path, schedule, ["runtime.backend=sync", "budget.episodes=32"])
    # Batch k is planned at learner version k; the shift at version 2 starts with batch 2.
    assert episodes["world_time"].tolist() == [float(k) for k in range(4) for _ in range(8)]
    assert episodes["phase"].tolist() == [0] * 16 + [1] * 16
    assert resolved["clock"] == "versions" and resolved["change_points"] == [2.0]
    assert not episodes["group_straddles_change"].any()  # sync: trained at the version planned


def test_steps_clock_counts_the_env_steps_of_trained_episodes(tmp_path):
    schedule = schedule_on("steps", 12)
    # submit: a cut action still steps the env, so every one-turn episode takes one step.
    episodes, resolved = run(
        tmp_path,
        schedule,
        ["runtime.backend=sync", "budget.episodes=32", "rollout.on_action_cap=submit"],
    )
    assert (episodes["env_steps"] == 1).all()
    steps_before_batch = [0.0, 8.0, 16.0, 24.0]
    assert episodes["world_time"].tolist() == [t for t in steps_before_batch for _ in range(8)]
    assert_phases_follow_the_clock(episodes, schedule)
    assert episodes["phase"].tolist() == [0] * 16 + [1] * 16  # 16 steps done >= 12
    assert resolved["change_points"] == [12.0]


def test_seconds_clock_reads_run_time(tmp_path):
    # Each env step sleeps ~0.1 s, so every batch takes at least ~0.08 s: the first batch is
    # planned before the shift at 0.1 s, the last two after it.
    schedule = schedule_on("seconds", 0.1)
    episodes, resolved = run(
        tmp_path,
        schedule,
        [
            "runtime.backend=sync",
            "budget.episodes=32",
            "rollout.on_action_cap=submit",
            "env.latency_mean=0.1",
            "env.latency_sigma=0.1",
        ],
    )
    batches = [episodes["world_time"].iloc[8 * k : 8 * (k + 1)] for k in range(4)]
    assert all(earlier.max() <= later.min() for earlier, later in zip(batches, batches[1:]))
    assert batches[0].max() < 0.1 < batches[2].min()
    assert_phases_follow_the_clock(episodes, schedule)
    assert resolved["clock"] == "seconds" and resolved["change_points"] == [0.1]


def test_versions_clock_under_asynchrony_flags_groups_that_cross_a_shift(tmp_path):
    schedule = schedule_on("versions", 2)
    episodes, _ = run(
        tmp_path,
        schedule,
        [
            "runtime.backend=local",
            "runtime.num_workers=1",
            "runtime.max_staleness=2",
            "algorithm.name=grpo",
            "algorithm.group_size=4",
            "budget.episodes=48",
        ],
    )
    assert len(episodes) == 48 and not episodes["dropped"].any()
    # Planned ahead of the learner: each reading is at most the learner's version at training.
    trained_version = episodes["policy_version"] + episodes["staleness"]
    assert (episodes["world_time"] <= trained_version).all()
    assert_phases_follow_the_clock(episodes, schedule)
    # A group straddles the shift when it was planned before version 2 and trained after it.
    crossed = (episodes["world_time"] < 2) & (trained_version >= 2)
    assert episodes["group_straddles_change"].tolist() == crossed.tolist()
    assert crossed.any()  # the workers ran ahead across the shift
    # Theta is fixed per group: every member was planned at one reading.
    assert (episodes.groupby("group_id")["world_time"].nunique() == 1).all()
