"""docs/calibration.md's run of every family at its passing setting: what the prose says of it is
what the kept results give."""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd
import pytest

from sao_online.benchmark.calibration import checks
from sao_online.benchmark.scorecard import compute, read_tables

CALIBRATION = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration"
FAMILIES = ["CodeShift", "GridShift", "ReasonShift", "StyleShift", "ToolShift"]


@functools.cache  # several tests read the same folders; none changes what it gets
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


BEHAVIOR = Path(__file__).resolve().parents[2] / "docs" / "data" / "probe_behavior" / "runs.csv"


def first_phase_end(probe: str) -> pd.DataFrame:
    """Per learner run of ``probe``: each first-submission label's share over the last quarter
    of the first phase, and its episodes' mean reward."""
    rows = pd.read_csv(BEHAVIOR)
    rows = rows[(rows["probe"] == probe) & (rows["phase"] == 0) & (rows["method"] != "frozen")]
    assert len(rows)
    return rows


def shares(rows: pd.DataFrame, pick) -> pd.Series:
    """Per (method, seed): the summed share of the labels ``pick`` keeps."""
    runs = rows.groupby(["method", "seed"])["share"].sum() * 0
    return runs.add(
        rows[rows["behavior"].map(pick)].groupby(["method", "seed"])["share"].sum(), fill_value=0
    )


def test_code_shift_s_learners_end_their_first_phase_on_kit_1_with_the_bound_unsettled():
    rows = first_phase_end("codeshift-stronger-kl")
    assert (shares(rows, lambda b: b.startswith("v1/")) > 0.9).all()
    wrong = shares(rows, lambda b: b in ("v1/exclusive", "v1/other"))
    assert (wrong > 0.2).all()
    missed = rows[rows["behavior"].isin(["v1/exclusive", "v1/other"])]
    assert missed["reward_mean"].between(0.4, 0.6).all()  # about half the tests pass


def code_shift_first_phase(scores, method: str, column: str) -> float:
    """``method``'s mean ``column`` over CodeShift's first phase, over the seeds."""
    rows = scores[(scores["task"] == "CodeShift") & (scores["phase"] == 0)]
    return float(rows[rows["method"] == method][column].mean())


def fall(before, after, method: str) -> float:
    """How much ``method``'s first-phase CodeShift reward fell from ``before`` to ``after``."""
    return code_shift_first_phase(before, method, "reward_mean") - code_shift_first_phase(
        after, method, "reward_mean"
    )


def test_a_warm_start_leaning_less_lowers_the_floor_and_the_learners_more():
    before_scores, before = scores_and_checks("every-family-passing")
    after_scores, after = scores_and_checks("codeshift-leaning-less")
    assert after.loc["CodeShift", "learnable"] == "no"
    assert after.loc["CodeShift", "shift costs"] == "yes"

    def growth(found):
        return float(
            found.loc["CodeShift", "frozen shortfall: phase 0 -> 1"].split("(")[1].split(";")[0]
        )

    floor_fall = fall(before_scores, after_scores, "frozen")
    assert floor_fall > 0
    for method in ("sao", "sao_running_mean"):
        assert fall(before_scores, after_scores, method) > floor_fall
        assert code_shift_first_phase(after_scores, method, "score") < code_shift_first_phase(
            before_scores, method, "score"
        )
    assert growth(after) < growth(before)
    rows = first_phase_end("codeshift-leaning-less")
    assert (shares(rows, lambda b: b.startswith("v1/")) > 0.8).all()
    assert (shares(rows, lambda b: b == "v1/inclusive") < 0.5).all()


def test_all_or_nothing_scoring_lowers_the_floor_and_the_learners_a_little_more():
    before_scores, before = scores_and_checks("every-family-passing")
    after_scores, after = scores_and_checks("codeshift-all-tests")
    assert after.loc["CodeShift", "learnable"] == "no"
    assert after.loc["CodeShift", "shift costs"] == "yes"
    floor_fall = fall(before_scores, after_scores, "frozen")
    assert floor_fall > 0
    for method in ("sao", "sao_running_mean"):
        assert floor_fall < fall(before_scores, after_scores, method) < floor_fall + 0.1
    rows = first_phase_end("codeshift-all-tests")
    wrong = shares(rows, lambda b: b in ("v1/exclusive", "v1/other"))
    assert wrong.between(0.2, 0.35).all()  # about a quarter, as with partial credit
    assert (rows[rows["behavior"].isin(["v1/exclusive", "v1/other"])]["reward_mean"] == 0).all()


