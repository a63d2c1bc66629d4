"""Recovery curves, behaviour shares, staleness, learner diagnostics and metric intervals.

Every function draws into ``ax`` (or a new figure), saves a PNG when ``path`` is given, and
returns the Axes (or the Figure when it makes several panels). Curves use the same trailing
moving average as the recovery metrics (restarted at every shift, see ``smoothing``), so a curve
crosses rho x its pre-shift level where ``time_to_recovery`` says it does.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from sao_online.analysis.plot_common import (
    GRID_POINTS,
    draw_shift_markers,
    finish,
    label_colors,
    method_colors,
    new_axes,
    phase_caption,
    save_figure,
    seed_band,
)
from sao_online.analysis.recovery import DEFAULT_SMOOTH_FRACTION
from sao_online.analysis.smoothing import trailing_mean
from sao_online.analysis.time_axes import (
    ChangePointsArg,
    axis_label,
    axis_unit,
    change_points_for_run,
    check_x_axis,
    iter_runs,
    phase_names_for_run,
    shift_positions,
    shortest_phase_length,
    x_values,
)

# Episodes the environment gave no behaviour label (cut by a token or turn cap first).
UNLABELLED = "(no label: cut by a cap)"
# Characters per title line of a learner-metric panel (5 inches wide at 9 pt).
TITLE_CHARS = 60
# Readable names of the learner metrics the report draws (others are shown as logged).
METRIC_LABELS = {
    "charts/zero_variance_group_fraction": "groups with equal rewards (share)",
    "charts/masked_below_fraction": "tokens masked, ratio below the band (share)",
    "charts/masked_above_fraction": "tokens masked, ratio above the band (share)",
    "charts/explained_variance": "critic explained variance",
    "time_to_recovery": "time to recovery",
}
UPDATE_AXES = {
    "version": "learner version",
    "episodes_seen": "episodes trained on",
    "wall_time": "wall-clock seconds",
}


@dataclass
class _RunSeries:
    key: tuple
    xs: np.ndarray
    values: pd.DataFrame  # usable rows of the run (dropped episodes removed), aligned with xs
    shifts: list[float]  # shift positions on the x-axis (finite only)
    phase_names: list[str]
    clock: np.ndarray  # world_time of the usable rows (the axis curves are smoothed on)
    clock_shifts: list[float]  # the shifts in clock units


def _single_experiment(df: pd.DataFrame) -> str:
    if "experiment" not in df.columns or not len(df):
        raise ValueError("expected a non-empty frame from load_runs (with an experiment column)")
    experiments = sorted(map(str, df["experiment"].unique()))
    if len(experiments) > 1:
        raise ValueError(
            f"the frame holds {len(experiments)} experiments ({', '.join(experiments)});"
            f" plot one at a time, e.g. df[df.experiment == {experiments[0]!r}]"
        )
    return experiments[0]


def _run_series(
    df: pd.DataFrame, x: str, change_points: ChangePointsArg, phase_names: Sequence[str] | None
) -> list[_RunSeries]:
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
            _RunSeries(
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


def _default_smooth(series: list[_RunSeries]) -> float:
    """A tenth of the shortest phase, in clock units (the axis every curve is smoothed on)."""
    widths = [
        DEFAULT_SMOOTH_FRACTION
        * shortest_phase_length(s.clock.min(), s.clock_shifts, s.clock.max())
        for s in series
        if len(s.clock)
    ]
    return float(np.median(widths)) if widths else 1.0


def _grid(series: list[_RunSeries]) -> np.ndarray:
    lows = [s.xs.min() for s in series if len(s.xs)]
    highs = [s.xs.max() for s in series if len(s.xs)]
    if not lows:
        raise ValueError("no usable episodes to plot")
    return np.linspace(min(lows), max(highs), GRID_POINTS)


def _curve(
    run: _RunSeries, values: np.ndarray, grid: np.ndarray, smooth: float, min_window_fraction: float
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


def _legend_outside(ax: Axes, **kwargs) -> None:
    """The legend right of the axes, where it cannot cover a curve."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8, **kwargs)


