"""Is each task of a benchmark calibrated: learnable, and does its shift cost the warm start?

A family measures adaptation only if both hold (docs/benchmark.md, "Calibration"):

- **learnable**: some method's score (its mean over seeds) reaches ``LEARNABLE`` on the first
  phase, within the phase's budget. Where the first phase is not scored (the warm start is
  already within ``min_gap`` of the oracle there), the first scored phase is used instead, and
  the table names it.
- **the shift costs**: the floor (the warm start, never updated) falls short of the oracle by at
  least ``SHIFT_COST`` more after the first shift than before it on average, and more in every
  seed of the floor method. Measured as a shortfall (oracle - floor), so a phase whose oracle
  is lower or higher does not count as a cost or hide one.

Beside them, what the first shift costs a policy that has adapted: per method, its reward over
the last quarter of the phase before the shift minus its reward over the first quarter of the
phase after (from the reward curves), and whether the method that drops most drops by
``SHIFT_COST`` or more on average and in every seed at all. A warm start that was never good
at the first regime pays little for leaving it; a method that learned the first regime pays for
the shift all the same.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sao_online.benchmark.scorecard_tables import fixed

#: A task is learnable when some method's mean score reaches this on its first scored phase.
LEARNABLE = 0.5
#: A shift costs when the floor's shortfall from the oracle grows by at least this (reward units).
SHIFT_COST = 0.1


def _shortfalls(scores: pd.DataFrame, floor_method: str) -> pd.DataFrame:
    """Per (task, phase, seed) of the floor method: oracle - its mean reward over the phase."""
    floor = scores[scores["method"] == floor_method]
    return floor.assign(shortfall=floor["oracle_mean"] - floor["reward_mean"])[
        ["task", "phase", "seed", "shortfall"]
    ]


def phase_table(scores: pd.DataFrame, order: list[str], floor_method: str) -> pd.DataFrame:
    """Per task and phase: the floor's reward, the oracle, and each method's mean score.

    ``scores`` is :func:`~sao_online.benchmark.scores.normalized_scores`' frame. The floor is
    its warm start's; with several warm starts, the mean of their floors with the lowest and
    highest. A method's cell is the mean over its seeds with the lowest and highest seed, or
    ``not scored`` where no warm start's phase is scored.
    """
    rows = []
    methods = [m for m in order if m != floor_method and m in set(scores["method"])]
    if "warm_start_seed" not in scores:
        scores = scores.assign(warm_start_seed=0)
    for (task, phase), part in scores.groupby(["task", "phase"], sort=True):
        first = part.iloc[0]
        floors = part.groupby("warm_start_seed")["floor"].first().to_numpy(float)
        floor = f"{floors.mean():.3f}"
        if len(floors) > 1:
            floor += f" [{floors.min():.3f}, {floors.max():.3f}]"
        row = {
            "task": task,
            "phase": f"{int(phase)}: {first['phase_name']}",
            f"{floor_method} reward": floor,
            "oracle": f"{first['oracle']:.3f}",
        }
        for method in methods:
            values = part.loc[part["method"] == method, "score"].to_numpy(float)
            values = values[np.isfinite(values)]
            if (part["note"] != "").all():
                row[method] = "not scored"
            elif len(values):
                low, mean, high = (fixed(v) for v in (values.min(), values.mean(), values.max()))
                row[method] = f"{mean} [{low}, {high}]"
            else:
                row[method] = "—"
        rows.append(row)
    return pd.DataFrame(rows)


def _window_mean(curve: pd.DataFrame, start: float, end: float) -> float:
    """Episode-weighted mean reward of the curve's bins that start in [start, end)."""
    inside = curve[(curve["start"] >= start) & (curve["start"] < end)]
    if not inside["episodes"].sum():
        return float("nan")
    return float((inside["reward_mean"] * inside["episodes"]).sum() / inside["episodes"].sum())


