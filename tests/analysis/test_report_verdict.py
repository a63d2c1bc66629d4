"""The report's verdict table, its seed warning, figures that say something, and wall-clock
curves that stay continuous when episodes arrive in bursts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import simulated_episodes, updates_frame, write_run
from matplotlib.backends.backend_agg import FigureCanvasAgg

from sao_online.analysis import load_runs, plot_recovery, write_report
from sao_online.analysis.verdict import MIN_SEEDS, budget_warnings, seed_warnings, verdict_table


def aggregated_rows(rows, metric="time_to_oracle_fraction", n_seeds=5):
    return pd.DataFrame(
        [
            {
                "experiment": "e",
                "change_point": 1,
                "phase_before": "a",
                "phase_after": "b",
                "metric": metric,
                "censored_fraction": 0.0,
                "n_seeds": n_seeds,
                **row,
            }
            for row in rows
        ]
    )


def test_the_verdict_names_the_first_to_reach_the_level_and_whether_intervals_overlap():
    apart = verdict_table(
        aggregated_rows(
            [
                {"method": "grpo", "iqm": 120.0, "lower": 100.0, "upper": 150.0},
                {"method": "sao", "iqm": 40.0, "lower": 30.0, "upper": 55.0},
            ]
        ),
        unit="episodes",
    )
    assert apart.loc[0, "first"] == "sao" and apart.loc[0, "runner-up"] == "grpo"
    assert apart.loc[0, "ranked by"] == "time to the oracle level"
    assert apart.loc[0, "time (episodes)"] == "40 [30, 55]"
    assert apart.loc[0, "intervals overlap"] == "no"
    assert apart.loc[0, "seeds"] == 5
    assert apart.loc[0, "verdict"] == "sao first, intervals apart"
    close = verdict_table(
        aggregated_rows(
            [
                {
                    "method": "grpo",
                    "iqm": 60.0,
                    "lower": 50.0,
                    "upper": 90.0,
                    "censored_fraction": 0.5,
                },
                {"method": "sao", "iqm": 55.0, "lower": 30.0, "upper": 52.0},
            ]
        )
    )
    assert close.loc[0, "intervals overlap"] == "yes"  # 52 >= 50
    assert close.loc[0, "runner-up time"] == "60 [50, 90], 50% censored"
    assert close.loc[0, "verdict"] == "not separated from grpo"
    nobody = verdict_table(
        aggregated_rows(
            [{"method": "sao", "iqm": 99.0, "lower": 99.0, "upper": 99.0, "censored_fraction": 1.0}]
        )
    )
    assert nobody.loc[0, "verdict"] == "no method reached the level before the next shift"
    assert nobody.loc[0, "first"] == "none reached it"  # said, not an empty cell


@pytest.mark.parametrize("n_seeds", [1, 2])
def test_intervals_are_never_called_apart_below_the_seed_count_the_report_warns_about(n_seeds):
    # Intervals that do not overlap, as two seeds easily give: not a separation.
    rows = aggregated_rows(
        [
            {"method": "grpo", "iqm": 120.0, "lower": 100.0, "upper": 150.0},
            {"method": "sao", "iqm": 40.0, "lower": 30.0, "upper": 55.0},
        ],
        n_seeds=n_seeds,
    )
    verdict = verdict_table(rows).loc[0]
    assert "apart" not in verdict["verdict"]
    assert verdict["verdict"] == (
        f"sao first in these runs; {n_seeds} seed{'s' if n_seeds > 1 else ''} cannot separate "
        f"methods (fewer than {MIN_SEEDS})"
    )
    assert verdict["seeds"] == n_seeds
    # One method with enough seeds does not make the pair separable.
    rows.loc[rows["method"] == "grpo", "n_seeds"] = 10
    assert "apart" not in verdict_table(rows).loc[0, "verdict"]


def test_the_seed_warning_fires_below_three_seeds_per_method():
    frame = pd.DataFrame(
        {"experiment": "e", "method": ["a"] * 3 + ["b"] * 2, "seed": [0, 1, 2, 0, 1]}
    )
    [warning] = seed_warnings(frame)
    assert warning.startswith("Too few seeds for the intervals: b (2).")
    assert seed_warnings(frame[frame["method"] == "a"]) == []


def two_seed_root(root, *, updates_zero: bool):
    for offset, (method, recovery) in enumerate((("sao", 40.0), ("grpo", 120.0))):
        for seed in range(2):
            episodes = simulated_episodes(
                phase_length=200, phases=2, recovery_episodes=recovery, seed=seed + 10 * offset
            )
            episodes["staleness"] = 0  # as with the sync backend
            updates = updates_frame(episodes, seed=seed)
            if updates_zero:
                updates["charts/masked_below_fraction"] = 0.0
                updates["charts/masked_above_fraction"] = 0.0
            write_run(
                root,
                "exp",
                method,
                seed,
                episodes,
                change_points=[200],
                phase_names=["preferred=cute", "preferred=chuunibyou"],
                updates=updates,
            )
    return root


def test_the_report_opens_with_the_verdict_and_warns_about_two_seeds(tmp_path):
    root = two_seed_root(tmp_path / "runs", updates_zero=True)
    report = write_report(root, tmp_path / "report", reps=200).read_text()
    head = report.split("## How to read this")[0]
    assert "Warning: Too few seeds for the intervals: grpo (2), sao (2)." in head
    verdict = head.split("## Verdict")[1]
    assert "preferred=chuunibyou | time to the oracle level | sao | " in verdict
    assert "| grpo |" in verdict
    # Two seeds each: whatever the intervals, no two methods are called apart.
    assert "intervals apart" not in verdict and "2 seeds cannot separate methods" in verdict
    assert "-&gt;" not in report and "preferred=cute -> preferred=chuunibyou" in verdict
    # No figure whose every value is 0, and no staleness histogram of zeros: a sentence instead.
    figures = {path.name for path in (tmp_path / "report" / "figures").iterdir()}
    assert "exp_masked_fractions.png" not in figures and "exp_staleness.png" not in figures
    assert "No action token was masked out of the policy loss" in report
    assert "Every trained episode had staleness 0" in report
    assert "exp_zero_variance.png" in figures
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Verdict</h2>" in html and "**" not in html


def test_wall_clock_curves_are_continuous_when_episodes_arrive_in_bursts(tmp_path):
    root = two_seed_root(tmp_path / "runs", updates_zero=False)
    episodes = load_runs(root)
    # Each batch of 16 episodes is logged at one wall time, 5 s apart (a slow learner step).
    episodes["wall_time"] = 5.0 * (1 + episodes["episode"] // 16)
    ax = plot_recovery(episodes, x="seconds", reps=50)
    for line in ax.get_lines():
        if not line.get_label().startswith(("sao", "grpo")):
            continue
        ys = np.asarray(line.get_ydata(), dtype=float)
        defined = np.flatnonzero(np.isfinite(ys))
        # From the first defined point to the end of the run, gaps are only the window
        # refilling right after the shift (the same as on the clock axis), never between
        # bursts: at most one run of NaN.
        runs_of_nan = np.count_nonzero(
            np.diff(np.isnan(ys[defined[0] : defined[-1] + 1]).astype(int)) == 1
        )
        assert runs_of_nan <= 1, line.get_label()
    assert ax.get_xlabel() == "wall-clock seconds"
    assert "window 20 episodes started" in ax.get_title()


@pytest.mark.parametrize(
    "x, label", [("world_time", "episodes started"), ("tokens", "action tokens generated")]
)
def test_axis_labels_say_what_the_clock_counts(tmp_path, x, label):
    root = two_seed_root(tmp_path / "runs", updates_zero=False)
    ax = plot_recovery(load_runs(root), x=x, reps=20)
    # the first line names the axis; lines under it may explain per-method shift lines
    assert ax.get_xlabel().split("\n")[0] == label
    renderer = FigureCanvasAgg(ax.figure).get_renderer()
    ax.figure.draw(renderer)
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # right of the axes: off the curves


def test_the_verdict_ranks_by_the_absolute_level_with_the_relative_time_beside():
    rows = pd.concat(
        [
            # relative to its own lower pre-shift level, grpo recovers first ...
            aggregated_rows(
                [
                    {"method": "grpo", "iqm": 300.0, "lower": 280.0, "upper": 320.0},
                    {"method": "sao", "iqm": 600.0, "lower": 550.0, "upper": 650.0},
                ],
                metric="time_to_recovery",
            ),
            # ... but sao reaches the absolute level first: sao is ranked first
            aggregated_rows(
                [
                    {"method": "grpo", "iqm": 850.0, "lower": 800.0, "upper": 900.0},
                    {"method": "sao", "iqm": 650.0, "lower": 600.0, "upper": 700.0},
                ]
            ),
        ],
        ignore_index=True,
    )
    verdict = verdict_table(rows).loc[0]
    assert verdict["first"] == "sao" and verdict["runner-up"] == "grpo"
    assert verdict["verdict"] == "sao first, intervals apart"
    # the relative times of the same two methods, first / runner-up, as the secondary column
    assert verdict["time back to own pre-shift level (first / runner-up)"] == "600 / 300"
    relative = verdict_table(rows, metric="time_to_recovery", secondary=None).loc[0]
    assert relative["first"] == "grpo"


def test_without_an_oracle_level_the_verdict_ranks_by_the_relative_time_and_says_so():
    rows = aggregated_rows(
        [
            {"method": "grpo", "iqm": 300.0, "lower": 280.0, "upper": 320.0},
            {"method": "sao", "iqm": 600.0, "lower": 550.0, "upper": 650.0},
        ],
        metric="time_to_recovery",
    )
    verdict = verdict_table(rows).loc[0]
    assert verdict["ranked by"] == "time back to own pre-shift level"
    assert verdict["first"] == "grpo"


def test_report_goes_to_runs_report_by_default_and_the_api_takes_the_oracle_fraction(tmp_path):
    from sao_online import api
    from sao_online.cli import main
    from sao_online.util.defaults import DEFAULT_ORACLE_FRACTION

    root = two_seed_root(tmp_path / "runs", updates_zero=False)
    assert main(["report", str(root)]) == 0
    report = (root / "report" / "report.md").read_text()
    assert f"reached {DEFAULT_ORACLE_FRACTION:g} x the oracle's reward first" in report
    path = api.report(root, tmp_path / "api", oracle_fraction=0.7)
    assert "reached 0.7 x the oracle's reward first" in path.read_text()
    assert api.report(root) == root / "report" / "report.md"


def test_runs_of_unequal_length_are_named():
    # seed 1 of sao was continued to 6 episodes; the other runs ran 4
    rows = [("sao", 0, 4), ("sao", 1, 6), ("grpo", 0, 4), ("grpo", 1, 4)]
    episodes = pd.DataFrame(
        [
            {"experiment": "x", "method": method, "seed": seed}
            for method, seed, count in rows
            for _ in range(count)
        ]
    )
    assert budget_warnings(episodes) == [
        "Runs of x ran different numbers of episodes: sao seed 1 ran 6, the others 4. Their "
        "means and curves compare unequal budgets: continue the shorter ones to the same budget "
        "(--resume, --set budget.episodes=N) or report them apart."
    ]
    even = episodes[~((episodes["method"] == "sao") & (episodes["seed"] == 1))]
    assert budget_warnings(even) == []
