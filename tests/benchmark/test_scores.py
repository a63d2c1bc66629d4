"""The normalized score, its edge cases, the leaderboard and the per-family flags, on result
tables built by hand."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_synthetic import protocol, record, tables_of, write_results

from sao_online.benchmark.scorecard import compute, read_tables, write_scorecard
from sao_online.benchmark.scorecard_tables import leaderboard
from sao_online.benchmark.scores import normalized_scores


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
    table = result["aggregates"].table.set_index("method")
    # IQM of good's six scores (0.8, 0.81, 0.82, 0.9, 0.91, 0.92): the middle four.
    assert table.loc["good", "iqm"] == pytest.approx((0.81 + 0.82 + 0.9 + 0.91) / 4)
    assert table.loc["good", "optimality_gap"] == pytest.approx(1 - 0.86)


def test_two_seeds_never_separate_and_ties_do_not_either(tmp_path):
    out = _suite(tmp_path, {"A": {"one": 0.5, "two": 0.5}}, seeds=2)
    board = leaderboard(compute(*read_tables(out / "results"), reps=200)["aggregates"])
    assert all(v.startswith("not separated") for v in board["next below"] if v)
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
