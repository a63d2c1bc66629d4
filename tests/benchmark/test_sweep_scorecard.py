"""A sweep's scorecard, tables and merge, from result folders built by hand with known scores."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from benchmark_synthetic import protocol, record, write_results

from sao_online.benchmark.sweep import merge_sweeps
from sao_online.benchmark.sweep_folder import read_sweep
from sao_online.benchmark.sweep_scorecard import write_sweep_scorecard
from sao_online.benchmark.tables import render_block
from sao_online.benchmark.time_scores import time_score_settings

# After the shift: frozen 0.2, the oracle 1; m earns 0.6 (score 0.5) at the bound 0 and 0.4
# (0.25) at 4 with seed 0, 0.1 more with seed 1. Within the time window it wins back 40% of
# that over the floor.
REWARD_AFTER = {("0", 0): 0.6, ("4", 0): 0.4, ("0", 1): 0.7, ("4", 1): 0.5}


def timed(run: dict, window_reward: float) -> dict:
    for shift in run["shifts"]:
        shift.update(
            seconds_tau=10.0,
            seconds_to_half_oracle=4.0,
            seconds_censored=False,
            seconds_available=10.0,
            window_reward_mean=window_reward,
            window_episodes=5,
            window_cut=False,
        )
    return run


def one_sweep(folder, seed: int) -> None:
    folder.mkdir()
    (folder / "sweep.json").write_text(
        json.dumps(
            {
                "format": 1,
                "field": "runtime.max_staleness",
                "values": ["0", "4"],
                "folders": {v: f"runtime.max_staleness={v}" for v in ("0", "4")},
            }
        )
    )
    for value in ("0", "4"):
        proto = protocol({"T": "F"}, ["frozen", "m"])
        proto["tasks"]["T"]["config"]["runtime"] = {"backend": "simulated"}
        proto["tasks"]["T"]["time_score"] = time_score_settings(10.0)
        reward = REWARD_AFTER[(value, seed)]
        records = [
            timed(record("T", "F", "frozen", seed, [0.5, 0.2], [1.0, 1.0]), 0.2),
            timed(
                record("T", "F", "m", seed, [0.5, reward], [1.0, 1.0]), 0.2 + (reward - 0.2) * 0.4
            ),
        ]
        write_results(folder / f"runtime.max_staleness={value}", records, proto)


def test_the_sweeps_scorecard_shows_each_methods_score_at_each_value_on_both_axes(tmp_path):
    one_sweep(tmp_path / "sweep", seed=0)
    card = write_sweep_scorecard(tmp_path / "sweep", reps=200).read_text()
    scores = pd.read_csv(tmp_path / "sweep" / "scorecard.csv")
    mine = scores[scores["method"] == "m"].set_index(["axis", "value"])["iqm"]
    assert mine[("episodes", 0)] == pytest.approx(0.5)  # (0.6 - 0.2) / (1 - 0.2)
    assert mine[("episodes", 4)] == pytest.approx(0.25)
    assert mine[("virtual seconds", 0)] == pytest.approx(0.2)  # (0.36 - 0.2) / 0.8
    assert mine[("virtual seconds", 4)] == pytest.approx(0.1)
    assert "| m | 0.50 | 0.25 |" in card and "| m | 0.20 | 0.10 |" in card
    assert "## runtime.max_staleness = 4" in card
    assert (tmp_path / "sweep" / "figures" / "sweep.png").is_file()
    table = render_block("sweep sweep virtual_seconds", tmp_path)
    assert "| m | 0.20 | 0.10 |" in table
    with pytest.raises(ValueError, match="has no axis 'tokens' .axes: episodes, virtual_seconds"):
        render_block("sweep sweep tokens", tmp_path)


def test_two_seed_sets_of_a_sweep_merge_value_by_value_without_their_runs(tmp_path):
    one_sweep(tmp_path / "a", seed=0)
    one_sweep(tmp_path / "b", seed=1)
    (tmp_path / "a" / "runtime.max_staleness=0" / "runs").mkdir()  # not kept
    card = merge_sweeps([tmp_path / "a", tmp_path / "b"], tmp_path / "kept", reps=200)
    sweep, folders = read_sweep(tmp_path / "kept")
    assert sweep.values == ("0", "4")
    assert not (folders["0"] / "runs").exists()
    runs = pd.read_csv(folders["4"] / "results" / "runs.csv")
    assert sorted(runs["seed"].unique()) == [0, 1]
    scores = pd.read_csv(tmp_path / "kept" / "scorecard.csv")
    mine = scores[(scores["method"] == "m") & (scores["axis"] == "episodes")]
    # Two scores per value: fewer than 4, so the IQM is their mean.
    assert dict(zip(mine["value"], mine["iqm"])) == pytest.approx({0: 0.5625, 4: 0.3125})
    assert "## runtime.max_staleness = 0" in card.read_text()
