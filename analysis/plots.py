"""Recovery curves, behaviour shares, staleness, learner diagnostics and metric intervals.

Every function draws into ``ax`` (or a new figure), saves a PNG when ``path`` is given, and
returns the Axes (or the Figure when it makes several panels). The numbers come from ``curves``
(the same trailing moving average as the recovery metrics, so a curve crosses rho x its
pre-shift level where ``time_to_recovery`` says it does); shared drawing pieces from
``plot_common``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from sao_online.analysis.curves import (
    GRID_POINTS,
    curve_grid,
    default_smooth,
    run_series,
    share_curve,
    shown_labels,
    single_experiment,
    smoothed_curve,
    update_curves,
    update_window,
)
from sao_online.analysis.plot_common import (
    draw_method_line,
    draw_run_shift_markers,
    draw_shift_markers,
    finish,
    label_colors,
    legend_outside,
    method_colors,
    method_markers,
    new_axes,
    save_figure,
    seed_band,
)
from sao_online.analysis.time_axes import ChangePointsArg, axis_label, axis_unit, check_x_axis

# Characters per title line of a learner-metric panel (5 inches wide at 9 pt).
TITLE_CHARS = 60
# Readable names of the learner metrics the report draws (others are shown as logged).
METRIC_LABELS = {
    "charts/zero_variance_group_fraction": "groups with equal rewards (share)",
    "charts/masked_below_fraction": "tokens masked, ratio below the band (share)",
    "charts/masked_above_fraction": "tokens masked, ratio above the band (share)",
    "charts/truncated_fraction": "tokens whose weight was truncated (share)",
    "charts/clip_fraction_low": "tokens clipped below the band (share)",
    "charts/clip_fraction_high": "tokens clipped above the band (share)",
    "charts/effective_sample_size": "effective sample size of the token weights (normalized)",
    "charts/explained_variance": "critic explained variance",
    "time_to_recovery": "time to recovery",
}
UPDATE_AXES = {
    "version": "learner version",
    "episodes_seen": "episodes trained on",
    "wall_time": "wall-clock seconds",
}


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
        change_points: as in :func:`recovery_metrics` (default: from the run configs).
        phase_names: as in :func:`recovery_metrics` (default: from the run configs).
        path: save the figure as a PNG here.
        reps: bootstrap resamples over seeds for the band.
        confidence: the band's confidence level.
        seed: the bootstrap's seed.
        min_window_fraction: see ``smoothing`` (the gap after each shift).
        title: default names the experiment and the smoothing.

    Shift markers are black dashed lines; on the tokens and seconds axes, where runs reach a
    shift at different x, each method gets its own markers (median over its seeds) in its colour.
    """
    experiment = single_experiment(df)
    check_x_axis(x, df)
    if metric not in df.columns:
        raise ValueError(f"metric {metric!r} is not an episode column")
    series = run_series(df, x, change_points, phase_names)
    smooth = smooth or default_smooth(series)
    grid = curve_grid(series)
    colors = method_colors([s.key[1] for s in series])
    ax = new_axes(ax)
    for method in sorted(colors):
        runs = [s for s in series if s.key[1] == method]
        curves = np.array(
            [
                smoothed_curve(
                    s, s.values[metric].to_numpy(dtype=float), grid, smooth, min_window_fraction
                )
                for s in runs
            ]
        )
        center, lower, upper = seed_band(curves, reps=reps, confidence=confidence, seed=seed)
        label = f"{method} (IQM of {len(runs)} seed{'s' if len(runs) > 1 else ''})"
        draw_method_line(ax, grid, center, method, label=label, linewidth=1.8)
        if len(runs) > 1:
            ax.fill_between(grid, lower, upper, color=colors[method], alpha=0.2, linewidth=0)
    ax.set_xlim(grid[0], grid[-1])
    caption = draw_run_shift_markers(ax, series, colors)
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
    legend_outside(ax)
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
    experiment = single_experiment(df)
    check_x_axis(x, df)
    if "behavior" not in df.columns:
        raise ValueError("plot_behavior_shares needs the episode column 'behavior'")
    if max_labels < 1:
        raise ValueError(f"max_labels must be >= 1, got {max_labels}")
    series = run_series(df, x, change_points, phase_names)
    smooth = smooth or default_smooth(series)
    grid = curve_grid(series)
    shown = shown_labels(df, max_labels)
    colors = label_colors(shown)
    methods = sorted({s.key[1] for s in series})
    figure = Figure(figsize=(9.0, 2.6 * len(methods) + 0.8), layout="constrained")
    axes = figure.subplots(len(methods), 1, sharex=True, squeeze=False)[:, 0]
    for ax, method in zip(axes, methods):
        runs = [s for s in series if s.key[1] == method]
        for label in shown:
            share = share_curve(runs, label, shown, grid, smooth, min_window_fraction)
            ax.plot(grid, share, color=colors[label], linewidth=1.6, label=label)
        ax.set_xlim(grid[0], grid[-1])
        ax.set_ylim(-0.02, 1.02)
        draw_run_shift_markers(ax, runs, {method: "black"})
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
    legend_outside(ax)
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
        reps: bootstrap resamples over seeds for the band.
        confidence: the band's confidence level.
        seed: the bootstrap's seed.

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
    smooth = smooth or update_window(data, x)
    curves_by_method = update_curves(data, name, x, grid, smooth)
    colors = method_colors(data["method"].unique())
    ax = new_axes(ax, figsize=(7.5, 4.2))
    for method in sorted(colors):
        curves = curves_by_method[method]
        center, lower, upper = seed_band(curves, reps=reps, confidence=confidence, seed=seed)
        runs = f"{len(curves)} run{'s' if len(curves) > 1 else ''}"
        draw_method_line(ax, grid, center, method, label=f"{method} ({runs})")
        if len(curves) > 1:
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
    markers = method_markers(list(colors))
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
                fmt=markers[method],
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
        Line2D([], [], color=colors[method], marker=markers[method], linestyle="", label=method)
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
    legend_outside(ax, handles=handles)
    ax.grid(axis="y", alpha=0.3)
    return finish(ax, path)
