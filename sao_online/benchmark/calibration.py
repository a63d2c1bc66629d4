"""Is each task of a benchmark calibrated: learnable, and does its shift cost the warm start?

A family measures adaptation only if both hold (docs/benchmark.md, "Calibration"):

- **learnable**: some method's score (its mean over seeds) reaches ``LEARNABLE`` on the first
  phase, within the phase's budget. Where the first phase is not scored (the warm start is
  already within ``min_gap`` of the oracle there), the first scored phase is used instead, and
  the table names it.
- **the shift costs**: the floor (the warm start, never updated) falls short of the oracle by at
  least ``SHIFT_COST`` more after the first shift than before it, and in every seed of the floor
  method. Measured as a shortfall (oracle - floor), so a phase whose oracle is lower or higher
  does not count as a cost or hide one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: A task is learnable when some method's mean score reaches this on its first scored phase.
LEARNABLE = 0.5
#: A shift costs when the floor's shortfall from the oracle grows by at least this (reward units).
SHIFT_COST = 0.1


def _fixed(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` places, never as "-0.00"."""
    return f"{round(float(value), digits) + 0.0:.{digits}f}"


def _shortfalls(scores: pd.DataFrame, floor_method: str) -> pd.DataFrame:
    """Per (task, phase, seed) of the floor method: oracle - its mean reward over the phase."""
    floor = scores[scores["method"] == floor_method]
    return floor.assign(shortfall=floor["oracle_mean"] - floor["reward_mean"])[
        ["task", "phase", "seed", "shortfall"]
    ]


def phase_table(scores: pd.DataFrame, order: list[str], floor_method: str) -> pd.DataFrame:
    """Per task and phase: the floor's reward, the oracle, and each method's mean score.

    ``scores`` is :func:`~sao_online.benchmark.scores.normalized_scores`' frame. A method's
    cell is the mean over its seeds with the lowest and highest seed, or the note of a phase
    that is not scored.
    """
    rows = []
    methods = [m for m in order if m != floor_method and m in set(scores["method"])]
    for (task, phase), part in scores.groupby(["task", "phase"], sort=True):
        first = part.iloc[0]
        row = {
            "task": task,
            "phase": f"{int(phase)}: {first['phase_name']}",
            f"{floor_method} reward": f"{first['floor']:.3f}",
            "oracle": f"{first['oracle']:.3f}",
        }
        for method in methods:
            values = part.loc[part["method"] == method, "score"].to_numpy(float)
            values = values[np.isfinite(values)]
            if first["note"]:
                row[method] = "not scored"
            elif len(values):
                low, mean, high = (_fixed(v) for v in (values.min(), values.mean(), values.max()))
                row[method] = f"{mean} [{low}, {high}]"
            else:
                row[method] = "—"
        rows.append(row)
    return pd.DataFrame(rows)


def checks(scores: pd.DataFrame, floor_method: str) -> pd.DataFrame:
    """Per task: the two calibration checks, each with the numbers it was decided on."""
    shortfalls = _shortfalls(scores, floor_method)
    learners = scores[(scores["method"] != floor_method) & scores["score"].notna()]
    rows = []
    for task in sorted(scores["task"].unique()):
        mine = learners[learners["task"] == task]
        row: dict = {"task": task}
        if len(mine):
            phase = int(mine["phase"].min())
            means = mine[mine["phase"] == phase].groupby("method")["score"].mean()
            best = means.idxmax()
            row["learnable"] = "yes" if means[best] >= LEARNABLE else "no"
            row["best score (phase)"] = f"{best} {_fixed(means[best])} (phase {phase})"
        else:
            row["learnable"] = "no"
            row["best score (phase)"] = "no scored phase"
        own = shortfalls[shortfalls["task"] == task].pivot(
            index="seed", columns="phase", values="shortfall"
        )
        if {0, 1} <= set(own.columns):
            growth = (own[1] - own[0]).dropna()
            costs = bool(len(growth)) and growth.mean() >= SHIFT_COST and bool((growth > 0).all())
            row["shift costs"] = "yes" if costs else "no"
            row[f"{floor_method} shortfall: phase 0 -> 1"] = (
                f"{own[0].mean():.3f} -> {own[1].mean():.3f} "
                f"({growth.mean():+.3f}; seeds {growth.min():+.3f} to {growth.max():+.3f})"
                if len(growth)
                else "—"
            )
        else:
            row["shift costs"] = "no"
            row[f"{floor_method} shortfall: phase 0 -> 1"] = f"no {floor_method} run or no shift"
        rows.append(row)
    return pd.DataFrame(rows)
