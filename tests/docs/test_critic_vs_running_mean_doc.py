"""docs/critic_vs_running_mean.md: what the prose says of the two seed sets is what the kept lite
results give (its tables are checked with every other benchmark table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sao_online.benchmark.scorecard import compute, read_tables
from sao_online.benchmark.versus import versus_table

LITE = Path(__file__).resolve().parents[2] / "benchmarks" / "lite"
FAMILIES = ["ReasonShift", "GridShift", "ToolShift", "CodeShift"]


def verdicts(folder: str) -> dict[str, str]:
    tables, benchmark = read_tables(LITE / folder / "results")
    scores = compute(tables, benchmark, 200)["scores"]
    table = versus_table(scores, "sao", ["sao_running_mean"], families=FAMILIES, reps=2000)
    return dict(zip(table["family"], table["verdict"]))


@pytest.fixture(scope="module")
def kept():
    return {folder: verdicts(folder) for folder in ("seeds-0-2", "seeds-3-5", "seeds-0-5")}


def test_grid_shift_separates_in_seeds_0_2_only_and_not_pooled(kept):
    assert kept["seeds-0-2"]["GridShift"] == "sao better"
    assert kept["seeds-3-5"]["GridShift"].startswith("not separated")
    assert kept["seeds-0-5"]["GridShift"].startswith("not separated")


def test_reason_tool_and_code_shift_are_not_separated_anywhere(kept):
    for family in ("ReasonShift", "ToolShift", "CodeShift"):
        for folder in ("seeds-0-2", "seeds-3-5", "seeds-0-5"):
            assert kept[folder][family].startswith("not separated")


def test_at_the_earlier_reason_shift_setting_seeds_0_2_found_the_running_mean_better():
    tables, benchmark = read_tables(
        LITE.parent / "calibration" / "lite-earlier-settings" / "results"
    )
    scores = compute(tables, benchmark, 200)["scores"]
    early = scores[scores["seed"].isin([0, 1, 2])]
    table = versus_table(early, "sao", ["sao_running_mean"], families=FAMILIES, reps=2000)
    assert dict(zip(table["family"], table["verdict"]))["ReasonShift"] == "sao_running_mean better"


def test_over_the_four_families_pooled_the_two_are_not_separated():
    tables, benchmark = read_tables(LITE / "seeds-0-5" / "results")
    scores = compute(tables, benchmark, 200)["scores"]
    table = versus_table(scores, "sao", ["sao_running_mean"], families=FAMILIES, reps=2000)
    assert table["family"].iloc[-1].startswith("all")
    assert table["verdict"].iloc[-1].startswith("not separated")


CRITIC = Path(__file__).resolve().parents[2] / "benchmarks" / "critic"
ABLATIONS = ["sao_running_mean", "sao_prompt_mean", "sao_lambda1", "sao_no_skip_obs"]


def ablation_verdicts(family: str, task: str) -> dict[str, dict[str, str]]:
    """Per seed set kept in ``benchmarks/critic/<family>``: sao's verdict against each ablation."""
    verdicts = {}
    for folder in ("seeds-0-2", "seeds-3-5", "seeds-0-5"):
        tables, benchmark = read_tables(CRITIC / family / folder / "results")
        scores = compute(tables, benchmark, 200)["scores"]
        table = versus_table(scores, "sao", ABLATIONS, families=[task], reps=2000)
        table = table[table["family"] == task]
        verdicts[folder] = dict(zip(table["other"], table["verdict"]))
    return verdicts


@pytest.fixture(scope="module")
def gridshift():
    return ablation_verdicts("gridshift", "GridShift-long")


def test_gridshift_sao_leads_the_per_distance_mean_in_one_set_and_pooled(gridshift):
    assert gridshift["seeds-0-2"]["sao_prompt_mean"] == "sao better"
    assert gridshift["seeds-3-5"]["sao_prompt_mean"].startswith("not separated")
    assert gridshift["seeds-0-5"]["sao_prompt_mean"] == "sao better"


def test_gridshift_the_running_mean_verdict_does_not_replicate(gridshift):
    assert gridshift["seeds-0-2"]["sao_running_mean"] == "sao better"
    assert gridshift["seeds-3-5"]["sao_running_mean"].startswith("not separated")
    assert gridshift["seeds-0-5"]["sao_running_mean"].startswith("not separated")


def test_gridshift_the_critic_ablations_are_not_separated_anywhere(gridshift):
    for folder in ("seeds-0-2", "seeds-3-5", "seeds-0-5"):
        for other in ("sao_lambda1", "sao_no_skip_obs"):
            assert gridshift[folder][other].startswith("not separated"), (folder, other)


@pytest.fixture(scope="module")
def reasonshift():
    return ablation_verdicts("reasonshift", "ReasonShift-s20-r0-kl03")


