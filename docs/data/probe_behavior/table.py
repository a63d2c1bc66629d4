"""The table of what the calibration probes' policies did, generated from ``runs.csv``.

Usage: python table.py          # rewrites the table between the marker pair in docs/calibration.md

Per task, phase and method, over the last quarter of the phase and the seeds: the two most
common first actions with their share (mean over seeds, [lowest, highest]) and their episodes'
mean reward, and the mean reward and turns of all episodes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from marked_table import markdown, replace_marked  # noqa: E402  (docs/data is not a package)

PAGE = HERE.parents[1] / "calibration.md"
OPEN = "<!-- probe-behavior table -->\n"
END = "<!-- end probe-behavior table -->"
METHOD_ORDER = {"frozen": 0}


def _weighted(part: pd.DataFrame, column: str) -> float:
    """``column``'s mean over the episodes behind ``part``'s rows."""
    return float((part[column] * part["episodes"]).sum() / part["episodes"].sum())


def _behavior_cell(part: pd.DataFrame, seeds: list[int]) -> tuple[str, str]:
    shares = part.groupby("seed")["share"].sum().reindex(seeds, fill_value=0.0)
    label = part["behavior"].iloc[0]
    return (
        f"{label} {shares.mean():.2f} [{shares.min():.2f}, {shares.max():.2f}]",
        f"{_weighted(part, 'reward_mean'):.2f}",
    )


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    keys = ["probe", "task", "phase", "method"]  # probes may share a task's name
    for (probe, task, phase, method), part in runs.groupby(keys, sort=False):
        seeds = sorted(part["seed"].unique())
        ranked = part.groupby("behavior")["share"].sum().sort_values(ascending=False, kind="stable")
        cells = [_behavior_cell(part[part["behavior"] == b], seeds) for b in ranked.index]
        cells += [("—", "—")] * (2 - len(cells))
        rows.append(
            {
                "probe": probe,
                "task": task,
                "phase": int(phase),
                "method": method,
                "seeds": len(seeds),
                "most common first action: share": cells[0][0],
                "its reward": cells[0][1],
                "next: share": cells[1][0],
                "its reward ": cells[1][1],
                "reward, all": f"{_weighted(part, 'reward_mean'):.2f}",
                "turns": f"{_weighted(part, 'turns_mean'):.2f}",
            }
        )
    frame = pd.DataFrame(rows)
    order = frame["method"].map(lambda m: (METHOD_ORDER.get(m, 1), m))
    return (
        frame.assign(_order=order)
        .sort_values(["probe", "task", "phase", "_order"], kind="stable")
        .drop(columns="_order")
    )


def render(page: str, runs: pd.DataFrame) -> str:
    return replace_marked(page, PAGE, OPEN, END, markdown(summary(runs)))


if __name__ == "__main__":
    PAGE.write_text(render(PAGE.read_text(), pd.read_csv(HERE / "runs.csv")))
