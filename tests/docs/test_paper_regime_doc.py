"""docs/paper_regime.md: its tables are the ones generated from the kept data, the data came from
committed trees on the seed sets the page names, and each finding the page states holds in the
data of every seed set it names."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from docs_scripts import docs_script

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "paper_regime"
SINGLE = ("sao", "sao_running_mean")
GROUP = ("grpo_dis", "grpo")
QUARTER = ("set-1", "set-2")


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return pd.read_csv(DATA / "runs.csv")


@pytest.fixture(scope="module")
def shifts() -> pd.DataFrame:
    return pd.read_csv(DATA / "shifts.csv")


def _by_seed(shifts: pd.DataFrame, seed_set: str, shift: int, column: str) -> pd.DataFrame:
    """``column`` per seed (rows) and method (columns) for one seed set and shift."""
    chosen = shifts[(shifts["seed_set"] == seed_set) & (shifts["shift"] == shift)]
    return chosen.pivot(index="seed", columns="method", values=column)


def test_the_tables_are_generated_from_the_kept_data(runs, shifts):
    table = docs_script("data/paper_regime/table")
    page = table.PAGE.read_text()
    assert table.render(page, runs, shifts) == page, "run docs/data/paper_regime/table.py"
    assert table.FIGURE.is_file()


def test_the_seed_sets_are_disjoint_and_came_from_committed_trees(runs):
    seeds = {name: set(group["seed"]) for name, group in runs.groupby("seed_set")}
    assert seeds["set-1"] == {0, 1, 2} and seeds["set-2"] == {3, 4, 5}
    assert seeds["full"] == {0}
    for seed_set in QUARTER:
        chosen = runs[runs["seed_set"] == seed_set]
        assert set(chosen["method"]) == {*SINGLE, *GROUP} and len(chosen) == 12
        assert (chosen["episodes"] == 3072).all()
    full = runs[runs["seed_set"] == "full"]
    assert set(full["method"]) == set(SINGLE) and (full["episodes"] == 12288).all()
    record = json.loads((DATA / "provenance.json").read_text())
    assert set(record["sources"]) == {"full", *QUARTER}
    for source in record["sources"].values():
        assert source["dirty"] is False and len(source["commit"]) == 40


def test_the_regime_is_exercised_in_every_run(runs):
    assert (runs["updates"] == 96).all() and (runs["dropped"] == 0).all()
    assert (runs["share_at_bound"] >= 0.95).all()
    assert (runs["learner_wait_episodes_share"] <= 0.01).all()
    with_dis = runs[runs["method"] != "grpo"]
    masked = with_dis["masked_below"] + with_dis["masked_above"]
    assert masked.between(0.01, 0.03).all()
    assert (with_dis["masked_below"] > 10 * with_dis["masked_above"]).all()
    grpo = runs[runs["method"] == "grpo"]
    assert (grpo["masked_below"] + grpo["masked_above"] == 0).all()


def test_after_the_first_shift_single_rollout_recovers_and_groups_do_not(shifts):
    for seed_set in (*QUARTER, "full"):
        censored = _by_seed(shifts, seed_set, 1, "episodes_censored")
        assert not censored[list(SINGLE)].any().any()
    first = shifts[(shifts["shift"] == 1) & shifts["seed_set"].isin(QUARTER)]
    assert first[first["method"] == "grpo"]["episodes_censored"].all()
    reached = first[(first["method"] == "grpo_dis") & ~first["episodes_censored"]]
    assert list(zip(reached["seed"], reached["episodes_to_half_oracle"])) == [(4, 1016.0)]
    assert reached["seconds_censored"].all()
    for seed_set in QUARTER:
        regret = _by_seed(shifts, seed_set, 1, "regret_per_episode")
        assert (regret[list(GROUP)].min(axis=1) > regret[list(SINGLE)].max(axis=1)).all()


@pytest.mark.parametrize(("seed_set", "groups_first"), [("set-1", 0), ("set-2", 2)])
def test_at_the_second_shift_the_families_do_not_separate(shifts, seed_set, groups_first):
    before = _by_seed(shifts, seed_set, 2, "reward_before")
    assert (before[list(GROUP)].max(axis=1) < before[list(SINGLE)].min(axis=1) - 0.1).all()
    episodes = _by_seed(shifts, seed_set, 2, "episodes_to_half_oracle")
    both_first = episodes[list(GROUP)].max(axis=1) < episodes[list(SINGLE)].min(axis=1)
    assert both_first.sum() == groups_first
    singles_first = episodes[list(SINGLE)].max(axis=1) < episodes[list(GROUP)].min(axis=1)
    assert singles_first.sum() < 3  # interleaved in some seed: no family first in every seed


def _orders(shifts: pd.DataFrame, seed_set: str, shift: int, column: str) -> set[bool]:
    """Whether SAO's value is above the running mean's, per seed (the set of outcomes)."""
    values = _by_seed(shifts, seed_set, shift, column)
    return set(values["sao"] > values["sao_running_mean"])


@pytest.mark.parametrize("column", ["episodes_to_half_oracle", "regret_per_episode"])
def test_sao_against_the_running_mean_is_within_noise(shifts, column):
    for seed_set in QUARTER:
        assert _orders(shifts, seed_set, 1, column) == {True, False}
    assert _orders(shifts, "set-1", 2, column) == {True}  # SAO slower / more regret, every seed
    assert _orders(shifts, "full", 2, column) == {True}
    assert _orders(shifts, "set-2", 2, column) == {True, False}  # not replicated
