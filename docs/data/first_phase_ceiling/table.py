"""The table of what held the first phase near the mark, generated from ``runs.csv``.

Usage: python table.py          # rewrites the table between the marker pair in docs/calibration.md

Per setting, task and method, over the second half of the first phase and the seeds: how often
the policy makes the regime's rewarded choice and what those episodes earn (mean over seeds,
[lowest, highest]), the mean reward of all episodes, and the prompt kind whose right-choice
episodes earn least (the one most seeds name, with its mean reward over them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from marked_table import markdown, replace_marked  # noqa: E402  (docs/data is not a package)

PAGE = HERE.parents[1] / "calibration.md"
OPEN = "<!-- first-phase-ceiling table -->\n"
END = "<!-- end first-phase-ceiling table -->"


def _spread(values: pd.Series) -> str:
    return f"{values.mean():.2f} [{values.min():.2f}, {values.max():.2f}]"


def _weakest(part: pd.DataFrame) -> str:
    named = part[part["weakest_prompt"].fillna("") != ""]
    if named.empty:
        return "—"
    kind = named["weakest_prompt"].value_counts().index[0]
    those = named[named["weakest_prompt"] == kind]
    return f"{kind}: {those['weakest_prompt_reward'].mean():.2f} ({len(those)} of {len(part)})"


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    order = {"frozen": 0}
    keys = ["task", "setting", "method"]
    for (task, setting, method), part in runs.groupby(keys, sort=False):
        rows.append(
            {
                "task": task,
                "setting": setting,
                "method": method,
                "seeds": len(part),
                "right choice: share": _spread(part["right_choice_share"]),
                "its reward": _spread(part["right_choice_reward"]),
                "reward, all": _spread(part["reward_mean"]),
                "weakest prompt kind: its reward": _weakest(part),
            }
        )
    frame = pd.DataFrame(rows)
    rank = frame["method"].map(lambda m: (order.get(m, 1), m))
    return (
        frame.assign(_rank=rank)
        .sort_values(["task", "setting", "_rank"], kind="stable")
        .drop(columns="_rank")
    )


def render(page: str, runs: pd.DataFrame) -> str:
    return replace_marked(page, PAGE, OPEN, END, markdown(summary(runs)))


if __name__ == "__main__":
    PAGE.write_text(render(PAGE.read_text(), pd.read_csv(HERE / "runs.csv")))
