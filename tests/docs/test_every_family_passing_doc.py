"""docs/benchmark.md's run of every family at its passing setting: what the prose says of it is
what the kept results give."""

from __future__ import annotations

from pathlib import Path

import pytest

from sao_online.benchmark.calibration import checks
from sao_online.benchmark.scorecard import compute, read_tables

CALIBRATION = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration"
FAMILIES = ["CodeShift", "GridShift", "ReasonShift", "StyleShift", "ToolShift"]


def scores_and_checks(folder: str):
    """A kept seed set's normalized scores and its per-task calibration checks."""
    tables, benchmark = read_tables(CALIBRATION / folder / "results")
    scores = compute(tables, benchmark, reps=200)["scores"]
    found = checks(scores, "frozen", tables["curves"], tables["shifts"]).set_index("task")
    return scores, found


@pytest.fixture(scope="module")
def kept():
    return scores_and_checks("every-family-passing")


def test_every_family_is_learnable_and_its_shift_costs_the_floor(kept):
    _, found = kept
    assert sorted(found.index) == FAMILIES
    assert (found["learnable"] == "yes").all()
    assert (found["shift costs"] == "yes").all()
    assert (found["costs an adapted method"] == "yes").all()
    drops = found["largest drop at shift 1"].str.split().str[1].astype(float)
    assert (drops >= 0.7).all()


def test_the_group_methods_fall_below_the_floor_after_the_shifts_where_the_page_says(kept):
    scores, _ = kept
    first = scores[scores["phase"] == 0].groupby(["task", "method"])["score"].mean()
    after = scores[scores["phase"] > 0]
    for method in ("grpo", "grpo_dis"):
        assert all(first[(task, method)] > 0 for task in FAMILIES)
        assert (
            after[(after["task"] == "CodeShift") & (after["method"] == method)]["score"] < 0
        ).all()
    for task in ("ReasonShift", "ToolShift"):
        rows = after[(after["task"] == task) & (after["method"] == "grpo_dis")]
        assert len(rows) == 3 and (rows["score"] < 0).all()


def test_no_method_comes_back_within_style_shift_s_second_phase(kept):
    scores, _ = kept
    second = scores[(scores["task"] == "StyleShift") & (scores["phase"] == 1)]
    learners = second[second["method"] != "frozen"]
    assert len(learners) == 12 and (learners["score"] < 0).all()


def test_seeds_3_5_replicate_every_check_but_code_shift_s_learnable_mark():
    scores, found = scores_and_checks("every-family-passing-seeds-3-5")
    assert set(scores["seed"]) == {3, 4, 5}
    assert (found["shift costs"] == "yes").all()
    assert found["learnable"].to_dict() == {
        task: ("no" if task == "CodeShift" else "yes") for task in FAMILIES
    }
