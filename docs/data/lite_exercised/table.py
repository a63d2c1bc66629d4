"""The table of what the lite tier's runs exercised, generated from ``runs.csv`` (never typed).

Usage: python table.py          # rewrites the table between the marker pair in docs/benchmark.md
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "benchmark.md"
OPEN = "<!-- lite-exercised table -->\n"
END = "<!-- end lite-exercised table -->"
MARKER = re.compile(re.escape(OPEN) + r".*?" + re.escape(END), re.DOTALL)


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


def markdown(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join(lines) + "\n"


def render(page: str, runs: pd.DataFrame) -> str:
    if not MARKER.search(page):
        raise SystemExit(f"table.py: {PAGE} has no {OPEN.strip()} ... {END} pair")
    return MARKER.sub(lambda _: OPEN + markdown(summary(runs)) + END, page)


if __name__ == "__main__":
    PAGE.write_text(render(PAGE.read_text(), pd.read_csv(HERE / "runs.csv")))
