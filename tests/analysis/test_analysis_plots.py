"""Plots draw what the data says: curve values, bands, shift markers, shares, bar heights."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import episodes_frame
from matplotlib.collections import PolyCollection
from matplotlib.image import imread

from sao_online.analysis import (
    load_runs,
    plot_behavior_shares,
    plot_metric_intervals,
    plot_recovery,
    plot_staleness_histogram,
    plot_update_metric,
)
from sao_online.analysis.plot_common import method_style


def constant_runs(levels: dict[tuple[str, int], float], count: int = 40) -> pd.DataFrame:
    frames = []
    for (method, seed), level in levels.items():
        frame = episodes_frame(np.full(count, level), phase=(np.arange(count) >= 20).astype(int))
        frame.insert(0, "experiment", "toy")
        frame.insert(1, "method", method)
        frame.insert(2, "seed", seed)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def vertical_line_positions(ax) -> list[float]:
    return sorted(
        {
            line.get_xdata()[0]
            for line in ax.get_lines()
            if len(set(line.get_xdata())) == 1 and line.get_linestyle() == "--"
        }
    )


def distinct_colors(path) -> int:
    rgb = (imread(path)[..., :3] * 255).astype(np.int64)
    return len(np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2]))


def test_recovery_curve_is_the_iqm_of_seed_curves_with_shift_markers(tmp_path):
    episodes = constant_runs({("a", 0): 0.2, ("a", 1): 0.6, ("b", 0): 1.0})
    path = tmp_path / "recovery.png"
    ax = plot_recovery(
        episodes, smooth=4, change_points=[20], phase_names=["old", "new"], path=path
    )
    lines = {line.get_label(): line for line in ax.get_lines()}
    a_curve = lines["a (IQM of 2 seeds)"].get_ydata()
    # two seeds: the IQM is their mean, wherever the curve is defined
    assert np.nanmax(np.abs(a_curve - 0.4)) < 1e-12 and np.isfinite(a_curve).sum() > 200
    assert np.nanmax(np.abs(lines["b (IQM of 1 seed)"].get_ydata() - 1.0)) < 1e-12
    assert vertical_line_positions(ax) == [20.0]
    assert any(text.get_text().strip() == "new" for text in ax.texts)
    assert ax.get_xlabel() == "clock time"  # no run config here: the clock is not known
    # a band for the method with two seeds only
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 1
    assert path.stat().st_size > 0 and distinct_colors(path) > 10


def test_curve_gap_after_a_shift_is_half_a_window(tmp_path):
    episodes = constant_runs({("a", 0): 0.5})
    ax = plot_recovery(episodes, smooth=8, change_points=[20])
    line = ax.get_lines()[0]
    grid, values = line.get_xdata(), line.get_ydata()
    undefined = grid[~np.isfinite(values)]
    # undefined right after the start (t < 4) and right after the shift (20 <= t < 24) only
    assert undefined.min() >= 0 and undefined.max() < 24
    assert not ((undefined > 4) & (undefined < 20)).any()


def test_tokens_axis_places_markers_at_the_tokens_spent(tmp_path):
    episodes = constant_runs({("a", 0): 0.5})
    episodes["num_action_tokens"] = 10
    ax = plot_recovery(episodes, x="tokens", change_points=[20])
    assert vertical_line_positions(ax) == [210.0]
    assert ax.get_xlabel() == "action tokens generated"


def test_one_experiment_at_a_time():
    episodes = pd.concat(
        [constant_runs({("a", 0): 0.5}), constant_runs({("a", 0): 0.5}).assign(experiment="other")]
    )
    with pytest.raises(ValueError, match="2 experiments"):
        plot_recovery(episodes)
    with pytest.raises(ValueError, match="metric 'score'"):
        plot_recovery(constant_runs({("a", 0): 0.5}), metric="score")


def test_behavior_shares_sum_to_one_and_switch(simulated_root):
    episodes = load_runs(simulated_root)
    figure = plot_behavior_shares(episodes)
    axes = figure.axes
    assert [ax.get_title().split(" ")[0] for ax in axes] == ["grpo", "sao"]
    sao = {
        line.get_label(): line.get_ydata()
        for line in axes[1].get_lines()
        if line.get_label() in {"cute", "chuunibyou", "classical"}
    }
    total = sum(sao.values())
    defined = np.isfinite(total)
    np.testing.assert_allclose(total[defined], 1.0)
    grid = axes[1].get_lines()[0].get_xdata()
    # late in phase 1 the new style dominates; late in phase 2 the next one does
    assert sao["chuunibyou"][np.searchsorted(grid, 390)] > 0.6
    assert sao["classical"][np.searchsorted(grid, 590)] > 0.6


def test_rare_behaviours_are_pooled_as_other():
    episodes = constant_runs({("a", 0): 1.0})
    episodes["behavior"] = ["x", "x", "y", "z"] * 10
    figure = plot_behavior_shares(episodes, max_labels=2, change_points=[20])
    labels = {
        line.get_label()
        for line in figure.axes[0].get_lines()
        if not line.get_label().startswith("_")
    }
    assert labels == {"x", "other"}


def test_staleness_histogram_bar_heights():
    episodes = constant_runs({("a", 0): 1.0}, count=8)
    episodes["staleness"] = [-1, 0, 0, 1, 1, 1, 2, -1]
    ax = plot_staleness_histogram(episodes)
    heights = [patch.get_height() for patch in ax.patches]
    np.testing.assert_allclose(heights, [2 / 6, 3 / 6, 1 / 6])
    assert "never trained: 25%" in ax.get_legend().get_texts()[0].get_text()


def test_update_metric_panels_and_missing_columns(simulated_root):
    updates = load_runs(simulated_root, table="updates")
    figure = plot_update_metric(
        updates,
        ["charts/masked_below_fraction", "charts/masked_above_fraction"],
        x="episodes_seen",
        change_points=[200, 400],
    )
    assert len(figure.axes) == 2
    assert figure.axes[1].get_ylabel() == "tokens masked, ratio above the band (share)"
    assert "charts/masked_above_fraction" in figure.axes[1].get_title()  # the logged key
    assert vertical_line_positions(figure.axes[0]) == [200.0, 400.0]
    with pytest.raises(ValueError, match="charts/nope"):
        plot_update_metric(updates, "charts/nope")
    grpo_only = updates[updates["method"] == "grpo"].dropna(axis=1, how="all")
    with pytest.raises(ValueError, match="charts/explained_variance"):
        plot_update_metric(grpo_only, "charts/explained_variance")


def test_update_metric_curve_is_the_smoothed_value():
    updates = pd.DataFrame(
        {
            "experiment": "e",
            "method": "m",
            "seed": 0,
            "version": np.arange(1, 11),
            "charts/loss": np.arange(1, 11) * 1.0,
        }
    )
    ax = plot_update_metric(updates, "charts/loss", smooth=2)
    grid, values = ax.get_lines()[0].get_xdata(), ax.get_lines()[0].get_ydata()
    at_ten = values[np.argmin(np.abs(grid - 10))]
    assert at_ten == pytest.approx(9.5)  # versions 9 and 10
    # The title names the window in whole units once it spans ten or more.
    wide = plot_update_metric(updates, "charts/loss", smooth=12.5)
    assert "trailing mean over 12 learner version" in wide.get_title().replace("\n", " ")
    assert "over 2 learner version" in ax.get_title().replace("\n", " ")


def test_metric_intervals_mark_censoring(tmp_path):
    aggregated = pd.DataFrame(
        {
            "experiment": "e",
            "method": ["a", "b"],
            "change_point": 1,
            "phase_after": "new",
            "metric": "time_to_recovery",
            "iqm": [10.0, 30.0],
            "lower": [8.0, 20.0],
            "upper": [12.0, 40.0],
            "censored_fraction": [0.0, 0.5],
            "confidence": 0.95,
        }
    )
    path = tmp_path / "ttr.png"
    ax = plot_metric_intervals(aggregated, unit="episodes", path=path)
    assert [text.get_text() for text in ax.texts] == ["50% censored"]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["a", "b", "some seeds censored"]
    markers = {method_style("a")[1], method_style("b")[1]}  # each method's own marker
    points = {
        line.get_xydata()[0, 1]: line.get_markerfacecolor()
        for line in ax.get_lines()
        if line.get_marker() in markers
    }
    assert points[30.0] == "white" and points[10.0] != "white"  # b is the censored one
    assert ax.get_ylabel() == "time to recovery (episodes)"
    assert distinct_colors(path) > 5
    with pytest.raises(ValueError, match="no aggregated rows"):
        plot_metric_intervals(aggregated, metric="drop")


def test_long_phase_names_are_numbered_on_the_plot_and_spelled_out_under_it():
    episodes = constant_runs({("a", 0): 0.2, ("b", 0): 1.0})
    long_name = "preferred=classical, pool=classical_cute_chuunibyou"
    ax = plot_recovery(episodes, smooth=4, change_points=[20], phase_names=["old", long_name])
    # every label fits however narrow its phase: numbers on the plot, the names below the axes
    assert [text.get_text().strip() for text in ax.texts] == ["phase 1", "phase 2"]
    assert ax.get_xlabel() == f"clock time\nphase 1: old\nphase 2: {long_name}"


def test_per_method_shift_lines_are_explained_under_the_axes_not_labelled_for_one_method():
    # "b" spends twice the tokens per episode, so it reaches the shift at twice the tokens.
    episodes = constant_runs({("a", 0): 0.5, ("b", 0): 0.5})
    episodes["num_action_tokens"] = np.where(episodes["method"] == "a", 10, 20)
    ax = plot_recovery(episodes, x="tokens", change_points=[20], phase_names=["old", "new"])
    assert sorted(vertical_line_positions(ax)) == [210.0, 420.0]
    assert len(ax.texts) == 0  # no phase label that would belong to one method only
    assert ax.get_xlabel() == (
        "action tokens generated\ndashed lines: each method's shifts (median over its seeds), "
        "in its colour\nphase 1: old\nphase 2: new"
    )
