"""docs/benchmark.md's reading of the lite tier's kept results: what its prose says of the two
seed sets, the families and the calibration is what the kept data give (the tables themselves
are checked with every other benchmark table)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sao_online.benchmark.calibration import checks
from sao_online.benchmark.merge import replication_table
from sao_online.benchmark.scorecard import compute, read_tables
from sao_online.benchmark.scorecard_tables import family_table
from sao_online.benchmark.tables import REPS

LITE = Path(__file__).resolve().parents[2] / "benchmarks" / "lite"
SETS = ("seeds-0-2", "seeds-3-5")
FAMILIES = ["CodeShift", "GridShift", "ReasonShift", "StyleShift", "ToolShift"]


@pytest.fixture(scope="module")
def loaded():
    return {name: read_tables(LITE / name / "results") for name in (*SETS, "seeds-0-5")}


def test_both_sets_reach_the_same_conclusion_on_every_pair(loaded):
    table = replication_table([(name, loaded[name]) for name in SETS], REPS)
    shared = dict(zip(table["pair"], table["shared by all"]))
    assert all(shared.values())  # every pair: the same conclusion in both sets
    for learner in ("sao", "sao_running_mean"):
        assert shared[f"frozen vs {learner}"] == f"{learner} > frozen"
        for group in ("grpo", "grpo_dis"):
            assert shared[f"{group} vs {learner}"] == f"{learner} > {group}"
    assert shared["sao vs sao_running_mean"] == "not separated"
    assert shared["frozen vs grpo"] == "not separated"
    assert shared["frozen vs grpo_dis"] == "frozen > grpo_dis"
    assert shared["grpo vs grpo_dis"] == "grpo > grpo_dis"


def test_the_single_rollout_methods_rank_first_and_second_in_every_family(loaded):
    result = compute(*loaded["seeds-0-5"], REPS)
    table = family_table(result["aggregates"], result["methods"]).set_index("method")
    for family in FAMILIES:
        ranks = {m: int(table.loc[m, family].split("(#")[1].rstrip(")")) for m in table.index}
        assert {ranks["sao"], ranks["sao_running_mean"]} == {1, 2}, family
    # CodeShift: the running mean within rounding of the floor, its interval across it.
    units = result["aggregates"].families.set_index(["family", "method"])
    running_mean = units.loc[("CodeShift", "sao_running_mean")]
    assert (
        abs(running_mean["iqm"]) < 0.05
        and running_mean["iqm_lower"] < 0 < running_mean["iqm_upper"]
    )
    after = result["scores"]
    after = after[(after["task"] == "CodeShift") & (after["phase"] > 0)]
    mean = after[after["method"] == "sao_running_mean"]["score"]
    assert (mean < 0).any() and (mean > 0).any()  # below the floor in some, above in others


def test_every_family_is_learnable_and_pays_for_its_shift_on_each_set_and_pooled(loaded):
    for name in (*SETS, "seeds-0-5"):
        tables, benchmark = loaded[name]
        scores = compute(tables, benchmark, 200)["scores"]
        found = checks(scores, "frozen", tables["curves"], tables["shifts"]).set_index("task")
        assert sorted(found.index) == FAMILIES
        assert (found["shift costs"] == "yes").all(), name
        assert (found["learnable"] == "yes").all(), name


AMD_TASKS = ["CodeShift", "ReasonShift", "StyleShift"]


def test_three_families_ran_on_the_amd_epyc_and_grid_and_tool_shift_on_the_intel_xeon(loaded):
    tables, benchmark = loaded["seeds-0-5"]
    runs = tables["runs"]
    provenance = benchmark["provenance"]
    cpu = runs["provenance_id"].map(lambda key: provenance[key]["machine"]["cpu_model"])
    amd = runs["task"].isin(AMD_TASKS)
    assert set(cpu[amd]) == {"AMD EPYC"}
    assert set(cpu[~amd]) == {"Intel(R) Xeon(R) Processor"}
    sources = benchmark["sources"]
    assert [s["tasks"] for s in sources] == [FAMILIES, FAMILIES]  # the two merged seed sets
    for name, seeds in zip(SETS, ("0-2", "3-5")):
        parts = loaded[name][1]["sources"]
        assert [(p["folder"], p["tasks"]) for p in parts] == [
            (f"lite-earlier-{seeds}", ["CodeShift", "GridShift", "ToolShift"]),
            (f"style-reason-{seeds} (StyleShift)", ["StyleShift"]),
            (f"style-reason-{seeds} (ReasonShift)", ["ReasonShift"]),
        ]


def test_no_method_comes_back_within_style_shift_s_second_phase_in_either_set(loaded):
    scores = compute(*loaded["seeds-0-5"], 200)["scores"]
    second = scores[(scores["task"] == "StyleShift") & (scores["phase"] == 1)]
    learners = second[second["method"] != "frozen"]
    assert len(learners) == 24 and (learners["score"] < 0).all()
    third = scores[(scores["task"] == "StyleShift") & (scores["phase"] == 2)]
    single = third[third["method"].isin(["sao", "sao_running_mean"])]
    assert len(single) == 12 and (single["score"] > 0).all()  # part of the third won back


def test_the_kept_results_are_the_lite_tier_as_the_core_suite_configures_it(loaded):
    """Each kept set measured every task and method under the core suite's lite tier as it is
    configured now: a change to the tier's settings must come with results measured under it."""
    from sao_online.benchmark.protocol import config_differences, method_labels, protocol_of
    from sao_online.benchmark.suite import plan_tier
    from sao_online.config import AlgorithmConfig

    plan = plan_tier("core", "lite")
    _, benchmark = loaded["seeds-0-5"]
    kept = benchmark["protocol"]
    labels = method_labels(plan, [m["spec"] for m in kept["methods"].values()], [])
    now = protocol_of(plan, labels, [])
    assert sorted(kept["tasks"]) == sorted(now["tasks"]) == FAMILIES
    # A config field added since the results were kept counts only when set off its default.
    for name, task in now["tasks"].items():
        assert config_differences(kept["tasks"][name]["config"], task["config"]) == [], name
    for label, method in now["methods"].items():
        for name, algorithm in method["algorithm"].items():
            kept_algorithm = kept["methods"][label]["algorithm"][name]
            assert config_differences(kept_algorithm, algorithm, AlgorithmConfig) == [], label
    for name in SETS:
        assert loaded[name][1]["protocol"]["tasks"] == kept["tasks"]


