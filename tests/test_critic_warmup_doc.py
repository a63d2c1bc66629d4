"""docs/critic_warmup.md: its tables are the ones generated from the kept runs, and the runs are
what the page says they are (both warm-up settings, the same seeds, every shift)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

DATA = Path(__file__).resolve().parents[1] / "docs" / "data" / "critic_warmup"


def table_module():
    spec = importlib.util.spec_from_file_location("critic_warmup_table", DATA / "table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