def _markers(ax: Axes, series: list[_RunSeries], colors: dict) -> str | None:
    """One black line per shift when every run agrees on its position, else one per method.

    Returns the caption for under the axes: ``draw_shift_markers``'s (None when the names fit
    on the plot), or, with one set of lines per method, what the lines are and the phase names.
    """
    counts = {len(s.shifts) for s in series}
    all_positions = np.array([s.shifts for s in series]) if len(counts) == 1 else None
    names = series[0].phase_names
    if all_positions is not None and np.allclose(all_positions, all_positions[0]):
        return draw_shift_markers(ax, list(all_positions[0]), names)
    by_method: dict[str, list[list[float]]] = {}
    for s in series:
        by_method.setdefault(s.key[1], []).append(s.shifts)
    # Runs reach the shifts at different x: phase labels on the plot would belong to one
    # method only, so the phases are named under the axes instead.
    for method, shifts in sorted(by_method.items()):
        width = min(map(len, shifts))
        median = list(np.median([row[:width] for row in shifts], axis=0))
        draw_shift_markers(ax, median, names, color=colors[method], label_phases=False)
    phases = phase_caption(names or [])
    return "dashed lines: each method's shifts (median over its seeds), in its colour" + (
        f"\n{phases}" if phases else ""
    )


def plot_recovery(
    df: pd.DataFrame,
    x: str = "world_time",
    metric: str = "reward",
    smooth: float | None = None,
    ax: Axes | None = None,
    change_points: ChangePointsArg = None,
    phase_names: Sequence[str] | None = None,
    path: str | Path | None = None,
    *,
    reps: int = 500,
    confidence: float = 0.95,
    seed: int = 0,
    min_window_fraction: float = 0.5,
    title: str | None = None,
) -> Axes:
    """Per method, the IQM across seeds of the smoothed ``metric`` with a bootstrap CI band.

    Args:
        df: episodes of one experiment (from :func:`load_runs`).
        x: ``"world_time"``, ``"tokens"`` (cumulative action tokens) or ``"seconds"``.
        metric: an episode column (``reward``, ``oracle_reward``, ...).
        smooth: trailing-window width in clock units (default: a tenth of the shortest phase);
            curves are smoothed over episodes in clock order on every axis, so on the tokens
            and seconds axes a run's curve is continuous even where its episodes arrive in
            bursts.
        ax: draw here instead of a new figure.
        change_points / phase_names: as in :func:`recovery_metrics` (default: run configs).
        path: save the figure as a PNG here.
        reps / confidence / seed: the bootstrap over seeds for the band.
        min_window_fraction: see ``smoothing`` (the gap after each shift).
        title: default names the experiment and the smoothing.

    Shift markers are black dashed lines; on the tokens and seconds axes, where runs reach a
    shift at different x, each method gets its own markers (median over its seeds) in its colour.
    """
    experiment = _single_experiment(df)
    check_x_axis(x, df)
    if metric not in df.columns:
        raise ValueError(f"metric {metric!r} is not an episode column")
    series = _run_series(df, x, change_points, phase_names)
    smooth = smooth or _default_smooth(series)
    grid = _grid(series)
    colors = method_colors([s.key[1] for s in series])
    ax = new_axes(ax)
    for method in sorted(colors):
        runs = [s for s in series if s.key[1] == method]
        curves = np.array(
            [
                _curve(s, s.values[metric].to_numpy(dtype=float), grid, smooth, min_window_fraction)
                for s in runs
            ]
        )
        center, lower, upper = seed_band(curves, reps=reps, confidence=confidence, seed=seed)
        label = f"{method} (IQM of {len(runs)} seed{'s' if len(runs) > 1 else ''})"
        ax.plot(grid, center, color=colors[method], linewidth=1.8, label=label)
        if len(runs) > 1:
            ax.fill_between(grid, lower, upper, color=colors[method], alpha=0.2, linewidth=0)
    ax.set_xlim(grid[0], grid[-1])
    caption = _markers(ax, series, colors)
    ax.set_xlabel(axis_label(x, df) + (f"\n{caption}" if caption else ""), fontsize=9)
    ax.set_ylabel(f"{metric} (trailing mean)")
    band = f", band: {confidence:.0%} bootstrap CI over seeds" if len(series) > len(colors) else ""
    ax.set_title(
        title
        or f"{experiment}: {metric} over {axis_label(x, df)}\n"
        f"(window {smooth:.3g} {axis_unit('world_time', df)}, restarted at "
        f"each shift{band})",
        fontsize=10,
    )
    _legend_outside(ax)
    ax.grid(alpha=0.3)
    return finish(ax, path)


