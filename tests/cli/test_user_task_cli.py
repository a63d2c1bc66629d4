"""A user's task in their own module, run from the command line as the README says:
``env.id: MODULE:namespace/Name-v0`` through ``compare`` (its run processes and the local
backend's rollout-worker processes import the module) and ``report``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml

TASK_MODULE = textwrap.dedent("""
    import gymnasium

    from sao_online.environments import DriftingTextEnv, TurnResult


    class PickSide(DriftingTextEnv):
        description = "Say left or right; which side pays drifts."
        drift_space = {"side": ["left", "right"]}  # a plain list: a choice

        def _begin_episode(self):
            return "left or right?", {}

        def _respond(self, action):
            said = action.strip()
            return TurnResult("ok", float(said == self.theta["side"]), terminated=True,
                              behavior=said if said in ("left", "right") else "other")

        def oracle_action(self, observation, info):
            return info["theta"]["side"]

        def demonstration_action(self, observation, info):  # either side: undecided
            return ("left", "right")[int(self.np_random.integers(2))]

        def oracle_reward(self, theta):
            return 1.0


    gymnasium.register("side_tasks/PickSide-v0", entry_point=PickSide)
""")


def cli(args: list[str], cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SAO_ONLINE_CACHE": str(cwd / "cache")}
    env.pop("PYTHONPATH", None)  # the module is found because it is in the current directory
    command = Path(sys.executable).parent / "sao-online"  # the console script, as users run it
    return subprocess.run(
        [str(command), *args], cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True
    )


@pytest.mark.e2e
def test_a_users_module_task_runs_through_compare_with_workers_and_report(tmp_path):
    (tmp_path / "side_tasks.py").write_text(TASK_MODULE)
    config = {
        "experiment": "sides",
        "schedule": {
            "parameters": {"side": {"kind": "abrupt", "values": ["left", "right"], "at": [0, 24]}}
        },
        "env": {"id": "side_tasks:side_tasks/PickSide-v0"},
        "model": {
            "num_layers": 1,
            "hidden_size": 32,
            "warm_start_steps": 4,
            "warm_start_batch_size": 8,
        },
        "rollout": {
            "batch_size": 8,
            "num_slots": 8,
            "max_turns": 1,
            "max_action_tokens": 8,
            "max_episode_tokens": 64,
        },
        "runtime": {"backend": "local", "num_workers": 1},
        "budget": {"episodes": 48},
    }
    (tmp_path / "sides.yaml").write_text(yaml.safe_dump(config))

    listed = cli(["envs", "--import", "side_tasks"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "side_tasks/PickSide-v0\n    Say left or right" in listed.stdout
    assert "drift side: one of left, right" in listed.stdout

    compared = cli(
        [
            "compare",
            "sides.yaml",
            "--methods",
            "sao_running_mean",
            "--seeds",
            "1",
            "--first-seed",
            "2",
            "--parallel",
            "1",
            "--out",
            "runs",
        ],
        tmp_path,
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    assert [p.name for p in (tmp_path / "runs" / "sides" / "sao_running_mean").iterdir()] == [
        "seed-2"
    ]  # --first-seed 2 --seeds 1: seed 2 alone
    run_dir = tmp_path / "runs" / "sides" / "sao_running_mean" / "seed-2"
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["seed"] == 2
    episodes = pd.read_parquet(run_dir / "episodes.parquet")
    assert len(episodes) == 48
    assert set(episodes["env_id"]) == {"side_tasks:side_tasks/PickSide-v0"}  # as configured
    assert list(episodes.sort_values("world_time")["phase"]) == [0] * 24 + [1] * 24
    assert set(episodes["behavior"]) <= {"left", "right", "other", ""}

    reported = cli(["report", "runs", "--out", "report"], tmp_path)
    assert reported.returncode == 0, reported.stderr[-3000:]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "side=left -" in report and "side=right" in report  # the shift, named


def test_an_unregistered_id_is_one_line_from_the_cli(tmp_path):
    (tmp_path / "bad.yaml").write_text("env: {id: my_tasks/GuessRange-v0}\n")
    result = cli(["run", "bad.yaml", "--out", "run"], tmp_path, timeout=120)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        "sao-online run: error: env.id: 'my_tasks/GuessRange-v0': not a "
        "registered environment; name the module that registers it"
    )
    assert not (tmp_path / "run").exists()
