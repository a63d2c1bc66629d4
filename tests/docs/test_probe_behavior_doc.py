"""docs/calibration.md's table of what the calibration probes' policies did is generated from the
kept rows, and the rows say what the page says of them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from docs_scripts import docs_script

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "probe_behavior"
LEARNERS = ["sao", "sao_running_mean"]


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return pd.read_csv(DATA / "runs.csv")


def _share(rows: pd.DataFrame, behavior: str) -> float:
    """Mean over seeds of the share of ``behavior`` (0 where a seed never did it)."""
    shares = rows[rows["behavior"] == behavior].groupby("seed")["share"].sum()
    return float(shares.reindex(rows["seed"].unique(), fill_value=0.0).mean())


def _reward(rows: pd.DataFrame, behavior: str | None = None) -> float:
    if behavior is not None:
        rows = rows[rows["behavior"] == behavior]
    return float((rows["reward_mean"] * rows["episodes"]).sum() / rows["episodes"].sum())


def test_the_table_is_generated_from_the_kept_rows(runs):
    table = docs_script("data/probe_behavior/table")
    page = table.PAGE.read_text()
    assert table.render(page, runs) == page, "run docs/data/probe_behavior/table.py"


def test_the_shares_of_each_run_and_phase_add_up_to_one(runs):
    totals = runs.groupby(["probe", "task", "method", "seed", "phase"])["share"].sum()
    assert totals.between(0.999, 1.001).all()


def test_each_row_of_the_table_is_one_probe_and_no_share_exceeds_one(runs):
    """Probes may share a task name (the CodeShift ones): a row pools one probe's seeds."""
    table = docs_script("data/probe_behavior/table").summary(runs)
    assert len(table) == len(runs.groupby(["probe", "task", "phase", "method"]))
    for column in ("most common first action: share", "next: share"):
        shares = table[column].str.extract(r" (\d\.\d\d) \[")[0].dropna().astype(float)
        assert len(shares) and (shares <= 1.0).all(), column


@pytest.mark.parametrize("task", ["ToolShift-long", "ToolShift-d2", "ToolShift-h128-long"])
def test_tool_shift_learners_choose_calc_but_miscopy_more_than_the_warm_start(runs, task):
    first = runs[(runs["task"] == task) & (runs["phase"] == 0)]
    frozen = first[first["method"] == "frozen"]
    for method in LEARNERS:
        rows = first[first["method"] == method]
        assert _share(rows, "calc/v1") > 0.9 > _share(frozen, "calc/v1")
        assert _reward(rows, "calc/v1") < _reward(frozen, "calc/v1") - 0.05


def test_reason_shift_learners_keep_the_first_format_and_earn_nothing_after_the_shift(runs):
    for task in ("ReasonShift-s20-r0", "ReasonShift-s25-r25"):
        after = runs[(runs["task"] == task) & (runs["phase"] == 1)]
        assert _reward(after[after["method"] == "frozen"]) > 0.1
        for method in LEARNERS:
            rows = after[after["method"] == method]
            assert _share(rows, "answer") > 0.9
            assert _reward(rows) < 0.05


def test_code_shift_learners_keep_calling_the_removed_helper_after_the_shift(runs):
    code = runs[runs["task"] == "CodeShift-one"]
    first = code[code["phase"] == 0]
    for method in LEARNERS:
        rows = first[first["method"] == method]
        assert _share(rows, "v1/inclusive") > _share(
            first[first["method"] == "frozen"], "v1/inclusive"
        )
        assert _reward(rows, "v1/inclusive") > 0.9
    for phase in (1, 2):
        after = code[code["phase"] == phase]
        assert _reward(after[after["method"] == "frozen"]) > 0.1
        for method in LEARNERS:
            rows = after[after["method"] == method]
            assert _share(rows, "v1/unknown") > 0.8
            assert _reward(rows) < 0.05


def test_a_stronger_kl_keeps_other_formats_sampled_and_reward_comes_back(runs):
    weak = runs[runs["task"] == "ReasonShift-s20-r0"]
    strong = runs[runs["task"] == "ReasonShift-s20-r0-kl03"]
    for method in LEARNERS:
        before = strong[(strong["phase"] == 0) & (strong["method"] == method)]
        weak_before = weak[(weak["phase"] == 0) & (weak["method"] == method)]
        assert 1 - _share(before, "answer") > 0.05 > 1 - _share(weak_before, "answer")
        after = strong[(strong["phase"] == 1) & (strong["method"] == method)]
        assert _share(after, "tags") > 0.7
        frozen = strong[(strong["phase"] == 1) & (strong["method"] == "frozen")]
        assert _reward(after) > _reward(frozen) + 0.2


def test_the_wider_tool_shift_warm_start_copies_about_as_well_as_the_oracle(runs):
    first = runs[(runs["task"] == "ToolShift-h128-long") & (runs["phase"] == 0)]
    assert _reward(first[first["method"] == "frozen"], "calc/v1") > 0.9
    for method in LEARNERS:
        assert _reward(first[first["method"] == method], "calc/v1") < 0.8


def test_with_a_stronger_kl_code_shift_learners_move_to_kit_2_by_the_third_phase(runs):
    third = runs[(runs["task"] == "CodeShift-one-kl") & (runs["phase"] == 2)]
    for method in LEARNERS:
        rows = third[third["method"] == method]
        for _, seed in rows.groupby("seed"):
            assert seed.loc[seed["behavior"].str.startswith("v2/"), "share"].sum() > 0.5
        assert _reward(rows) > _reward(third[third["method"] == "frozen"]) + 0.3


def test_tool_shift_learners_at_the_gentler_rate_keep_the_copying_and_move_to_compute(runs):
    tool = runs[runs["task"] == "ToolShift-h128-lr2.5e-4"]
    first, after = tool[tool["phase"] == 0], tool[tool["phase"] == 1]
    frozen = first[first["method"] == "frozen"]
    for method in LEARNERS:
        rows = first[first["method"] == method]
        assert _share(rows, "calc/v1") > 0.9 > _share(frozen, "calc/v1")
        assert abs(_reward(rows, "calc/v1") - _reward(frozen, "calc/v1")) < 0.05
        renamed = after[after["method"] == method]
        assert _share(renamed, "compute/v1") > 0.5
        assert abs(_reward(renamed, "compute/v1") - _reward(rows, "calc/v1")) < 0.05


def test_style_shift_with_every_phase_in_its_warm_start_writes_the_third_style(runs):
    style = runs[runs["task"] == "StyleShift-lean-all"]
    second, third = style[style["phase"] == 1], style[style["phase"] == 2]
    assert _reward(third[third["method"] == "frozen"]) > 0.1
    for method in LEARNERS:
        assert _share(third[third["method"] == method], "classical") > 0.5
        assert _share(second[second["method"] == method], "cute") > 0.5