def test_reasonshift_only_one_set_separates_a_pair_and_it_favours_the_running_mean(reasonshift):
    assert reasonshift["seeds-0-2"]["sao_running_mean"] == "sao_running_mean better"
    for folder in ("seeds-3-5", "seeds-0-5"):
        for other in ABLATIONS:
            assert reasonshift[folder][other].startswith("not separated"), (folder, other)
    for other in ABLATIONS[1:]:
        assert reasonshift["seeds-0-2"][other].startswith("not separated"), other


TOOL_AND_CODE = ["sao_running_mean", "sao_lambda1", "sao_no_skip_obs"]


@pytest.fixture(scope="module")
def tool_and_code_scores():
    """Per results folder of the ToolShift and CodeShift critic suite, its runs' scores."""
    scores = {}
    for folder in ("seeds-0-2", "seeds-3-5", "seeds-0-5"):
        tables, benchmark = read_tables(CRITIC / "tool-and-code" / folder / "results")
        scores[folder] = compute(tables, benchmark, 200)["scores"]
    return scores


@pytest.fixture(scope="module")
def tool_and_code(tool_and_code_scores):
    verdicts = {}
    for folder, scores in tool_and_code_scores.items():
        table = versus_table(
            scores, "sao", TOOL_AND_CODE, families=["ToolShift", "CodeShift"], reps=2000
        )
        verdicts[folder] = {
            (row.other, row.family): row.verdict for row in table.itertuples(index=False)
        }
    return verdicts


def test_tool_and_code_one_pair_separates_in_seeds_0_2_and_does_not_replicate(tool_and_code):
    assert tool_and_code["seeds-0-2"][("sao_no_skip_obs", "ToolShift")] == "sao better"
    for folder, verdicts in tool_and_code.items():
        for (other, family), verdict in verdicts.items():
            if (folder, other, family) == ("seeds-0-2", "sao_no_skip_obs", "ToolShift"):
                continue
            if family.startswith("all"):
                continue  # the strata rows follow the families'
            assert verdict.startswith("not separated"), (folder, other, family)


def test_codeshift_without_skipping_observations_is_sao_run_for_run():
    for folder in ("seeds-0-2", "seeds-3-5"):
        tables, _ = read_tables(CRITIC / "tool-and-code" / folder / "results")
        phases = tables["phases"]
        code = phases[phases["task"] == "CodeShift"].set_index(["seed", "phase"])
        sao = code[code["method"] == "sao"]["reward_mean"]
        ablation = code[code["method"] == "sao_no_skip_obs"]["reward_mean"]
        assert len(sao) == 9 and sao.equals(ablation.loc[sao.index])


def test_seeds_3_5_ran_on_another_cpu_and_took_other_paths_from_the_lite_tiers_runs():
    def cpus(tables, benchmark, task):
        runs = tables["runs"][tables["runs"]["task"] == task]
        provenance = benchmark["provenance"]
        return {provenance[key]["machine"]["cpu_model"] for key in runs["provenance_id"]}

    critic_tables, critic = read_tables(CRITIC / "tool-and-code" / "seeds-3-5" / "results")
    lite_tables, lite = read_tables(LITE / "seeds-3-5" / "results")
    machine = cpus(critic_tables, critic, "ToolShift")
    assert len(machine) == 1 and not machine & cpus(lite_tables, lite, "ToolShift")
    key = ["task", "method", "seed"]
    both = critic_tables["runs"].merge(lite_tables["runs"], on=key, suffixes=("", "_lite"))
    assert len(both) == 18  # sao, the running mean and the floor; two families, three seeds
    same = both["config_hash"] == both["config_hash_lite"]
    # ToolShift: the same configs...; CodeShift: the lite tier has moved to another rate since.
    assert same[both["task"] == "ToolShift"].all() and not same[both["task"] == "CodeShift"].any()
    tool = lite_tables["phases"][lite_tables["phases"]["task"] == "ToolShift"]
    key = [*key, "phase"]
    rewards = critic_tables["phases"].merge(tool, on=key, suffixes=("", "_l"))
    assert len(rewards) == 18  # two phases of nine runs
    assert (rewards["reward_mean"] != rewards["reward_mean_l"]).mean() > 0.9  # ...other runs


def test_toolshift_seeds_3_5_the_critics_runs_fall_below_the_floor_after_the_rename(
    tool_and_code_scores,
):
    below = {}
    for folder in ("seeds-0-2", "seeds-3-5"):
        scores = tool_and_code_scores[folder]
        tool = scores[(scores["task"] == "ToolShift") & (scores["method"] != "frozen")]
        below[folder] = tool[tool["score"] < 0].groupby("method").size().to_dict()
    assert below["seeds-0-2"] == {}
    critic = ["sao", "sao_lambda1", "sao_no_skip_obs"]
    assert sum(below["seeds-3-5"].get(method, 0) for method in critic) == 7
    assert below["seeds-3-5"].get("sao_running_mean", 0) == 1
