"""The scorecard's figures: aggregate intervals, performance profiles, the probability-of-
improvement matrix, a grid of per-task reward curves with the shifts marked, and a sweep's score
against the swept value."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sao_online.analysis.plot_common import marks_every, method_style, save_figure


def plot_aggregate_intervals(table: pd.DataFrame, path: str | Path) -> Path:
    """IQM and optimality gap per method, each with its 95% interval (rliable's layout)."""
    methods = list(table["method"])[::-1]  # best on top
    figure = Figure(figsize=(9.0, 0.6 * len(methods) + 1.6), layout="constrained")
    axes = figure.subplots(1, 2, sharey=True)
    panels = [
        ("iqm", "iqm_lower", "iqm_upper", "IQM of normalized score (higher is better)"),
        ("optimality_gap", "gap_lower", "gap_upper", "optimality gap (lower is better)"),
    ]
    rows = table.set_index("method")
    for ax, (point, lower, upper, title) in zip(axes, panels):
        for y, method in enumerate(methods):
            row = rows.loc[method]
            ax.barh(
                y,
                row[upper] - row[lower],
                left=row[lower],
                height=0.6,
                color=method_style(method)[0],
                alpha=0.55,
            )
            ax.plot([row[point]] * 2, [y - 0.3, y + 0.3], color="black", linewidth=1.5)
            color, marker = method_style(method)
            ax.plot(row[point], y, marker=marker, color=color, markeredgecolor="black")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.axvline(0.0, color="gray", linewidth=0.8)
    axes[0].axvline(1.0, color="gray", linewidth=0.8, linestyle=":")
    axes[0].set_yticks(range(len(methods)), methods)
    figure.suptitle("Aggregate over one score per run and family, 95% stratified bootstrap")
    return save_figure(figure, path)


def plot_profiles(profiles: pd.DataFrame, path: str | Path) -> Path:
    """Fraction of scores above tau per method, with the bootstrap band."""
    figure = Figure(figsize=(8.0, 4.8), layout="constrained")
    ax = figure.add_subplot()
    for method, part in profiles.groupby("method", sort=True):
        color, marker = method_style(method)
        ax.plot(
            part["tau"],
            part["fraction"],
            color=color,
            marker=marker,
            markevery=marks_every(len(part)),
            label=method,
        )
        ax.fill_between(part["tau"], part["lower"], part["upper"], color=color, alpha=0.2)
    ax.axvline(0.0, color="gray", linewidth=0.8, linestyle=":")
    ax.axvline(1.0, color="gray", linewidth=0.8, linestyle=":")
    ax.set_xlabel("normalized score tau (0 = frozen warm start, 1 = oracle)")
    ax.set_ylabel("fraction of scores > tau")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Performance profiles (score distributions), 95% bands")
    return save_figure(figure, path)


def plot_improvement_matrix(
    improvement: pd.DataFrame, methods: Sequence[str], path: str | Path
) -> Path:
    """P(row method > column method), with the interval in each cell."""
    methods = list(methods)
    size = len(methods)
    values = np.full((size, size), np.nan)
    labels = [["" for _ in methods] for _ in methods]
    index = {method: i for i, method in enumerate(methods)}
    for row in improvement.itertuples(index=False):
        if row.method_x in index and row.method_y in index:
            i, j = index[row.method_x], index[row.method_y]
            values[i, j] = row.probability
            labels[i][j] = f"{row.probability:.2f}\n[{row.lower:.2f}, {row.upper:.2f}]"
    figure = Figure(figsize=(1.3 * size + 2.6, 1.1 * size + 1.6), layout="constrained")
    ax = figure.add_subplot()
    image = ax.imshow(values, cmap="RdBu", vmin=0.0, vmax=1.0)
    for i in range(size):
        for j in range(size):
            if labels[i][j]:
                ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=7)
    ax.set_xticks(range(size), methods, rotation=30, ha="right")
    ax.set_yticks(range(size), methods)
    ax.set_xlabel("Y")
    ax.set_ylabel("X")
    figure.colorbar(image, ax=ax, label="P(X > Y)")
    ax.set_title("Probability of improvement P(X > Y), 95% intervals")
    return save_figure(figure, path)


def plot_recovery_grid(
    curves: pd.DataFrame,
    shifts: pd.DataFrame,
    phases: pd.DataFrame,
    path: str | Path,
    x_label: dict[str, str] | None = None,
) -> Path:
    """One panel per task: each method's mean reward per curve bin, averaged over seeds (the
    band spans the seeds' lowest and highest), shifts dashed, the oracle dotted."""
    return save_figure(recovery_grid_figure(curves, shifts, phases, x_label), path)


