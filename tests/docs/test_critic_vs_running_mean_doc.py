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


def test_reason_and_grid_shift_separate_in_seeds_0_2_only_and_not_pooled(kept):
    assert kept["seeds-0-2"]["ReasonShift"] == "sao_running_mean better"
    assert kept["seeds-0-2"]["GridShift"] == "sao better"
    for family in ("ReasonShift", "GridShift"):
        assert kept["seeds-3-5"][family].startswith("not separated")
        assert kept["seeds-0-5"][family].startswith("not separated")


def test_tool_and_code_shift_are_not_separated_anywhere(kept):
    for family in ("ToolShift", "CodeShift"):
        for folder in ("seeds-0-2", "seeds-3-5", "seeds-0-5"):
            assert kept[folder][family].startswith("not separated")


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