def shift_drops(curves: pd.DataFrame, shifts: pd.DataFrame) -> pd.DataFrame:
    """Per run: its reward over the last quarter of the phase before the first shift minus its
    reward over the first quarter of the phase after it (``drop``; NaN without a shift)."""
    rows = []
    firsts = shifts[shifts["shift"] == 1].set_index(["task", "method", "seed"])["tau"]
    seconds = shifts[shifts["shift"] == 2].set_index(["task", "method", "seed"])["tau"]
    for key, curve in curves.groupby(["task", "method", "seed"], sort=True):
        if key not in firsts.index:
            continue
        tau = float(firsts[key])
        start = float(curve["start"].min())
        end = float(seconds[key]) if key in seconds.index else float(curve["end"].max())
        before = _window_mean(curve, tau - (tau - start) / 4, tau)
        after = _window_mean(curve, tau, tau + (end - tau) / 4)
        rows.append(dict(zip(["task", "method", "seed"], key), drop=before - after))
    return pd.DataFrame(rows, columns=["task", "method", "seed", "drop"])


def checks(
    scores: pd.DataFrame,
    floor_method: str,
    curves: pd.DataFrame | None = None,
    shifts: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per task: the two calibration checks, each with the numbers it was decided on, and (with
    ``curves`` and ``shifts``) what the first shift costs the method that drops most."""
    shortfalls = _shortfalls(scores, floor_method)
    drops = (
        shift_drops(curves, shifts).dropna() if curves is not None and shifts is not None else None
    )
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
            row["best score (phase)"] = f"{best} {fixed(means[best])} (phase {phase})"
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
        if drops is not None:
            row.update(_largest_drop(drops[drops["task"] == task], floor_method))
        row["what to change"] = advice(row["learnable"] == "yes", row["shift costs"] == "yes")
        rows.append(row)
    return pd.DataFrame(rows)


#: What to change in a task's config when a check fails (the settings named are its fields;
#: the scorecard's calibration paragraph says why, :data:`EXPLAINED`).
NOT_LEARNABLE = "a longer first phase, or optim.lr / regularizers.kl_coef"
COSTS_NOTHING = "a warm start leaning to the first regime: model.warm_start_oracle_share > 0"
EXPLAINED = (
    "Where a check fails, the last column says what to change. Not learnable: no method got "
    "far enough in the first phase; give it more episodes (the first shift later, "
    "budget.episodes up), or make learning easier (optim.lr; regularizers.kl_coef, a pull to "
    "the warm start; a warm start that copies the task's format, model.warm_start_steps). The "
    "shift costs nothing: the warm start is undecided, as good in every regime, so `frozen` "
    "is hard to beat and the scores say little; lean it to the first regime "
    "(model.warm_start_oracle_share above 0, model.warm_start_regimes: schedule, "
    "model.warm_start_phase_weights weighting the first phase)."
)


def advice(learnable: bool, shift_costs: bool) -> str:
    """What to change in a task whose calibration fails (``"nothing"`` when both checks pass)."""
    parts = ([] if learnable else [NOT_LEARNABLE]) + ([] if shift_costs else [COSTS_NOTHING])
    return "; ".join(parts) or "nothing"


def _largest_drop(drops: pd.DataFrame, floor_method: str) -> dict[str, str]:
    learners = drops[drops["method"] != floor_method]
    if not len(learners):
        return {"costs an adapted method": "no", "largest drop at shift 1": "no shift"}
    by_method = learners.groupby("method")["drop"]
    method = by_method.mean().idxmax()
    own = learners.loc[learners["method"] == method, "drop"]
    costs = own.mean() >= SHIFT_COST and bool((own > 0).all())
    return {
        "costs an adapted method": "yes" if costs else "no",
        "largest drop at shift 1": (
            f"{method} {fixed(own.mean())} (seeds {fixed(own.min())} to {fixed(own.max())})"
        ),
    }


def tables(result: dict, tables: dict[str, pd.DataFrame], floor_method: str) -> list[pd.DataFrame]:
    """The checks per task and the per-phase table of a scorecard's ``result`` (from
    :func:`~sao_online.benchmark.scorecard.compute`) and its results ``tables``."""
    scores = result["scores"]
    return [
        checks(scores, floor_method, tables["curves"], tables["shifts"]),
        phase_table(scores, result["methods"], floor_method),
    ]
