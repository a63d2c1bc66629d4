"""Warm starts as a random factor: each run's floor is the frozen runs' from its own warm start,
a task may hold several warm starts (one per declared seed, each with one set of weights), the
intervals draw warm starts before runs, and folders of other warm-start seeds do not pool."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
from benchmark_synthetic import protocol, record, write_results

from sao_online.benchmark import ProtocolMismatch, merge_results
from sao_online.benchmark.scorecard import ResultsError, compute, read_tables
from sao_online.benchmark.scores import aggregate

TASKS = {"T": "F"}


def _records(weights=("w0", "w1", "w2")):
    """Seeds 0-5 paired with warm starts 0, 1, 2 (seed mod 3); warm start k's frozen reward
    is 0.1 k (a better prior), and method a adds 0.4 to its own warm start's floor."""
    records = []
    for seed in range(6):
        warm = seed % 3
        for method, reward in (("frozen", 0.1 * warm), ("a", 0.1 * warm + 0.4)):
            one = record("T", "F", method, seed, [0.5, reward], [1.0, 1.0], warm_start_seed=warm)
            one["warm_start"] = weights[warm]
            records.append(one)
    return records


def _proto(seeds=(0, 1, 2)):
    proto = protocol(TASKS, ["frozen", "a"])
    proto["warm_start_seeds"] = list(seeds)
    return proto


def test_each_run_is_scored_against_the_floor_of_its_own_warm_start(tmp_path):
    out = write_results(tmp_path / "bench", _records(), _proto())
    tables, benchmark = read_tables(out / "results")
    assert list(tables["runs"].groupby("seed")["warm_start_seed"].first()) == [0, 1, 2, 0, 1, 2]
    result = compute(tables, benchmark, reps=300)
    after = result["scores"][(result["scores"]["phase"] == 1) & (result["scores"]["method"] == "a")]
    floors = dict(zip(after["warm_start_seed"], after["floor"]))
    assert floors == pytest.approx({0: 0.0, 1: 0.1, 2: 0.2})
    # (0.1 k + 0.4 - 0.1 k) / (1 - 0.1 k): what a wins over its own floor, whatever the prior
    expected = {0: 0.4, 1: 0.4 / 0.9, 2: 0.4 / 0.8}
    assert dict(zip(after["warm_start_seed"], after["score"])) == pytest.approx(expected)
    units = result["units"]
    assert set(units.columns) >= {"warm_start_seed"} and len(units[units["method"] == "a"]) == 6


def test_one_warm_start_seed_needs_one_set_of_weights(tmp_path):
    records = _records()
    records[-1]["warm_start"] = "another machine's"  # seed 5, warm-start seed 2, method a
    out = write_results(tmp_path / "bench", records, _proto())
    tables, benchmark = read_tables(out / "results")
    with pytest.raises(
        ResultsError, match=r"task T \(warm-start seed 2\): its runs started from 2"
    ):
        compute(tables, benchmark, reps=50)


def test_the_interval_draws_warm_starts_before_runs():
    # Runs of one warm start alike, warm starts apart: drawing warm starts first carries their
    # spread; resampling the six runs alone pretends they were six independent draws.
    units = pd.DataFrame(
        {
            "family": "F",
            "method": "a",
            "seed": range(6),
            "warm_start_seed": [0, 1, 2, 0, 1, 2],
            "score": [0.0, 0.5, 1.0, 0.0, 0.5, 1.0],
        }
    )
    seeded = aggregate(units, ["a"], reps=4000).table.iloc[0]
    plain = aggregate(units.drop(columns="warm_start_seed"), ["a"], reps=4000).table.iloc[0]
    assert seeded["iqm"] == plain["iqm"] == pytest.approx(0.5)
    assert seeded["iqm_upper"] - seeded["iqm_lower"] > plain["iqm_upper"] - plain["iqm_lower"]


def test_folders_of_other_warm_start_seeds_do_not_pool(tmp_path):
    first = write_results(tmp_path / "one", _records(), _proto())
    other = copy.deepcopy(_records())
    for one in other:
        one["key"]["seed"] += 6
    second = write_results(tmp_path / "two", other, _proto(seeds=(3, 4, 5)))
    with pytest.raises(ProtocolMismatch, match=r"warm_start_seeds: \[0, 1, 2\] vs \[3, 4, 5\]"):
        merge_results([first, second], tmp_path / "pooled")


def test_the_scorecard_names_the_warm_starts_and_their_weights(tmp_path):
    from sao_online.benchmark.scorecard import write_scorecard

    out = write_results(tmp_path / "bench", _records(), _proto())
    card = write_scorecard(out, reps=100).read_text()
    assert (
        "Warm starts are a random factor: 3 per task (seeds 0, 1, 2), run seed s starting" in card
    )
    assert "| T | 1 | w1 | 4 | 1, 4 |" in card  # frozen and a, seeds 1 and 4


def test_the_calibration_table_shows_every_warm_starts_floor_not_the_first_ones(tmp_path):
    from sao_online.benchmark import calibration

    out = write_results(tmp_path / "bench", _records(), _proto())
    tables, benchmark = read_tables(out / "results")
    result = compute(tables, benchmark, reps=100)
    table = calibration.phase_table(result["scores"], ["frozen", "a"], "frozen")
    after = table.set_index("phase").iloc[1]
    assert after["frozen reward"] == "0.100 [0.000, 0.200]"  # floors 0, 0.1, 0.2: their mean
    before = table.set_index("phase").iloc[0]
    assert before["frozen reward"] == "0.500 [0.500, 0.500]"  # three warm starts, alike
