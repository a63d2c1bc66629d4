"""The numbers the plots draw: each run's smoothed curves on a shared grid, with no drawing.

Curves use the same trailing moving average as the recovery metrics (restarted at every shift,
see ``smoothing``), so a curve crosses rho x its pre-shift level where ``time_to_recovery`` says
it does. ``plots`` turns them into figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sao_online.analysis.recovery import DEFAULT_SMOOTH_FRACTION
from sao_online.analysis.smoothing import trailing_mean
from sao_online.analysis.time_axes import (
    ChangePointsArg,
    change_points_for_run,
    iter_runs,
    phase_names_for_run,
    shift_positions,
    shortest_phase_length,
    x_values,
)

# Points of every curve's grid (enough for a smooth line at report size).
GRID_POINTS = 300
# Episodes the environment gave no behaviour label (cut by a token or turn cap first).
UNLABELLED = "(no label: cut by a cap)"


@dataclass
class RunSeries:
    """One run's episodes laid out for plotting against one x-axis."""

    key: tuple  # (experiment, method, seed)
    xs: np.ndarray
    values: pd.DataFrame  # usable rows of the run (dropped episodes removed), aligned with xs
    shifts: list[float]  # shift positions on the x-axis (finite only)
    phase_names: list[str]
    clock: np.ndarray  # world_time of the usable rows (the axis curves are smoothed on)
    clock_shifts: list[float]  # the shifts in clock units


def single_experiment(df: pd.DataFrame) -> str:
    """The one experiment of an episodes frame.

    Raises:
        ValueError: the frame is empty, has no experiment column, or holds several.
    """
    if "experiment" not in df.columns or not len(df):
        raise ValueError("expected a non-empty frame from load_runs (with an experiment column)")
    experiments = sorted(map(str, df["experiment"].unique()))
    if len(experiments) > 1:
        raise ValueError(
            f"the frame holds {len(experiments)} experiments ({', '.join(experiments)});"
            f" plot one at a time, e.g. df[df.experiment == {experiments[0]!r}]"
        )
    return experiments[0]


def run_series(
    df: pd.DataFrame, x: str, change_points: ChangePointsArg, phase_names: Sequence[str] | None
) -> list[RunSeries]:
    """Every run of ``df`` against the x-axis ``x``, with its shifts and phase names."""
    series = []
    for key, run in iter_runs(df):
        taus = change_points_for_run(df, run, key, change_points)
        xs = x_values(run, x)
        positions = shift_positions(run["world_time"].to_numpy(dtype=float), xs, taus, x)
        usable = np.ones(len(run), dtype=bool)
        if "dropped" in run:
            usable &= ~run["dropped"].fillna(False).to_numpy(dtype=bool)
        names = phase_names_for_run(df, key, len(taus) + 1, phase_names)
        series.append(
            RunSeries(
                key=key,
                xs=xs[usable],
                values=run[usable],
                shifts=[p for p in positions if np.isfinite(p)],
                phase_names=names,
                clock=run["world_time"].to_numpy(dtype=float)[usable],
                clock_shifts=list(taus),
            )
        )
    return series


def default_smooth(series: list[RunSeries]) -> float:
    """A tenth of the shortest phase, in clock units (the axis every curve is smoothed on)."""
    widths = [
        DEFAULT_SMOOTH_FRACTION
        * shortest_phase_length(s.clock.min(), s.clock_shifts, s.clock.max())
        for s in series
        if len(s.clock)
    ]
    return float(np.median(widths)) if widths else 1.0


def curve_grid(series: list[RunSeries]) -> np.ndarray:
    """``GRID_POINTS`` evenly spaced x values from the first episode of any run to the last."""
    lows = [s.xs.min() for s in series if len(s.xs)]
    highs = [s.xs.max() for s in series if len(s.xs)]
    if not lows:
        raise ValueError("no usable episodes to plot")
    return np.linspace(min(lows), max(highs), GRID_POINTS)


