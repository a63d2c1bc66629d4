"""A trailing moving average in clock units that restarts at every shift.

The smoothed value at time t is the mean of the values whose time lies in the window
(t - width, t], counting only samples of the phase t falls in: the window is clipped at the most
recent phase start, so a value after a shift never averages in pre-shift episodes. Nothing at a
time later than t is used, so the curve never looks into the future.

Right after a phase starts the clipped window is short and a handful of lucky episodes could
fake a recovery; the value is therefore undefined (NaN) until ``min_window_fraction * width``
clock units have elapsed since the phase started (t - phase_start >= min_window_fraction *
width). The start of the data counts as a phase start.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def trailing_mean(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    width: float,
    *,
    query_times: Sequence[float] | np.ndarray | None = None,
    phase_starts: Sequence[float] = (),
    min_window_fraction: float = 0.5,
) -> np.ndarray:
    """Trailing moving average over a window of ``width`` clock units, restarted at shifts.

    Args:
        times: the time of each sample (any order; ties allowed).
        values: the sample values; NaN values are left out of every mean.
        width: the window length in the same units as ``times`` (> 0).
        query_times: where to evaluate the curve; defaults to ``times`` (result aligned with
            the input samples).
        phase_starts: times at which the window restarts (the shift times).
        min_window_fraction: how much of a window (0..1) must have elapsed since the phase
            start before a value is defined.

    Returns:
        One float per query time; NaN where the window holds no value or is still too short.

    Example:
        >>> trailing_mean([0, 1, 2, 3], [1.0, 1.0, 0.0, 0.0], 2, phase_starts=[2],
        ...               min_window_fraction=0.0).tolist()
        [1.0, 1.0, 0.0, 0.0]
    """
    times = np.asarray(times, dtype=float)
    values = np.asarray(values, dtype=float)
    if times.shape != values.shape or times.ndim != 1:
        raise ValueError(
            f"times and values must be 1-d and the same length, got shapes "
            f"{times.shape} and {values.shape}"
        )
    if not np.isfinite(width) or width <= 0:
        raise ValueError(f"width must be a positive number of clock units, got {width}")
    if not 0.0 <= min_window_fraction <= 1.0:
        raise ValueError(f"min_window_fraction must lie in [0, 1], got {min_window_fraction}")
    if np.isnan(times).any():
        raise ValueError("times must not contain NaN")
    queries = times if query_times is None else np.asarray(query_times, dtype=float)
    if len(times) == 0:
        return np.full(queries.shape, np.nan)

    order = np.argsort(times, kind="stable")
    sorted_times = times[order]
    sorted_values = values[order]
    present = np.isfinite(sorted_values)
    value_sums = np.concatenate([[0.0], np.cumsum(np.where(present, sorted_values, 0.0))])
    value_counts = np.concatenate([[0], np.cumsum(present)])

    starts = np.unique(np.concatenate([[sorted_times[0]], np.asarray(phase_starts, dtype=float)]))
    # the phase each query falls in starts at the latest start <= t (the data start before it)
    start_index = np.searchsorted(starts, queries, side="right") - 1
    phase_start = np.where(start_index >= 0, starts[np.clip(start_index, 0, None)], -np.inf)

    right = np.searchsorted(sorted_times, queries, side="right")
    left_of_window = np.searchsorted(sorted_times, queries - width, side="right")
    left_of_phase = np.searchsorted(sorted_times, phase_start, side="left")
    left = np.maximum(left_of_window, left_of_phase)

    counts = value_counts[right] - value_counts[np.minimum(left, right)]
    sums = value_sums[right] - value_sums[np.minimum(left, right)]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    long_enough = (queries - phase_start) >= min_window_fraction * width
    return np.where((counts > 0) & long_enough, means, np.nan)
