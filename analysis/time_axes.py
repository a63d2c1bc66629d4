"""Time axes and shift times for one run: what "t" means in every metric and plot.

Three x-axes are supported:

- ``"world_time"``: the run's clock reading when the episode started (with the default episodes
  clock, the number of episodes started before it). Change points are given on this axis.
- ``"tokens"``: cumulative ``num_action_tokens`` over episodes in completion order (``episode``),
  including the episode itself and dropped episodes (their tokens were spent all the same).
- ``"seconds"``: ``wall_time``, seconds since the run started when the episode completed.

On the tokens and seconds axes a shift at clock time tau is placed at the smallest x of the
episodes that started at or after tau (the first cost already spent on the new phase).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

X_AXES = {
    "world_time": "clock time",
    "tokens": "action tokens generated",
    "seconds": "wall-clock seconds",
}

# The unit of each axis, for labels such as "window 20 clock units".
X_UNITS = {"world_time": "clock units", "tokens": "tokens", "seconds": "seconds"}

ChangePointsArg = Sequence[float] | Mapping[str, Sequence[float]] | None

# What the clock counts, by the schedule's clock name, for axis labels and units.
CLOCK_AXES = {
    "episodes": "episodes started",
    "steps": "environment steps",
    "versions": "learner versions",
    "seconds": "seconds (schedule clock)",
}


def run_clock(frame: pd.DataFrame) -> str | None:
    """The schedule clock shared by every run of ``frame`` (from ``load_runs``), else None."""
    experiments = set(frame["experiment"].unique()) if "experiment" in frame else None
    clocks = {
        info.get("clock")
        for key, info in frame.attrs.get("runs", {}).items()
        if experiments is None or key[0] in experiments
    }
    return clocks.pop() if len(clocks) == 1 else None


def axis_label(x: str, frame: pd.DataFrame) -> str:
    """A reader's label for axis ``x``: the clock axis says what it counts when it is known."""
    if x == "world_time":
        return CLOCK_AXES.get(run_clock(frame) or "", X_AXES[x])
    return X_AXES[x]


def axis_unit(x: str, frame: pd.DataFrame) -> str:
    """The unit of axis ``x`` (``"episodes started"``, ``"tokens"``, ...)."""
    if x == "world_time":
        return CLOCK_AXES.get(run_clock(frame) or "", X_UNITS[x])
    return X_UNITS[x]


def check_x_axis(x: str, frame: pd.DataFrame) -> None:
    """Raise a ValueError naming ``x`` when it is unknown or its columns are missing."""
    if x not in X_AXES:
        raise ValueError(f"x={x!r} is not an axis; choose one of {', '.join(X_AXES)}")
    needed = {
        "world_time": ["world_time"],
        "tokens": ["episode", "num_action_tokens", "world_time"],
        "seconds": ["wall_time", "world_time"],
    }[x]
    missing = [column for column in needed if column not in frame.columns]
    if missing:
        raise ValueError(f"x={x!r} needs the episode column(s) {', '.join(missing)}")


def x_values(run: pd.DataFrame, x: str) -> np.ndarray:
    """The x coordinate of each row of one run's episodes, aligned with ``run``'s rows."""
    if x == "world_time":
        return run["world_time"].to_numpy(dtype=float)
    if x == "seconds":
        return run["wall_time"].to_numpy(dtype=float)
    order = np.argsort(run["episode"].to_numpy(), kind="stable")
    tokens = run["num_action_tokens"].to_numpy(dtype=float)[order]
    cumulative = np.empty(len(run))
    cumulative[order] = np.cumsum(np.nan_to_num(tokens))
    return cumulative


def change_points_for_run(
    frame: pd.DataFrame, run: pd.DataFrame, key: tuple, explicit: ChangePointsArg = None
) -> list[float]:
    """The shift times (clock units) of one run, sorted, shifts only.

    Priority: ``explicit`` (one list for every run, or experiment name -> list), then the
    run's config as recorded by :func:`load_runs` in ``frame.attrs["runs"]``, then the first
    ``world_time`` of each new value of the ``phase`` column. Change points at or before 0
    are dropped: a change point at clock 0 is where the first phase starts, not a shift.

    Raises:
        ValueError: change points that are not strictly increasing.
    """
    experiment = key[0]
    if explicit is not None:
        if isinstance(explicit, Mapping):
            if experiment not in explicit:
                raise ValueError(f"change_points has no entry for experiment {experiment!r}")
            points = list(explicit[experiment])
        else:
            points = list(explicit)
    else:
        recorded = frame.attrs.get("runs", {}).get(tuple(key), {})
        if recorded.get("change_points"):
            points = list(recorded["change_points"])
        elif "phase" in run.columns and len(run):
            first_time = run.groupby("phase")["world_time"].min().sort_index()
            points = [float(time) for phase, time in first_time.items() if phase > 0]
        else:
            points = []
    points = [float(point) for point in points]
    if any(later <= earlier for earlier, later in zip(points, points[1:])):
        raise ValueError(f"change points must be strictly increasing, got {points} for run {key}")
    return [point for point in points if point > 0]


def phase_names_for_run(
    frame: pd.DataFrame, key: tuple, count: int, explicit: Sequence[str] | None = None
) -> list[str]:
    """``count`` phase names: ``explicit``, else the run config's, padded with ``phase <k>``."""
    names = (
        list(explicit)
        if explicit is not None
        else list(frame.attrs.get("runs", {}).get(tuple(key), {}).get("phase_names") or [])
    )
    return [str(names[index]) if index < len(names) else f"phase {index}" for index in range(count)]


def shift_positions(
    world_times: np.ndarray, xs: np.ndarray, change_points: Sequence[float], x: str
) -> list[float]:
    """Each change point on axis ``x``; NaN when no episode started at or after it.

    On the world_time axis a shift sits at its own clock time; on the tokens and seconds axes at
    the smallest x among the episodes that started at or after it.
    """
    positions = []
    for tau in change_points:
        after = world_times >= tau
        if not after.any():
            positions.append(float("nan"))
        else:
            positions.append(float(tau) if x == "world_time" else float(np.min(xs[after])))
    return positions


def iter_runs(frame: pd.DataFrame) -> Any:
    """Yield ``((experiment, method, seed), rows)`` for each run in a load_runs frame."""
    missing = [column for column in ("experiment", "method", "seed") if column not in frame]
    if missing:
        raise ValueError(
            f"the frame lacks the run column(s) {', '.join(missing)}; load it with load_runs"
        )
    yield from frame.groupby(["experiment", "method", "seed"], sort=True)


def shortest_phase_length(start: float, positions: Sequence[float], end: float) -> float:
    """Length of the shortest phase that ends in a shift (the first measured from ``start``).

    Used to scale default windows to the schedule; falls back to the data span (or 1) when no
    shift has a phase of positive length before it.
    """
    boundaries = [start, *[position for position in positions if np.isfinite(position)]]
    lengths = [
        later - earlier for earlier, later in zip(boundaries, boundaries[1:]) if later > earlier
    ]
    return min(lengths) if lengths else max(end - start, 1.0)
