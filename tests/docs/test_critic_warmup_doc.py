"""docs/critic_warmup.md: its tables are the ones generated from the kept runs, and the runs are
what the page says they are (both warm-up settings, the same seeds, every shift)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from docs_scripts import docs_script

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "critic_warmup"


def table_module():
    return docs_script("data/critic_warmup/table")


def test_the_page_tables_are_generated_from_the_kept_runs():
    table = table_module()
    runs = pd.read_csv(DATA / "runs.csv")
    page = table.PAGE.read_text()
    assert table.render(page, runs) == page, "run docs/data/critic_warmup/table.py"
    marked = list(table.MARKER.finditer(page))
    shown = {(m["family"], m["seed_set"], int(m["shift"])) for m in marked}
    kept = set(zip(runs["family"], runs["seed_set"].astype(str), runs["shift"]))
    assert shown == kept, "every kept family, seed set and shift has its table, and only those"


def test_each_seed_ran_with_and_without_the_warm_up_at_every_shift():
    runs = pd.read_csv(DATA / "runs.csv")
    for (family, seed_set), group in runs.groupby(["family", "seed_set"]):
        settings = group.groupby("critic_warmup_steps")
        assert len(settings) == 2 and 0 in settings.groups, (family, seed_set)
        seeds_shifts = [set(zip(g["seed"], g["shift"])) for _, g in settings]
        assert seeds_shifts[0] == seeds_shifts[1], (family, seed_set)
    sets = runs.groupby("family")["seed_set"].unique()
    for family, names in sets.items():
        seeds = [
            set(runs[(runs["family"] == family) & (runs["seed_set"] == n)]["seed"]) for n in names
        ]
        for i, first in enumerate(seeds):
            for second in seeds[i + 1 :]:
                assert not first & second, f"{family}: seed sets must be disjoint"


def test_the_table_marks_censored_times():
    table = table_module()
    runs = pd.DataFrame(
        {
            "family": ["demo"] * 2,
            "seed_set": ["1"] * 2,
            "seed": [0, 0],
            "critic_warmup_steps": [10, 0],
            "warmup_episodes": [320, 0],
            "backend": ["local"] * 2,
            "shift": [1, 1],
            "shift_episode": [1000, 1000],
            "reward_before": [0.5, 0.7],
            "episodes_to_half_oracle": [1000.0, 640.0],
            "episodes_censored": [True, False],
            "seconds_to_half_oracle": [80.0, 30.0],
            "seconds_censored": [True, False],
            "regret_per_episode": [0.85, 0.7],
        }
    )
    rendered = table.shift_table(runs, "demo", "1", 1).splitlines()
    assert rendered[2] == "| 10 (320) | 0 | 0.50 | 1000+ | 80+ | 0.85 |"
    assert rendered[3] == "| 0 (0) | 0 | 0.70 | 640 | 30 | 0.70 |"
    with pytest.raises(ValueError):
        table.shift_table(runs, "demo", "2", 1)


def _demo(runs: pd.DataFrame, shift: int, steps: int) -> pd.DataFrame:
    chosen = runs[(runs["family"] == "demo") & (runs["shift"] == shift)]
    return chosen[chosen["critic_warmup_steps"] == steps].sort_values("seed")


def test_what_the_page_says_is_what_the_runs_show():
    runs = pd.read_csv(DATA / "runs.csv")
    page = table_module().PAGE.read_text()
    with_, without = _demo(runs, 1, 10), _demo(runs, 1, 0)
    higher = without["reward_before"].to_numpy() > with_["reward_before"].to_numpy()
    assert higher.sum() == 5 and list(without["seed"][~higher]) == [3]
    assert f"{without['reward_before'].median():.2f} against" in page
    assert f"against {with_['reward_before'].median():.2f}" in page
    low, high = without["reward_before"].min(), without["reward_before"].max()
    assert f"({low:.2f}-{high:.2f})" in page
    assert not (with_["episodes_censored"].any() or without["episodes_censored"].any())
    # first shift: in one set the warm-up-free runs are faster in most seeds, in the other slower
    faster = {
        seed_set: int(
            (
                g0["episodes_to_half_oracle"].to_numpy() < g10["episodes_to_half_oracle"].to_numpy()
            ).sum()
        )
        for seed_set, g0, g10 in (
            (s, without[without["seed_set"] == s], with_[with_["seed_set"] == s])
            for s in sorted(without["seed_set"].unique())
        )
    }
    assert sorted(faster.values()) == [1, 2]
    second_with, second_without = _demo(runs, 2, 10), _demo(runs, 2, 0)
    assert list(second_with["seed"][second_with["episodes_censored"]]) == [1, 4]
    assert not second_without["episodes_censored"].any()
    lower = (
        second_without["regret_per_episode"].to_numpy()
        < second_with["regret_per_episode"].to_numpy()
    )
    assert lower.sum() == 5
    tool = runs[runs["family"] == "tool_shift"].sort_values("seed")
    tool_with, tool_without = (
        tool[tool["critic_warmup_steps"] == 2],
        tool[tool["critic_warmup_steps"] == 0],
    )
    sooner = (
        tool_without["episodes_to_half_oracle"].to_numpy()
        < tool_with["episodes_to_half_oracle"].to_numpy()
    )
    assert sooner.sum() == 5
    gap = abs(tool_without["reward_before"].to_numpy() - tool_with["reward_before"].to_numpy())
    assert round(gap.max(), 2) <= 0.04
