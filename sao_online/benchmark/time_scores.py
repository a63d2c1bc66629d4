"""The time axis of the benchmark: how fast a run re-adapts in seconds of its clock, not episodes.

On the simulated runtime a run's ``wall_time`` is virtual seconds from its cost model, the same
on any machine, so a method that keeps the learner busier, or waits less for a group's slowest
member, re-adapts sooner in time at the same episodes. A task whose tier declares a time window
``W`` (seconds; ``time_window`` in the suite) is measured on that axis too, per shift k of a
run, on the seconds axis of :mod:`sao_online.analysis.time_axes`: the shift sits at the moment
the learner took the first episode of phase k, and the phase runs to the moment it took the
first of phase k + 1 (or its last episode):

- ``seconds_to_half_oracle``: the seconds after the shift until the phase's trailing mean
  reward over ``TIME_SMOOTH_FRACTION x W`` seconds first reaches half the phase's mean oracle
  reward (``results.HALF_ORACLE``, as on the episodes axis); right-censored at the phase's end
  (``seconds_censored``);
- ``window_reward_mean``: the mean reward of the phase's episodes the learner took within ``W``
  seconds of the shift (``window_episodes`` of them); ``window_cut`` when the phase ended first;
- in the scorecard, the window score: ``(window_reward_mean - floor) / (oracle - floor)`` with
  the floor and oracle of the phase's normalized score (``sao_online.benchmark.scores``), so 1
  is the oracle and 0 the warm start over the same ``W`` seconds for every method.

Both come from :func:`~sao_online.analysis.recovery_metrics` on ``x="seconds"``, so they mean
what the report's curves against seconds show.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

#: The trailing mean the time to 0.5 x oracle reads spans this fraction of the time window.
TIME_SMOOTH_FRACTION = 0.2

#: The result columns of one shift on the time axis (beside ``results.SHIFT_COLUMNS``' others).
TIME_SHIFT_COLUMNS = [
    "seconds_tau",
    "seconds_to_half_oracle",
    "seconds_censored",
    "seconds_available",
    "window_reward_mean",
    "window_episodes",
    "window_cut",
]


def time_score_settings(window: float) -> dict[str, float]:
    """What a task's time score is computed with: recorded in the protocol, so that results
    pooled together were scored alike."""
    return {"window": float(window), "smooth": TIME_SMOOTH_FRACTION * float(window)}


def _finite(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def time_shift_rows(
    episodes: pd.DataFrame, window: float, oracle_fraction: float
) -> dict[int, dict[str, Any]]:
    """Shift number -> the ``TIME_SHIFT_COLUMNS`` of one run's shift, from its episodes.

    Args:
        episodes: one run's episodes as :func:`~sao_online.analysis.load_runs` reads them.
        window: ``W``, seconds after each shift the window score reads.
        oracle_fraction: the share of the phase's oracle reward whose first crossing is timed.
    """
    from sao_online.analysis import recovery_metrics

    settings = time_score_settings(window)
    metrics = recovery_metrics(
        episodes,
        x="seconds",
        smooth=settings["smooth"],
        horizon=settings["window"],
        oracle_fraction=oracle_fraction,
    )
    rows = {}
    for row in metrics.itertuples(index=False):
        rows[int(row.change_point)] = {
            "seconds_tau": float(row.tau),
            "seconds_to_half_oracle": _finite(row.time_to_oracle_fraction),
            "seconds_censored": bool(row.oracle_fraction_censored),
            "seconds_available": _finite(row.time_available),
            "window_reward_mean": _finite(row.horizon_reward),
            "window_episodes": int(row.horizon_episodes),
            "window_cut": bool(row.time_available < window),
        }
    return rows


def window_scores(scores: pd.DataFrame, shifts: pd.DataFrame) -> pd.DataFrame:
    """Per run and shift: the window score, normalized with the floor and oracle of the phase
    the shift starts (``scores``: :func:`~sao_online.benchmark.scores.normalized_scores`).

    Returns:
        ``shifts`` (rows with a window only) with ``family``, ``phase``, ``floor``, ``oracle``
        and ``score`` (NaN where the phase is not scored), as the aggregates read them.
    """
    if "window_reward_mean" not in shifts:
        return pd.DataFrame(columns=[*shifts.columns, "family", "phase", "score"])
    timed = shifts[shifts["window_reward_mean"].notna()].copy()
    timed["phase"] = timed["shift"].astype(int)
    anchors = scores[
        ["task", "method", "seed", "phase", "family", "floor", "oracle", "gap", "score"]
    ]
    timed = timed.merge(
        anchors.rename(columns={"score": "phase_score"}),
        on=["task", "method", "seed", "phase"],
        how="left",
    )
    timed["score"] = np.where(
        timed["phase_score"].notna(),
        (timed["window_reward_mean"] - timed["floor"]) / timed["gap"],
        np.nan,
    )
    return timed.drop(columns="phase_score")