@pytest.mark.parametrize(
    "folder",
    [
        "codeshift-all-tests",
        "codeshift-faster-rate",
        "codeshift-leaning-less",
        "every-family-passing",
        "every-family-passing-seeds-3-5",
    ],
)
def test_code_shift_s_learners_stop_rising_a_third_into_the_first_phase(folder):
    curves = pd.read_csv(CALIBRATION / folder / "results" / "curves.csv")
    curves = curves[
        (curves["task"] == "CodeShift") & curves["method"].isin(["sao", "sao_running_mean"])
    ]

    def third(start, end):
        part = curves[(curves["start"] >= start) & (curves["end"] <= end)]
        return part.groupby(["method", "seed"])["reward_mean"].mean()

    change = third(800, 1200) - third(400, 800)
    assert len(change) == 6 and (change.abs() < 0.1).all()


def test_a_warm_start_leaning_more_lowers_the_floor_and_copies_the_bound_worse():
    """One seed, on the AMD EPYC: compared with seed 0 of the next probe, from the same machine."""
    scores, found = scores_and_checks("codeshift-leaning-more")
    faster, _ = scores_and_checks("codeshift-faster-rate")
    assert set(scores["seed"]) == {0} and found.loc["CodeShift", "learnable"] == "no"
    for method in ("sao", "sao_running_mean"):
        assert 0.15 < code_shift_first_phase(scores, method, "score") < 0.35  # about a quarter
    seed_0 = faster[faster["seed"] == 0]
    assert code_shift_first_phase(scores, "frozen", "reward_mean") < code_shift_first_phase(
        seed_0, "frozen", "reward_mean"
    )
    rows = pd.read_csv(BEHAVIOR)
    rows = rows[(rows["phase"] == 0) & (rows["seed"] == 0) & (rows["behavior"] == "v1/other")]
    other = rows.set_index(["probe", "method"])["share"]
    for method in ("frozen", "sao", "sao_running_mean"):
        assert other[("codeshift-leaning-more", method)] > other[("codeshift-faster-rate", method)]
    learners = first_phase_end("codeshift-leaning-more")
    assert (shares(learners, lambda b: b.startswith("v1/")) > 0.9).all()


def test_at_twice_the_rate_code_shift_is_learnable_on_every_seed_and_its_shift_costs():
    scores, found = scores_and_checks("codeshift-faster-rate")
    assert set(scores["seed"]) == {0, 1, 2}
    assert found.loc["CodeShift", "learnable"] == "yes"
    assert found.loc["CodeShift", "shift costs"] == "yes"
    first = scores[(scores["task"] == "CodeShift") & (scores["phase"] == 0)]
    for method in ("sao", "sao_running_mean"):
        assert (first[first["method"] == method]["score"] > 0.5).all()
    faster, slower = (
        first_phase_end(p) for p in ("codeshift-faster-rate", "codeshift-stronger-kl")
    )

    def right(behavior: str) -> bool:
        return behavior == "v1/inclusive"

    for method in ("sao", "sao_running_mean"):
        assert shares(faster, right)[method].mean() > shares(slower, right)[method].mean()
    learners = faster[faster["method"].isin(["sao", "sao_running_mean"])]
    inclusive = learners[learners["behavior"] == "v1/inclusive"]
    assert (inclusive["reward_mean"] > 0.9).all()
    warm = pd.read_csv(BEHAVIOR)
    warm = warm[
        (warm["probe"] == "codeshift-faster-rate")
        & (warm["phase"] == 0)
        & (warm["method"] == "frozen")
        & (warm["behavior"] == "v1/inclusive")
    ]
    assert (warm["reward_mean"] > 0.9).all()  # as the warm start's do


