"""write_report: the files it promises, their columns, and degenerate inputs."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import episodes_frame, simulated_episodes, updates_frame, write_run
from matplotlib.image import imread

from sao_online.analysis import write_report


def assert_real_png(path):
    assert path.stat().st_size > 0
    pixels = imread(path)[..., :3].reshape(-1, 3)
    assert (pixels != pixels[0]).any(), f"{path.name} is a blank image"


def test_full_report(simulated_root, tmp_path):
    out = tmp_path / "report"
    report = write_report(simulated_root, out, title="Style shift", reps=200)
    assert report == out / "report.md"
    for name in (
        "report.md",
        "report.html",
        "metrics.csv",
        "recovery_per_seed.csv",
        "improvement.csv",
    ):
        assert (out / name).stat().st_size > 0

    figures = sorted(path.name for path in (out / "figures").glob("*.png"))
    for kind in (
        "recovery_by_episodes",  # named after the clock of the runs
        "recovery_by_tokens",
        "recovery_by_wall_seconds",
        "behavior_shares",
        "time_to_recovery",
        "staleness",
        "zero_variance",
        "masked_fractions",
        "explained_variance",
    ):
        assert f"style-shift_{kind}.png" in figures
    for name in figures:
        assert_real_png(out / "figures" / name)

    metrics = pd.read_csv(out / "metrics.csv")
    assert {
        "method",
        "change_point",
        "metric",
        "iqm",
        "lower",
        "upper",
        "censored_fraction",
        "n_seeds",
    } <= set(metrics.columns)
    per_metric = metrics.groupby("metric").size()
    assert (per_metric == 2 * 2).all()  # methods x change points for every metric
    assert "forgetting" in per_metric.index  # the runs have evals
    assert (metrics["lower"] <= metrics["iqm"] + 1e-12).all()
    assert (metrics["iqm"] <= metrics["upper"] + 1e-12).all()
    assert (metrics["n_seeds"] == 3).all()

    per_seed = pd.read_csv(out / "recovery_per_seed.csv")
    assert len(per_seed) == 12 and "time_to_recovery" in per_seed.columns

    markdown = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert markdown.startswith("# Style shift")
    assert "How to read this" in markdown and "censored" in markdown
    for name in figures:  # every figure is shown, and every image shown exists
        assert f"figures/{name}" in markdown and f'src="figures/{name}"' in html
    for source in re.findall(r'src="([^"]+)"', html):
        assert (out / source).exists()
    assert "<style>" in html and "<table>" in html and "http" not in html.split("<body>")[1]


def test_single_seed_single_method_and_no_critic(tmp_path):
    episodes = simulated_episodes(phase_length=100, phases=2, recovery_episodes=30, seed=4)
    write_run(
        tmp_path / "runs",
        "solo",
        "grpo",
        0,
        episodes,
        change_points=[100],
        updates=updates_frame(episodes, with_value_loss=False),
    )
    out = tmp_path / "report"
    write_report(tmp_path / "runs", out, reps=50)
    metrics = pd.read_csv(out / "metrics.csv")
    assert len(metrics) and (metrics["n_seeds"] == 1).all()
    defined = metrics.dropna(subset=["iqm"])
    np.testing.assert_allclose(defined["lower"], defined["iqm"])
    np.testing.assert_allclose(defined["upper"], defined["iqm"])
    assert len(pd.read_csv(out / "improvement.csv")) == 0
    figures = {path.name for path in (out / "figures").glob("*.png")}
    assert "solo_explained_variance.png" not in figures  # GRPO logs no critic: skipped quietly
    assert "solo_recovery_by_episodes.png" in figures
    assert "Probability of improvement" not in (out / "report.md").read_text()


def test_report_from_a_frame_and_without_shifts(tmp_path):
    episodes = simulated_episodes(phase_length=80, phases=1, recovery_episodes=20, seed=1)
    episodes.insert(0, "experiment", "flat")
    episodes.insert(1, "method", "sao")
    episodes.insert(2, "seed", 0)
    out = tmp_path / "report"
    write_report(episodes, out, reps=20)
    assert "No shift with data on both sides" in (out / "report.md").read_text()
    assert_real_png(out / "figures" / "flat_recovery_by_clock.png")  # a frame: clock unknown
    assert len(pd.read_csv(out / "recovery_per_seed.csv")) == 0


def test_empty_input_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="no episodes"):
        write_report(
            pd.DataFrame(columns=["experiment", "method", "seed", "reward"]), tmp_path / "out"
        )


HOSTILE_EXPERIMENT = '=HYPERLINK("http://evil.example","x")'
HOSTILE_METHOD = "=cmd|' /C calc'!A0"
HOSTILE_PHASE = "<img src=x onerror=alert(1)>"


def test_names_from_runs_cannot_run_in_a_spreadsheet_or_inject_markup(tmp_path):
    root = tmp_path / "runs"
    for method, recovery in (("sao", 30.0), ("grpo", 60.0)):
        for seed in range(2):
            episodes = simulated_episodes(
                phase_length=100, phases=2, recovery_episodes=recovery, seed=seed
            )
            run = write_run(
                root,
                "exp",
                method,
                seed,
                episodes,
                change_points=[100],
                phase_names=["<script>alert(1)</script>", HOSTILE_PHASE],
                config_overrides={"experiment": HOSTILE_EXPERIMENT},
            )
            if method == "grpo":
                config = (
                    (run / "config.yaml")
                    .read_text()
                    .replace("method: grpo", f"method: {HOSTILE_METHOD!r}")
                )
                (run / "config.yaml").write_text(config)
    out = tmp_path / "report"
    write_report(root, out, reps=50)
    for name in ("metrics.csv", "recovery_per_seed.csv", "improvement.csv"):
        frame = pd.read_csv(out / name, dtype=str, keep_default_na=False)
        cells = [cell for column in frame.columns for cell in frame[column]] + list(frame.columns)
        formulas = [
            cell
            for cell in cells
            if cell.startswith(("=", "+", "@", "\t", "\r"))
            or (cell.startswith("-") and not _is_number(cell))
        ]
        assert formulas == [], (name, formulas[:3])
        assert any(cell.startswith("'=") for cell in cells), name  # present, neutralised
    markdown = (out / "report.md").read_text()
    assert "<script>" not in markdown and "<img" not in markdown
    assert "&lt;img src=x onerror=alert(1)>" in markdown  # shown as text: no tag can start
    assert "&gt;" not in markdown  # a plain > stays as typed (shift names read a -> b)
    assert "## Experiment: =HYPERLINK" in markdown
    html_text = (out / "report.html").read_text()
    assert "<script>alert" not in html_text and "<img src=x" not in html_text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_recovery_times_in_seconds_scale_with_each_runs_seconds_per_episode(tmp_path):
    # Two methods learn identically per episode; "slow" spends 4x the seconds on each episode.
    frames = []
    for method, seconds_per_episode in (("fast", 0.5), ("slow", 2.0)):
        for seed in range(2):
            t = np.arange(400)
            reward = np.where((t >= 200) & (t < 260 + 10 * seed), 0.0, 1.0)
            frame = episodes_frame(reward, world_time=t, phase=(t >= 200).astype(int), seed=seed)
            frame["wall_time"] = (t + 1) * seconds_per_episode
            frame["experiment"], frame["method"], frame["seed"] = "x", method, seed
            frames.append(frame)
    write_report(pd.concat(frames, ignore_index=True), tmp_path, reps=100, oracle_fraction=0.5)
    episodes = pd.read_csv(tmp_path / "recovery_per_seed.csv").set_index(["method", "seed"])
    seconds = pd.read_csv(tmp_path / "recovery_per_seed_seconds.csv").set_index(["method", "seed"])
    for metric in ("time_to_recovery", "time_to_oracle_fraction"):
        assert (episodes.loc["fast", metric] == episodes.loc["slow", metric]).all()
        np.testing.assert_allclose(seconds.loc["fast", metric], 0.5 * episodes.loc["fast", metric])
        np.testing.assert_allclose(seconds.loc["slow", metric], 2.0 * episodes.loc["slow", metric])
    markdown = (tmp_path / "report.md").read_text()
    assert "time to 0.5 x oracle" in markdown and "wall-clock seconds from the shift" in markdown


def test_the_corrections_stats_are_drawn_and_an_unbound_clip_is_a_sentence(tmp_path):
    # A token-TIS run and a decoupled-PPO run: truncation and effective sample size are drawn;
    # the decoupled clip, which never binds at one gradient step per batch, is said in words.
    for method, truncated in (("sao_tis", 0.1), ("sao_decoupled", None)):
        episodes = simulated_episodes(phase_length=100, phases=2, recovery_episodes=30, seed=2)
        updates = updates_frame(episodes)
        updates["charts/effective_sample_size"] = np.linspace(0.6, 0.9, len(updates))
        if truncated is None:
            updates["charts/clip_fraction_low"] = 0.0
            updates["charts/clip_fraction_high"] = 0.0
        else:
            updates["charts/truncated_fraction"] = np.linspace(0.0, truncated, len(updates))
        write_run(
            tmp_path / "runs", "stale", method, 0, episodes, change_points=[100], updates=updates
        )
    out = tmp_path / "report"
    report = write_report(tmp_path / "runs", out, reps=20).read_text()
    figures = {path.name for path in (out / "figures").glob("*.png")}
    assert {"stale_truncated_fraction.png", "stale_effective_sample_size.png"} <= figures
    assert "stale_clip_fractions.png" not in figures
    assert "The PPO clip never bound" in report
    assert "truncated at the cap (token TIS)" in report
    assert_real_png(out / "figures" / "stale_effective_sample_size.png")