def smoothed_curve(
    run: RunSeries, values: np.ndarray, grid: np.ndarray, smooth: float, min_window_fraction: float
) -> np.ndarray:
    """The run's trailing mean (window ``smooth`` clock units) read at each grid point.

    The mean is taken over episodes in clock order, whatever the x-axis; on the tokens and
    seconds axes each grid point shows the curve as of the last episode done by then. Episodes
    reach those axes in bursts (a batch shares one wall time), so a window on them would be
    empty between bursts and break the curve; this way it is continuous.
    """
    if run.xs is run.clock or np.array_equal(run.xs, run.clock):
        curve = trailing_mean(
            run.xs,
            values,
            smooth,
            query_times=grid,
            phase_starts=run.clock_shifts,
            min_window_fraction=min_window_fraction,
        )
    else:
        per_episode = trailing_mean(
            run.clock,
            values,
            smooth,
            query_times=run.clock,
            phase_starts=run.clock_shifts,
            min_window_fraction=min_window_fraction,
        )
        order = np.argsort(run.xs, kind="stable")
        last_done = np.searchsorted(run.xs[order], grid, side="right") - 1
        curve = np.where(last_done >= 0, per_episode[order][np.maximum(last_done, 0)], np.nan)
    curve[grid > run.xs.max()] = np.nan  # a finished run says nothing about later times
    return curve


def behavior_labels(episodes: pd.DataFrame) -> pd.Series:
    """The ``behavior`` column with episodes the environment gave no label named ``UNLABELLED``."""
    return episodes["behavior"].fillna("").astype(str).replace("", UNLABELLED)


def shown_labels(episodes: pd.DataFrame, max_labels: int) -> list[str]:
    """The ``max_labels`` behaviour labels a figure names: every label when they fit, else the
    ``max_labels - 1`` most frequent and ``"other"`` for the rest."""
    frequent = list(behavior_labels(episodes).value_counts().index)
    return frequent if len(frequent) <= max_labels else frequent[: max_labels - 1] + ["other"]


def share_curve(
    runs: list[RunSeries],
    label: str,
    shown: list[str],
    grid: np.ndarray,
    smooth: float,
    min_window_fraction: float,
) -> np.ndarray:
    """The share of episodes labelled ``label`` (``"other"``: none of ``shown``) at each grid
    point, in the trailing window, averaged over the runs that have a value there."""
    curves = []
    for run in runs:
        behavior = behavior_labels(run.values)
        match = (~behavior.isin(shown[:-1]) if label == "other" else behavior == label).to_numpy(
            dtype=float
        )
        curves.append(smoothed_curve(run, match, grid, smooth, min_window_fraction))
    stacked = np.array(curves)
    present = np.isfinite(stacked).sum(axis=0)
    return np.where(present > 0, np.nansum(stacked, axis=0) / np.maximum(present, 1), np.nan)


def update_window(data: pd.DataFrame, x: str) -> float:
    """The default trailing window of a learner metric, in ``x`` units: a thirtieth of the x
    range, and at least three updates wide (a narrower one is empty between updates)."""
    xs_all = data[x].to_numpy(dtype=float)
    spacing = data.groupby(["method", "seed"])[x].apply(
        lambda values: (
            np.median(np.diff(np.sort(values.to_numpy(float)))) if len(values) > 1 else 0.0
        )
    )
    return max(
        (xs_all.max() - xs_all.min()) / 30.0,
        3.0 * float(np.nanmax(spacing.to_numpy(float), initial=0.0)),
        1e-9,
    )


def update_curves(
    data: pd.DataFrame, metric: str, x: str, grid: np.ndarray, smooth: float
) -> dict[str, np.ndarray]:
    """Per method, one row per run: ``metric``'s trailing mean over ``x`` at each grid point
    (NaN past the run's last update)."""
    by_method = {}
    for method in sorted(data["method"].unique()):
        runs = [
            run
            for _, run in data[data["method"] == method].groupby(
                ["experiment", "seed"] if "experiment" in data else ["seed"]
            )
        ]
        curves = []
        for run in runs:
            run_x = run[x].to_numpy(dtype=float)
            curve = trailing_mean(
                run_x,
                run[metric].to_numpy(dtype=float),
                smooth,
                query_times=grid,
                min_window_fraction=0.0,
            )
            curve[grid > run_x.max()] = np.nan
            curves.append(curve)
        by_method[method] = np.array(curves)
    return by_method