def plot_behavior_shares(
    df: pd.DataFrame,
    x: str = "world_time",
    smooth: float | None = None,
    change_points: ChangePointsArg = None,
    phase_names: Sequence[str] | None = None,
    path: str | Path | None = None,
    *,
    max_labels: int = 6,
    min_window_fraction: float = 0.5,
    title: str | None = None,
) -> Figure:
    """Share of each ``behavior`` label over time, one panel per method, mean over seeds.

    The share at t is the fraction of this phase's episodes in the trailing window (t - smooth,
    t] that carry the label; the ``max_labels - 1`` most frequent labels get their own line and
    the rest are pooled as "other". This shows a policy switching style after a shift.
    """
    experiment = _single_experiment(df)
    check_x_axis(x, df)
    if "behavior" not in df.columns:
        raise ValueError("plot_behavior_shares needs the episode column 'behavior'")
    if max_labels < 1:
        raise ValueError(f"max_labels must be >= 1, got {max_labels}")
    series = _run_series(df, x, change_points, phase_names)
    smooth = smooth or _default_smooth(series)
    grid = _grid(series)
    labels_all = df["behavior"].fillna("").astype(str).replace("", UNLABELLED)
    frequent = list(labels_all.value_counts().index)
    shown = frequent if len(frequent) <= max_labels else frequent[: max_labels - 1] + ["other"]
    colors = label_colors(shown)
    methods = sorted({s.key[1] for s in series})
    figure = Figure(figsize=(9.0, 2.6 * len(methods) + 0.8), layout="constrained")
    axes = figure.subplots(len(methods), 1, sharex=True, squeeze=False)[:, 0]
    for ax, method in zip(axes, methods):
        runs = [s for s in series if s.key[1] == method]
        for label in shown:
            curves = []
            for run in runs:
                behavior = run.values["behavior"].fillna("").astype(str).replace("", UNLABELLED)
                match = (
                    ~behavior.isin(shown[:-1]) if label == "other" else behavior == label
                ).to_numpy(dtype=float)
                curves.append(_curve(run, match, grid, smooth, min_window_fraction))
            stacked = np.array(curves)
            present = np.isfinite(stacked).sum(axis=0)
            share = np.where(
                present > 0, np.nansum(stacked, axis=0) / np.maximum(present, 1), np.nan
            )
            ax.plot(grid, share, color=colors[label], linewidth=1.6, label=label)
        ax.set_xlim(grid[0], grid[-1])
        ax.set_ylim(-0.02, 1.02)
        _markers(ax, runs, {method: "black"})
        ax.set_ylabel("share of episodes")
        ax.set_title(f"{method} ({len(runs)} seed{'s' if len(runs) > 1 else ''}, mean)", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title="behavior")
    axes[-1].set_xlabel(axis_label(x, df))
    figure.suptitle(
        title
        or f"{experiment}: behaviour shares (trailing window {smooth:.3g} "
        f"{axis_unit('world_time', df)})",
        fontsize=10,
    )
    if path is not None:
        save_figure(figure, path)
    return figure


def plot_staleness_histogram(
    episodes_df: pd.DataFrame,
    ax: Axes | None = None,
    path: str | Path | None = None,
    *,
    title: str | None = None,
) -> Axes:
    """Distribution of ``staleness`` over trained episodes, bars side by side per method.

    Staleness is the learner version at training minus the episode's oldest token version;
    episodes never trained on (staleness -1) are left out and their share is given in the
    legend.
    """
    if "staleness" not in episodes_df.columns or "method" not in episodes_df.columns:
        raise ValueError("plot_staleness_histogram needs the columns 'method' and 'staleness'")
    staleness = episodes_df["staleness"]
    trained = episodes_df[staleness >= 0]
    if not len(trained):
        raise ValueError("no episode has been trained on (every staleness is -1)")
    values = np.arange(int(trained["staleness"].max()) + 1)
    colors = method_colors(episodes_df["method"].unique())
    width = 0.8 / len(colors)
    ax = new_axes(ax, figsize=(7.5, 4.2))
    for index, method in enumerate(sorted(colors)):
        of_method = episodes_df[episodes_df["method"] == method]
        counts = (
            of_method.loc[of_method["staleness"] >= 0, "staleness"]
            .astype(int)
            .value_counts()
            .reindex(values, fill_value=0)
        )
        total = counts.sum()
        fractions = counts / total if total else counts.astype(float)
        never = float((of_method["staleness"] < 0).mean())
        ax.bar(
            values + (index - (len(colors) - 1) / 2) * width,
            fractions,
            width=width,
            color=colors[method],
            label=f"{method} (never trained: {never:.0%})",
        )
    ax.set_xticks(values)
    ax.set_xlabel("staleness (learner version at training - oldest token version)")
    ax.set_ylabel("fraction of trained episodes")
    ax.set_title(title or "Staleness of trained episodes", fontsize=10)
    _legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    return finish(ax, path)


