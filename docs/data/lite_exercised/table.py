"""The table of what the lite tier's runs exercised, generated from ``runs.csv`` (never typed).

Usage: python table.py          # rewrites the table between the marker pair in docs/benchmark.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from marked_table import markdown, replace_marked  # noqa: E402  (docs/data is not a package)

PAGE = HERE.parents[1] / "benchmark.md"
OPEN = "<!-- lite-exercised table -->\n"
END = "<!-- end lite-exercised table -->"


def _largest(values: pd.Series, digits: int) -> str:
    values = values.dropna()
    return f"{values.max():.{digits}f}" if len(values) else "—"


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per method: its runs, updates and what DIS and the staleness bound did."""
    rows = []
    for method, part in runs.groupby("method", sort=True):
        rows.append(
            {
                "method": method,
                "runs": len(part),
                "seed sets": ", ".join(sorted(part["seed_set"].astype(str).unique())),
                "updates": int(part["updates"].sum()),
                "critic-only updates": int(part["critic_only_updates"].sum()),
                "updates with DIS": int(part["dis_updates"].sum()),
                "tokens DIS masked": (
                    f"{part['masked_tokens'].sum():.0f}"
                    if part["masked_tokens"].notna().any()
                    else "—"
                ),
                "largest ratio": _largest(part["ratio_max"], 5),
                "largest staleness": _largest(part["staleness_max"], 0),
            }
        )
    return pd.DataFrame(rows)


def render(page: str, runs: pd.DataFrame) -> str:
    return replace_marked(page, PAGE, OPEN, END, markdown(summary(runs)))


if __name__ == "__main__":
    PAGE.write_text(render(PAGE.read_text(), pd.read_csv(HERE / "runs.csv")))
