import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from machine_time import without_machine_time
from tiny_model import tiny_overrides

from sao_online.config import load_config
from sao_online.runtime.launch import run_experiment

TINY = tiny_overrides(
    "rollout.num_slots=8",
    "runtime.backend=sync",
    "algorithm.critic_warmup_steps=1",
    "logging.checkpoint_every=2",
)
SCHEDULE = [
    "schedule={parameters: {preferred: {kind: abrupt, values: [cute, chuunibyou], at: [0, 24]}}}"
]


def tiny_config(*extra):
    return load_config(None, TINY + SCHEDULE + list(extra))


def test_sync_run_is_deterministic_for_a_seed(tmp_path):
    first = run_experiment(tiny_config("budget.episodes=32"), out=tmp_path / "a")
    second = run_experiment(tiny_config("budget.episodes=32"), out=tmp_path / "b")
    assert first["updates"] == second["updates"] == 4
    a = without_machine_time(pd.read_parquet(tmp_path / "a" / "updates.parquet"))
    b = without_machine_time(pd.read_parquet(tmp_path / "b" / "updates.parquet"))
    pd.testing.assert_frame_equal(a, b)
    episodes = pd.read_parquet(tmp_path / "a" / "episodes.parquet")
    assert list(episodes["episode"]) == list(range(32))
    # The episode clock: episodes 0..23 see phase 0, 24.. phase 1 (change point at 24).
    assert episodes.groupby("phase")["world_time"].agg(["min", "max"]).values.tolist() == [
        [0.0, 23.0],
        [24.0, 31.0],
    ]
    assert (episodes["staleness"] == 0).all()


def test_group_runs_flag_groups_that_straddle_a_change(tmp_path):
    config = tiny_config(
        "algorithm.name=grpo",
        "algorithm.group_size=8",
        "budget.episodes=32",
        "schedule.parameters.preferred.at=[0, 20]",
    )
    run_experiment(config, out=tmp_path / "g")
    episodes = pd.read_parquet(tmp_path / "g" / "episodes.parquet")
    by_group = episodes.groupby("group_id").agg(
        straddles=("group_straddles_change", "first"),
        theta=("theta", "nunique"),
        start=("world_time", "first"),
    )
    assert (by_group["theta"] == 1).all()  # theta fixed for a group
    assert by_group["straddles"].tolist() == [False, False, True, False]  # group 2 spans 16..23


def test_evaluations_cover_every_phase_seen(tmp_path):
    config = tiny_config("budget.episodes=48", "eval.every_updates=3", "eval.episodes_per_phase=4")
    run_experiment(config, out=tmp_path / "e")
    evals = pd.read_parquet(tmp_path / "e" / "evals.parquet")
    assert sorted(evals["policy_version"].unique()) == [0, 3, 6]  # 0: the starting policy
    at_6 = evals[evals["policy_version"] == 6]
    assert sorted(at_6["eval_phase"]) == [0, 1] and (at_6["current_phase"] == 1).all()
    assert (evals["num_episodes"] == 4).all()


@pytest.mark.e2e
def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "run"
    overrides = TINY + SCHEDULE + ["budget.episodes=48", "logging.flush_every=4"]
    code = (
        "import sys; from sao_online.cli import main; "
        f"sys.exit(main(['run', '--out', {str(out)!r}] "
        f"+ sum([['--set', o] for o in {overrides!r}], [])"
        " + ['{config}']))"
    )
    config_file = tmp_path / "config.yaml"
    config_file.write_text("experiment: resume\n")
    process = subprocess.Popen(
        [sys.executable, "-c", code.replace("{config}", str(config_file))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        start = time.time()
        while time.time() - start < 120:  # kill -9 once a checkpoint exists mid-run
            if (out / "checkpoints" / "latest").exists():
                break
            time.sleep(0.05)
        process.kill()
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert (out / "checkpoints" / "latest").exists()
    summary = run_experiment(load_config(config_file, overrides), out=out, resume=True)
    episodes = pd.read_parquet(out / "episodes.parquet")
    updates = pd.read_parquet(out / "updates.parquet")
    assert summary["episodes"] == 48
    assert sorted(episodes["episode"]) == list(range(48))
    assert sorted(updates["version"]) == list(range(1, 7))
    # The resumed run matches an uninterrupted one exactly (same RNG streams restored).
    reference = run_experiment(load_config(config_file, overrides), out=tmp_path / "reference")
    assert reference["episodes"] == 48
    ref_updates = pd.read_parquet(tmp_path / "reference" / "updates.parquet")
    columns = ["version", "charts/reward_mean", "losses/value"]
    pd.testing.assert_frame_equal(
        updates.sort_values("version")[columns].reset_index(drop=True),
        ref_updates.sort_values("version")[columns].reset_index(drop=True),
    )


def test_an_existing_run_is_not_overwritten(tmp_path):
    run_experiment(tiny_config("budget.episodes=8"), out=tmp_path / "x")
    with pytest.raises(ValueError, match="--resume"):
        run_experiment(tiny_config("budget.episodes=8"), out=tmp_path / "x")
    assert len(pd.read_parquet(tmp_path / "x" / "episodes.parquet")) == 8


def test_ctrl_c_stops_after_the_update_and_resumes_exactly(tmp_path):
    config = tiny_config("budget.episodes=32")
    calls = []

    def ctrl_c_once(episodes: int) -> None:
        calls.append(episodes)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, out=tmp_path / "run", progress_callback=ctrl_c_once)
    assert sorted(pd.read_parquet(tmp_path / "run" / "episodes.parquet")["episode"]) == list(
        range(16)
    )
    run_experiment(config, out=tmp_path / "run", resume=True)
    run_experiment(config, out=tmp_path / "reference")
    columns = ["version", "charts/reward_mean", "losses/value"]
    resumed = pd.read_parquet(tmp_path / "run" / "updates.parquet")[columns]
    reference = pd.read_parquet(tmp_path / "reference" / "updates.parquet")[columns]
    pd.testing.assert_frame_equal(resumed.sort_values("version").reset_index(drop=True), reference)
