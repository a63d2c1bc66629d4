"""The normalized score, its edge cases, the leaderboard and the per-family flags, on result
tables built by hand."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_synthetic import protocol, record, tables_of, write_results
from rliable_calls import rliable_intervals, rliable_modules

from sao_online.analysis.suite_metrics import trimmed_iqm
from sao_online.benchmark.scorecard import compute, read_tables, write_scorecard
from sao_online.benchmark.scorecard_tables import leaderboard
from sao_online.benchmark.scores import matrix_note, normalized_scores, score_matrix


def test_the_score_is_measured_against_the_frozen_mean_and_the_oracle():
    records = [
        record("T", "F", "frozen", 0, [0.1, 0.2], [0.9, 0.9]),
        record("T", "F", "frozen", 1, [0.1, 0.4], [0.9, 0.9]),  # floor of phase 1: 0.3
        record("T", "F", "a", 0, [0.5, 0.6], [0.9, 0.9]),
        record("T", "F", "a", 1, [0.5, 0.1], [0.9, 0.9]),
        record("T", "F", "b", 0, [0.5, 1.2], [0.9, 0.9]),
    ]
    scores = normalized_scores(*tables_of(records), floor_method="frozen", min_gap=0.05)
    after = scores[scores["phase"] == 1].set_index(["method", "seed"])["score"]
    assert after[("a", 0)] == pytest.approx((0.6 - 0.3) / (0.9 - 0.3))  # 0.5
    assert after[("a", 1)] == pytest.approx((0.1 - 0.3) / 0.6)  # negative: worse than frozen
    assert after[("b", 0)] == pytest.approx(1.5)  # above the oracle's expected return
    frozen = after[[("frozen", 0), ("frozen", 1)]]
    assert frozen.mean() == pytest.approx(0.0)  # the floor scores 0 on average
    assert (scores["note"] == "").all()


def test_a_phase_whose_floor_reaches_the_oracle_is_not_scored():
    records = [
        record("T", "F", "frozen", 0, [0.98, 0.2], [1.0, 1.0]),  # phase 0: gap 0.02 < 0.05
        record("T", "F", "a", 0, [0.99, 0.6], [1.0, 1.0]),
        record("U", "G", "a", 0, [0.5, 0.5], [1.0, 1.0]),  # no frozen run on task U
    ]
    scores = normalized_scores(*tables_of(records), floor_method="frozen", min_gap=0.05)
    by_key = scores.set_index(["task", "method", "phase"])
    assert np.isnan(by_key.loc[("T", "a", 0), "score"])
    assert by_key.loc[("T", "a", 0), "note"] == "oracle - floor < 0.05: not scored"
    assert by_key.loc[("T", "a", 1), "score"] == pytest.approx(0.5)
    assert np.isnan(by_key.loc[("U", "a", 1), "score"])
    assert by_key.loc[("U", "a", 1), "note"] == "no frozen run: no floor"


def _suite(tmp_path, scores_by_family, seeds=3):
    """frozen at 0.2, oracle 1.0, one shift per task; method m's phase-1 reward gives the
    score listed (score = (reward - 0.2) / 0.8)."""
    records = []
    for family, by_method in scores_by_family.items():
        for seed in range(seeds):
            records.append(record(family, family, "frozen", seed, [0.2, 0.2], [1.0, 1.0]))
            for method, score in by_method.items():
                noise = 0.01 * seed
                records.append(
                    record(
                        family, family, method, seed, [0.5, 0.2 + 0.8 * (score + noise)], [1.0, 1.0]
                    )
                )
    methods = ["frozen", *next(iter(scores_by_family.values()))]
    return write_results(tmp_path, records, protocol({f: f for f in scores_by_family}, methods))


def test_leaderboard_ranks_by_iqm_and_says_which_neighbours_are_not_separated(tmp_path):
    out = _suite(
        tmp_path,
        {
            "A": {"good": 0.8, "close": 0.78, "bad": 0.1},
            "B": {"good": 0.9, "close": 0.85, "bad": 0.2},
        },
    )
    result = compute(*read_tables(out / "results"), reps=500)
    board = leaderboard(result["aggregates"])
    assert list(board["method"]) == ["good", "close", "bad", "frozen"]
    verdicts = dict(zip(board["method"], board["next below"]))
    assert verdicts["good"].startswith("separated from close")  # 6 of 6 pairs won per family
    assert verdicts["close"].startswith("separated from bad")
    assert verdicts["bad"].startswith("separated from frozen")
    assert verdicts["frozen"] == "none (last)"  # no empty cell
    table = result["aggregates"].table.set_index("method")
    # IQM of good's six scores (0.8, 0.81, 0.82, 0.9, 0.91, 0.92): the middle four.
    assert table.loc["good", "iqm"] == pytest.approx((0.81 + 0.82 + 0.9 + 0.91) / 4)
    assert table.loc["good", "optimality_gap"] == pytest.approx(1 - 0.86)


def test_two_seeds_never_separate_and_ties_do_not_either(tmp_path):
    out = _suite(tmp_path, {"A": {"one": 0.5, "two": 0.5}}, seeds=2)
    board = leaderboard(compute(*read_tables(out / "results"), reps=200)["aggregates"])
    assert all(v.startswith("not separated") for v in board["next below"].iloc[:-1])
    assert "fewer than 3 seeds" in board["next below"].iloc[0]


def test_a_family_that_flips_the_ranking_is_flagged(tmp_path):
    out = _suite(
        tmp_path, {"A": {"x": 0.9, "y": 0.1}, "B": {"x": 0.8, "y": 0.2}, "C": {"x": 0.3, "y": 0.6}}
    )
    result = compute(*read_tables(out / "results"), reps=200)
    flips = result["aggregates"].flips
    assert list(flips["family"]) == ["C"]
    assert flips.iloc[0]["aggregate_order"] == "x > y"
    assert flips.iloc[0]["family_order"] == "y > x"
    card = write_scorecard(out, reps=200).read_text()
    assert "Ranking flips: C order(s) some methods against the aggregate" in card
    for name in (
        "aggregate_intervals",
        "performance_profiles",
        "improvement_matrix",
        "recovery_grid",
    ):
        assert (out / "figures" / f"{name}.png").stat().st_size > 10_000
    for suffix in ("html", "csv", "json"):
        assert (out / f"scorecard.{suffix}").is_file()


def _two_shift_suite(tmp_path, seeds=6):
    """Family F with two shifts, family G with one; the floor at 0.2, the oracle at 1.0."""
    rng = np.random.default_rng(7)
    records = []
    for seed in range(seeds):
        for task, phases in (("F", 3), ("G", 2)):
            records.append(record(task, task, "frozen", seed, [0.2] * phases, [1.0] * phases))
            for method, level in (("a", 0.6), ("b", 0.4)):
                rewards = [0.5, *rng.uniform(level - 0.3, level + 0.3, phases - 1)]
                records.append(record(task, task, method, seed, rewards, [1.0] * phases))
    proto = protocol({"F": "F", "G": "G"}, ["frozen", "a", "b"])
    return write_results(tmp_path, records, proto)


def test_each_run_counts_once_per_family_whatever_its_shifts(tmp_path):
    tables, benchmark = read_tables(_two_shift_suite(tmp_path) / "results")
    result = compute(tables, benchmark, reps=200)
    units, scores = result["units"], result["scores"]
    mine = units[(units["method"] == "a") & (units["family"] == "F") & (units["seed"] == 4)]
    by_hand = scores[(scores["method"] == "a") & (scores["task"] == "F") & (scores["seed"] == 4)]
    assert mine["score"].item() == pytest.approx(by_hand.loc[by_hand["phase"] >= 1, "score"].mean())
    assert mine["phases"].item() == 2
    # 6 runs x 2 families per method: F's two shifts no longer weigh twice G's one.
    table = result["aggregates"].table.set_index("method")
    assert table.loc["a", "scores"] == 12 and table.loc["a", "families"] == 2
    matrix, families = score_matrix(units, "a")
    assert matrix.shape == (6, 2) and families == ["F", "G"]
    assert table.loc["a", "iqm"] == pytest.approx(trimmed_iqm(matrix.ravel()))


def test_no_rectangular_matrix_is_said_so(tmp_path):
    tables, benchmark = read_tables(_two_shift_suite(tmp_path) / "results")
    result = compute(tables, benchmark, reps=50)
    assert matrix_note(result["units"], ["a", "b"]) == (
        "a (runs x families) matrix of 6 runs x 2 families per method"
    )
    units = result["units"]
    ragged = units.drop(index=units.index[units["method"] == "b"][-1])  # one run of b missing
    assert score_matrix(ragged, "b") is None
    assert matrix_note(ragged, ["a", "b"]).startswith("b's families hold 5 to 6 runs")


@pytest.fixture(scope="module")
def rliable():
    return rliable_modules()


def test_the_aggregates_are_rliables_on_the_score_matrix(tmp_path, rliable):
    library, metrics = rliable
    tables, benchmark = read_tables(_two_shift_suite(tmp_path) / "results")
    reps = 4000
    result = compute(tables, benchmark, reps=reps)
    aggregates = result["aggregates"]
    table = aggregates.table.set_index("method")
    matrices = {m: score_matrix(result["units"], m)[0] for m in ("a", "b")}
    for method, matrix in matrices.items():
        points, intervals = rliable_intervals(
            library,
            matrix,
            lambda s: np.array([metrics.aggregate_iqm(s), metrics.aggregate_optimality_gap(s)]),
            reps,
            seed=1,
        )
        (iqm, gap), (lower, upper) = points["m"], intervals["m"]
        row = table.loc[method]
        assert row["iqm"] == pytest.approx(iqm) and row["optimality_gap"] == pytest.approx(gap)
        # Two independent bootstraps of 4000 reps: bounds agree to Monte-Carlo error.
        assert row["iqm_lower"] == pytest.approx(lower[0], abs=0.03)
        assert row["iqm_upper"] == pytest.approx(upper[0], abs=0.03)
        assert row["gap_lower"] == pytest.approx(lower[1], abs=0.03)
        assert row["gap_upper"] == pytest.approx(upper[1], abs=0.03)
    improvement = aggregates.improvement.set_index(["method_x", "method_y"])
    assert improvement.loc[("a", "b"), "probability"] == pytest.approx(
        metrics.probability_of_improvement(matrices["a"], matrices["b"])
    )