def plot_update_metric(
    updates_df: pd.DataFrame,
    metric: str | Sequence[str],
    x: str = "version",
    smooth: float | None = None,
    ax: Axes | None = None,
    path: str | Path | None = None,
    *,
    change_points: Sequence[float] | None = None,
    reps: int = 500,
    confidence: float = 0.95,
    seed: int = 0,
    title: str | None = None,
) -> Axes | Figure:
    """A learner metric over updates: per method the IQM across seeds with a bootstrap band.

    Args:
        updates_df: updates from ``load_runs(..., table="updates")``.
        metric: a column such as ``"charts/masked_below_fraction"``, or several: one panel each
            (then ``ax`` must be None and a Figure is returned).
        x: ``"version"``, ``"episodes_seen"`` or ``"wall_time"``.
        smooth: trailing-window width in x units (default: a thirtieth of the x range).
        change_points: shift markers in x units (e.g. change points on the episodes clock
            against ``episodes_seen``, which they match up to the episodes in flight).
        reps / confidence / seed: the bootstrap over seeds.

    Raises:
        ValueError: a metric or the x column is missing.
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    missing = [name for name in [*metrics, x, "method", "seed"] if name not in updates_df]
    if missing:
        raise ValueError(f"updates lack the column(s) {', '.join(missing)}")
    if x not in UPDATE_AXES:
        raise ValueError(f"x={x!r} is not an update axis; choose one of {', '.join(UPDATE_AXES)}")
    if len(metrics) > 1:
        if ax is not None:
            raise ValueError("several metrics make one panel each: leave ax=None")
        figure = Figure(figsize=(5.0 * len(metrics), 4.2), layout="constrained")
        for panel, name in zip(figure.subplots(1, len(metrics), squeeze=False)[0], metrics):
            plot_update_metric(
                updates_df,
                name,
                x,
                smooth,
                panel,
                change_points=change_points,
                reps=reps,
                confidence=confidence,
                seed=seed,
            )
        if title:
            figure.suptitle(title, fontsize=10)
        if path is not None:
            save_figure(figure, path)
        return figure

    name = metrics[0]
    data = updates_df[np.isfinite(updates_df[name].to_numpy(dtype=float))]
    if not len(data):
        raise ValueError(f"metric {name!r} has no finite value")
    xs_all = data[x].to_numpy(dtype=float)
    grid = np.linspace(xs_all.min(), xs_all.max(), GRID_POINTS)
    # At least three updates per window: a narrower one is empty between updates.
    spacing = data.groupby(["method", "seed"])[x].apply(
        lambda values: (
            np.median(np.diff(np.sort(values.to_numpy(float)))) if len(values) > 1 else 0.0
        )
    )
    smooth = smooth or max(
        (xs_all.max() - xs_all.min()) / 30.0,
        3.0 * float(np.nanmax(spacing.to_numpy(float), initial=0.0)),
        1e-9,
    )
    colors = method_colors(data["method"].unique())
    ax = new_axes(ax, figsize=(7.5, 4.2))
    for method in sorted(colors):
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
                run[name].to_numpy(dtype=float),
                smooth,
                query_times=grid,
                min_window_fraction=0.0,
            )
            curve[grid > run_x.max()] = np.nan
            curves.append(curve)
        center, lower, upper = seed_band(
            np.array(curves), reps=reps, confidence=confidence, seed=seed
        )
        ax.plot(
            grid,
            center,
            color=colors[method],
            linewidth=1.6,
            label=f"{method} ({len(runs)} run{'s' if len(runs) > 1 else ''})",
        )
        if len(runs) > 1:
            ax.fill_between(grid, lower, upper, color=colors[method], alpha=0.2, linewidth=0)
    ax.set_xlim(grid[0], grid[-1])
    if change_points:
        draw_shift_markers(ax, list(change_points), None)
    ax.set_xlabel(UPDATE_AXES[x])
    ax.set_ylabel(METRIC_LABELS.get(name, name))
    logged = f"{name}, " if name in METRIC_LABELS else ""  # the key in updates.parquet
    # A window of 99.5 episodes reads as a bug; whole units are what a reader counts in.
    window = f"{smooth:,.0f}" if smooth >= 10 else f"{smooth:.3g}"
    default_title = (
        f"{METRIC_LABELS.get(name, name)}\n({logged}trailing mean over {window} {UPDATE_AXES[x]})"
    )
    # Wrapped to the width of a panel: side-by-side panels would cut a longer line off.
    ax.set_title(
        title or "\n".join(textwrap.fill(line, TITLE_CHARS) for line in default_title.split("\n")),
        fontsize=9,
    )
    ax.legend(
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(0.0, -0.18),
        borderaxespad=0.0,
        ncols=min(len(colors), 4),
        frameon=False,
    )
    ax.grid(alpha=0.3)
    return finish(ax, path)


def plot_metric_intervals(
    aggregated: pd.DataFrame,
    metric: str = "time_to_recovery",
    ax: Axes | None = None,
    path: str | Path | None = None,
    *,
    unit: str = "clock units",
    title: str | None = None,
) -> Axes:
    """IQM and CI per method at each change point: a point-and-errorbar plot.

    Args:
        aggregated: :func:`aggregate_recovery` output (one experiment).
        metric: which metric's rows to draw.
        unit: the metric's unit for the axis label.

    Points of groups with censored values are hollow and annotated with the censored share
    (the value then includes censoring times, so it understates the true time).
    """
    rows = aggregated[aggregated["metric"] == metric]
    if not len(rows):
        raise ValueError(f"no aggregated rows for metric {metric!r}")
    if "experiment" in rows and rows["experiment"].nunique() > 1:
        raise ValueError("aggregated rows of several experiments: plot one at a time")
    change_points = sorted(rows["change_point"].unique())
    colors = method_colors(rows["method"].unique())
    offset = 0.6 / max(len(colors), 1)
    ax = new_axes(ax, figsize=(7.5, 4.2))
    for index, method in enumerate(sorted(colors)):
        of_method = rows[rows["method"] == method].set_index("change_point")
        for position, change_point in enumerate(change_points):
            if change_point not in of_method.index:
                continue
            row = of_method.loc[change_point]
            x_position = position + (index - (len(colors) - 1) / 2) * offset
            censored = float(row.get("censored_fraction", np.nan))
            hollow = np.isfinite(censored) and censored > 0
            ax.errorbar(
                x_position,
                row["iqm"],
                yerr=[[row["iqm"] - row["lower"]], [row["upper"] - row["iqm"]]],
                fmt="o",
                color=colors[method],
                capsize=4,
                markersize=7,
                markerfacecolor="white" if hollow else colors[method],
            )
            if hollow:
                ax.annotate(
                    f"{censored:.0%} censored",
                    (x_position, row["upper"]),
                    textcoords="offset points",
                    xytext=(0, 4),
                    ha="center",
                    fontsize=7,
                )
    tick_labels = []
    for change_point in change_points:
        first = rows[rows["change_point"] == change_point].iloc[0]
        tick_labels.append(
            f"shift {change_point}\nto {first['phase_after']}"
            if "phase_after" in rows
            else f"shift {change_point}"
        )
    ax.set_xticks(range(len(change_points)), tick_labels, fontsize=8)
    ax.set_xlim(-0.6, len(change_points) - 0.4)
    readable = METRIC_LABELS.get(metric, metric.replace("_", " "))
    ax.set_ylabel(f"{readable} ({unit})")
    confidence = float(rows["confidence"].iloc[0]) if "confidence" in rows else 0.95
    ax.set_title(
        title
        or f"{readable[:1].upper() + readable[1:]}: IQM over seeds, "
        f"{confidence:.0%} stratified-bootstrap CI",
        fontsize=10,
    )
    handles = [
        Line2D([], [], color=colors[method], marker="o", linestyle="", label=method)
        for method in sorted(colors)
    ]
    if (rows.get("censored_fraction", pd.Series(dtype=float)).fillna(0) > 0).any():
        handles.append(
            Line2D(
                [],
                [],
                color="gray",
                marker="o",
                markerfacecolor="white",
                linestyle="",
                label="some seeds censored",
            )
        )
    _legend_outside(ax, handles=handles)
    ax.grid(axis="y", alpha=0.3)
    return finish(ax, path)