def test_the_rate_is_not_what_changed_the_warm_start_the_machine_fitted_is():
    """At 5e-4 on the AMD EPYC, from the warm start the 1e-3 probe used, CodeShift passes too."""
    control_scores, control = scores_and_checks("codeshift-first-rate-amd")
    faster_scores, _ = scores_and_checks("codeshift-faster-rate")
    assert control.loc["CodeShift", "learnable"] == "yes"
    first = control_scores[(control_scores["task"] == "CodeShift") & (control_scores["phase"] == 0)]
    assert (first[first["method"] == "sao_running_mean"]["score"] > 0.5).all()

    def frozen(scores):
        rows = scores[(scores["task"] == "CodeShift") & (scores["method"] == "frozen")]
        return rows.set_index(["seed", "phase"])["reward_mean"].sort_index()

    pd.testing.assert_series_equal(frozen(control_scores), frozen(faster_scores))  # one warm start
    faster_first = faster_scores[
        (faster_scores["task"] == "CodeShift") & (faster_scores["phase"] == 0)
    ]
    slow = first[first["method"] == "sao_running_mean"].set_index("seed")["score"]
    fast = faster_first[faster_first["method"] == "sao_running_mean"].set_index("seed")["score"]
    assert (slow > fast.loc[slow.index]).all()  # higher at 5e-4 than at 1e-3, every seed
    intel, _ = scores_and_checks("every-family-passing")  # 5e-4, the Intel Xeon's warm start
    intel_floor = code_shift_first_phase(intel, "frozen", "reward_mean")
    assert code_shift_first_phase(control_scores, "frozen", "reward_mean") > intel_floor + 0.03
    rows = pd.read_csv(BEHAVIOR)
    rows = rows[(rows["phase"] == 0) & (rows["method"] == "frozen")]
    warm = {
        probe: shares(rows[rows["probe"] == probe], lambda b: b == "v1/inclusive").mean()
        for probe in ("codeshift-faster-rate", "codeshift-stronger-kl")
    }
    assert warm["codeshift-faster-rate"] > warm["codeshift-stronger-kl"]
    for folder in ("codeshift-first-rate-amd", "codeshift-faster-rate", "every-family-passing"):
        benchmark = read_tables(CALIBRATION / folder / "results")[1]
        cpus = {p["machine"]["cpu_model"] for p in benchmark["provenance"].values()}
        intel = folder == "every-family-passing"
        assert cpus == {"Intel(R) Xeon(R) Processor" if intel else "AMD EPYC"}


def test_the_critic_s_code_shift_runs_at_the_earlier_rate_on_the_amd_epyc_pass_too():
    folder = CALIBRATION.parent / "critic" / "tool-and-code" / "seeds-3-5" / "results"
    tables, benchmark = read_tables(folder)
    scores = compute(tables, benchmark, reps=200)["scores"]
    found = checks(scores, "frozen", tables["curves"], tables["shifts"]).set_index("task")
    assert found.loc["CodeShift", "learnable"] == "yes"
    config = benchmark["protocol"]["tasks"]["CodeShift"]["config"]
    assert config["optim"]["lr"] == 5e-4
    assert {p["machine"]["cpu_model"] for p in benchmark["provenance"].values()} == {"AMD EPYC"}


def test_the_amd_epyc_s_floor_is_higher_on_both_seed_sets():
    def floors(folder):
        phases = pd.read_csv(CALIBRATION.parent / folder / "results" / "phases.csv")
        rows = phases[
            (phases["task"] == "CodeShift")
            & (phases["method"] == "frozen")
            & (phases["phase"] == 0)
        ]
        return rows.set_index("seed")["reward_mean"]

    amd = [floors("calibration/codeshift-faster-rate"), floors("lite/seeds-3-5")]
    intel = [
        floors("calibration/every-family-passing"),
        floors("calibration/every-family-passing-seeds-3-5"),
    ]
    for mine, theirs in zip(amd, intel):
        assert mine.mean() > theirs.mean()
    assert pd.concat(amd).min() > pd.concat(intel).mean()