def recovery_grid_figure(
    curves: pd.DataFrame,
    shifts: pd.DataFrame,
    phases: pd.DataFrame,
    x_label: dict[str, str] | None = None,
) -> Figure:
    """The figure :func:`plot_recovery_grid` saves."""
    tasks = sorted(curves["task"].unique())
    columns = min(3, len(tasks))
    rows = math.ceil(len(tasks) / columns)
    figure = Figure(figsize=(5.0 * columns, 3.4 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    for ax, task in zip(axes, tasks):
        part = curves[curves["task"] == task]
        for method, rows_of_method in part.groupby("method", sort=True):
            middle = (rows_of_method["start"] + rows_of_method["end"]) / 2.0
            per_bin = rows_of_method.assign(x=middle).groupby("x")["reward_mean"]
            mean, low, high = per_bin.mean(), per_bin.min(), per_bin.max()
            style = {"linestyle": "--"} if method == "frozen" else {}
            color, marker = method_style(method)
            ax.plot(
                mean.index,
                mean.to_numpy(),
                color=color,
                marker=marker,
                markevery=marks_every(len(mean), 6),
                markersize=4,
                label=method,
                **style,
            )
            ax.fill_between(mean.index, low.to_numpy(), high.to_numpy(), color=color, alpha=0.15)
        task_phases = phases[phases["task"] == task]
        for _, phase in task_phases.groupby("phase"):
            start, end = phase["start"].min(), phase["end"].max()
            ax.hlines(
                phase["oracle_mean"].mean(),
                start,
                end + 1,
                colors="black",
                linestyles=":",
                linewidth=1.2,
            )
        for tau in sorted(shifts.loc[shifts["task"] == task, "tau"].unique()):
            ax.axvline(tau, color="black", linestyle="--", linewidth=0.9, alpha=0.7)
        ax.set_title(task, fontsize=10)
        ax.set_xlabel((x_label or {}).get(task, "episodes"))
        ax.set_ylabel("reward")
        ax.grid(alpha=0.3)
    for ax in axes[len(tasks) :]:
        ax.set_visible(False)
    legend: dict[str, Any] = {}  # every method of every panel, once
    for ax in axes[: len(tasks)]:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(name, handle)
    names = sorted(legend)
    figure.legend(
        [legend[name] for name in names],
        names,
        loc="outside lower center",
        ncols=min(6, len(names)),
        fontsize=8,
    )
    title = (
        "Reward per task: mean over seeds (band: lowest to highest seed); dashed lines: shifts; "
        "dotted: oracle"
    )
    # About 12 characters of a 10-point title per inch: a grid of one or two panels gets it on
    # more lines instead of cut at both edges.
    figure.suptitle(textwrap.fill(title, width=int(12 * figure.get_figwidth())), fontsize=10)
    return figure


def plot_sweep(
    frame: pd.DataFrame, field: str, numbers: list[float] | None, path: str | Path
) -> Path:
    """Aggregate IQM against the swept value, a line per method with its 95% interval as a band;
    one panel per axis (episodes; virtual seconds where the runs were timed).

    ``frame``: the sweep's long table (value, axis, method, iqm, lower, upper); ``numbers``: the
    values as numbers (a numeric x-axis) or None (the values in order, as categories)."""
    axes_names = list(dict.fromkeys(frame["axis"]))
    values = list(dict.fromkeys(frame["value"]))
    positions = dict(zip(values, numbers if numbers is not None else range(len(values))))
    figure = Figure(figsize=(5.2 * len(axes_names) + 1.8, 4.4), layout="constrained")
    panels = figure.subplots(1, len(axes_names), sharey=False, squeeze=False)[0]
    for ax, axis in zip(panels, axes_names):
        part = frame[frame["axis"] == axis]
        for method, rows in part.groupby("method", sort=True):
            rows = rows.assign(x=rows["value"].map(positions)).sort_values("x")
            color, marker = method_style(method)  # as in every other figure
            ax.plot(rows["x"], rows["iqm"], marker=marker, color=color, label=method)
            ax.fill_between(rows["x"], rows["lower"], rows["upper"], color=color, alpha=0.15)
        ax.axhline(0.0, color="gray", linewidth=0.8, linestyle=":")
        ax.set_xticks([positions[value] for value in values], values)
        ax.set_xlabel(field)
        ax.set_ylabel("IQM of normalized score (0 = frozen, 1 = oracle)")
        ax.set_title(f"on {axis}", fontsize=10)
        ax.grid(alpha=0.3)
    panels[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    figure.suptitle(f"Score against {field}: IQM over (family, shift, seed), 95% intervals")
    return save_figure(figure, path)
