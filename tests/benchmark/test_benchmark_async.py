"""The async tier at smoke-sized budgets, swept over the staleness bound from the command line,
from an empty cache to the sweep's scorecard, then resumed: asynchrony is exercised (stale
episodes, DIS masking tokens) at the bound 4 and absent at 0, and both axes are scored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 10.0  # virtual seconds: the smoke-sized phases last about 20


def async_tier_at_smoke_size(folder: Path) -> Path:
    """The core suite with its async tier's settings on top of the smoke tier, not the lite."""
    suite = yaml.safe_load((ROOT / "configs" / "suites" / "core.yaml").read_text())
    timed = suite["tiers"]["async"]
    assert timed.pop("extends") == "lite"
    timed.pop("tasks")  # the lite-sized time windows
    suite["tiers"]["async"] = {"extends": "smoke", "time_window": WINDOW, **timed}
    path = folder / "core-async-smoke.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SAO_ONLINE_CACHE": str(cwd / "cache")}
    command = Path(sys.executable).parent / "sao-online"
    return subprocess.run(
        [str(command), *args], cwd=cwd, env=env, timeout=1800, capture_output=True, text=True
    )


def test_the_async_tier_swept_over_the_staleness_bound_runs_end_to_end_and_resumes(tmp_path):
    suite = async_tier_at_smoke_size(tmp_path)
    args = [
        "benchmark",
        "--suite",
        str(suite),
        "--tier",
        "async",
        "--methods",
        "sao",
        "--sweep",
        "runtime.max_staleness=0,4",
        "--out",
        "sweep",
        "--reps",
        "200",
    ]
    first = cli(args, tmp_path)
    assert first.returncode == 0, first.stderr[-4000:]
    out = tmp_path / "sweep"
    recorded = json.loads((out / "sweep.json").read_text())
    assert recorded["field"] == "runtime.max_staleness" and recorded["values"] == ["0", "4"]

    exercised = {}
    for value in ("0", "4"):
        folder = out / f"runtime.max_staleness={value}"
        protocol = json.loads((folder / "results" / "benchmark.json").read_text())["protocol"]
        for task in protocol["tasks"].values():
            assert task["config"]["runtime"]["backend"] == "simulated"
            assert task["config"]["runtime"]["max_staleness"] == int(value)
            assert task["time_score"] == {"window": WINDOW, "smooth": 0.2 * WINDOW}
        runs = pd.read_csv(folder / "results" / "runs.csv")
        assert len(runs) == 10 and set(runs["method"]) == {"frozen", "sao"}
        exercised[value] = runs.set_index(["task", "method"])
        shifts = pd.read_csv(folder / "results" / "shifts.csv")
        assert shifts["window_reward_mean"].notna().all()  # every shift scored in time too
        assert (shifts["seconds_tau"] > 0).all() and shifts["window_episodes"].gt(0).all()
        card = (folder / "scorecard.md").read_text()
        assert "## On virtual seconds" in card and "*Leaderboard on virtual seconds*" in card
        assert "## What the runs exercised" in card
    # At the bound 0 nothing is stale; at 4 every task trains on stale episodes and SAO's DIS
    # masks tokens on some task.
    assert (exercised["0"]["staleness_max"] == 0).all()
    assert (exercised["4"]["staleness_max"] > 0).all()
    assert (exercised["4"]["stale_share"] > 0).all()
    sao = exercised["4"].xs("sao", level="method")
    assert (sao["masked_fraction"] > 0).any(), sao["masked_fraction"]

    card = (out / "scorecard.md").read_text()
    assert "# Sweep of runtime.max_staleness: suite core, tier async" in card
    assert "*IQM [95% CI] on episodes*" in card and "*IQM [95% CI] on virtual seconds*" in card
    assert "## runtime.max_staleness = 0" in card and "## runtime.max_staleness = 4" in card
    assert (out / "figures" / "sweep.png").stat().st_size > 10_000
    scores = pd.read_csv(out / "scorecard.csv")
    assert set(scores["value"].astype(str)) == {"0", "4"}
    assert set(scores["axis"]) == {"episodes", "virtual seconds"}
    assert set(scores["method"]) == {"frozen", "sao"}

    again = cli([*args, "--resume"], tmp_path)
    assert again.returncode == 0, again.stderr[-4000:]
    assert again.stderr.count("10 of 10 runs finished earlier: kept, not run again") == 2
    assert (out / "scorecard.md").read_text() == card
