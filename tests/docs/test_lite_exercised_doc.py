"""docs/benchmark.md's table of what the lite tier's runs exercised is generated from the kept
rows, and the rows say what the page says of them: on the lite tier's sync runtime DIS masked no
token and no trained token was stale, so the lite results say nothing about either."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from docs_scripts import docs_script

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "lite_exercised"


def test_the_table_is_generated_from_the_kept_rows():
    table = docs_script("data/lite_exercised/table")
    page = table.PAGE.read_text()
    assert table.render(page, pd.read_csv(DATA / "runs.csv")) == page, (
        "run docs/data/lite_exercised/table.py"
    )


def test_the_kept_rows_are_every_lite_run_and_show_dis_and_staleness_idle():
    runs = pd.read_csv(DATA / "runs.csv")
    kept = pd.read_csv(
        Path(__file__).resolve().parents[2]
        / "benchmarks"
        / "lite"
        / "seeds-0-5"
        / "results"
        / "runs.csv"
    )
    assert len(runs) == len(kept)  # one row per kept run
    assert runs["masked_tokens"].fillna(0).sum() == 0  # DIS masked nothing
    assert (runs["staleness_max"] == 0).all()  # every trained token was fresh
    assert runs["ratio_max"].dropna().max() < 1.001  # every ratio 1 up to rounding
    assert (runs.loc[runs["method"] == "sao", "critic_only_updates"] > 0).all()