def test_the_sessions_are_the_first_benchmark_s_code_shift_s_and_style_and_reason_shift_s(loaded):
    headroom = LITE.parent / "calibration" / "style-reason-headroom" / "results"
    theirs = read_tables(headroom)[1]["sessions"]
    for name, mine in zip(SETS, theirs):
        sessions = loaded[name][1]["sessions"]
        first, *code, last = sessions
        assert first["machine"]["cpu_model"] == "Intel(R) Xeon(R) Processor" and first["runs"] == 75
        assert {session["machine"]["cpu_model"] for session in code} == {"AMD EPYC"}
        assert 0 < sum(session["runs"] for session in code) < 15  # stopped commands recorded none
        assert last == mine and last["runs"] == 30
        assert all(session.get("ended", "finished") == "finished" for session in sessions)


AMD = LITE.parent / "calibration" / "lite-on-amd" / "results"
WARM_STARTS = LITE.parent / "warm-starts"


def _first_phase(folder: Path, method: str) -> pd.DataFrame:
    """Per task and seed, ``method``'s score on the first phase."""
    tables, benchmark = read_tables(folder)
    scores = compute(tables, benchmark, 200)["scores"]
    first = scores[(scores["phase"] == 0) & (scores["method"] == method)]
    return first.pivot_table(index="task", columns="seed", values="score")


def test_the_kept_warm_starts_are_the_ones_the_amd_runs_started_from(loaded):
    """StyleShift's and ReasonShift's kept lite runs record the kept warm start's weights; the
    other three families' AMD runs predate the record, so a frozen run from each kept warm start
    equals the AMD run it stands for, reward for reward."""
    check, _ = read_tables(WARM_STARTS / "lite-frozen-check" / "results")
    shipped = {
        path.name: json.loads((path / "warm_start.json").read_text())["weights"]
        for path in (WARM_STARTS / "lite").iterdir()
    }
    assert sorted(shipped) == FAMILIES
    kept_runs = loaded["seeds-0-5"][0]["runs"]
    for task in ("ReasonShift", "StyleShift"):
        recorded = kept_runs[kept_runs["task"] == task]["warm_start"]
        assert len(recorded) == 30 and set(recorded) == {shipped[task]}, task
    older = ["CodeShift", "GridShift", "ToolShift"]
    runs = check["runs"].set_index("task")
    assert set(runs["method"]) == {"frozen"} and set(runs["seed"]) == {0}
    assert {task: runs.loc[task, "warm_start"] for task in older} == {
        task: shipped[task] for task in older
    }
    kept_code, _ = read_tables(LITE / "seeds-0-2" / "results")
    amd, _ = read_tables(AMD)
    for task in older:
        source = kept_code if task == "CodeShift" else amd
        phases = source["phases"]
        theirs = phases[(phases.task == task) & (phases.method == "frozen") & (phases.seed == 0)]
        mine = check["phases"][check["phases"].task == task]
        assert mine["reward_mean"].tolist() == theirs["reward_mean"].tolist(), task  # exactly


def test_style_and_reason_shift_are_learnable_with_a_margin_on_every_seed_of_both_sets():
    first = _first_phase(LITE / "seeds-0-5" / "results", "sao_running_mean")
    for task in ("ReasonShift", "StyleShift"):
        assert list(first.columns) == [0, 1, 2, 3, 4, 5]
        assert (first.loc[task] > 0.55).all(), task  # the mark is 0.5
