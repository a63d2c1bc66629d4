"""``write_report``: recovery metrics, intervals, comparisons and figures in one folder.

The page's layout: the numbers come from ``report_data``, the figures from ``report_figures``,
and ``report_render`` writes the blocks as Markdown and HTML.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd

from sao_online.analysis.loading import PathsLike, load_runs
from sao_online.analysis.plot_common import figure_output
from sao_online.analysis.prompt_groups import prompt_key_blocks
from sao_online.analysis.report_data import (
    TIME_METRICS,
    clock_unit,
    compute_report_data,
    metrics_table,
    runs_table,
)
from sao_online.analysis.report_figures import (
    episode_figures,
    learner_figures,
    recovery_figures,
    recovery_time_figure,
)
from sao_online.analysis.report_render import (
    Block,
    Heading,
    Paragraph,
    Table,
    to_html,
    to_markdown,
    write_csv,
)
from sao_online.analysis.verdict import (
    MIN_SEEDS,
    RunsWarning,
    budget_warnings,
    seed_warnings,
    verdict_table,
)
from sao_online.util.defaults import DEFAULT_ORACLE_FRACTION


def _how_to_read(rho: float, confidence: float, unit: str) -> str:
    return (
        f"Each shift (dashed line) changes what the environment rewards. For "
        f"every run and shift, `pre_level` is the mean reward just before the shift; `drop` is "
        f"how far the smoothed reward falls below it afterwards; `time to recovery` is how long "
        f"(in {unit}) the smoothed reward takes to reach {rho:g} x pre_level again; `recovery AUC` "
        f"is the mean reward over a fixed horizon after the shift divided by pre_level (1 = no "
        f"loss); `regret / episode` is the mean gap to the oracle's reward over the new phase; "
        f"`forgetting` is how much the evaluation reward on the phase that just ended fell "
        f"between its end and the end of the run. Across seeds every number is an interquartile "
        f"mean (IQM, the mean of the middle half) with a {confidence:.0%} stratified-bootstrap "
        f"interval in brackets. A run that never recovers before the next shift is censored: "
        f"its time to recovery is the time it had, aggregated as it is, so an IQM with a "
        f"non-zero censored share understates the true time. P(X better than Y) is the chance "
        f"that a run of X beats a run of Y on a shift (0.5 = no difference). Smoothed curves use "
        f"a trailing window that restarts at each shift, so they never average across a shift "
        f"or look ahead; their short gap after each shift is that window filling up."
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "experiment"


def _experiment_blocks(
    experiment: str,
    episodes: pd.DataFrame,
    updates: pd.DataFrame | None,
    per_seed: pd.DataFrame,
    aggregated: pd.DataFrame,
    improvement: pd.DataFrame,
    by_prompt: pd.DataFrame,
    figures: Path,
    *,
    reps: int,
    confidence: float,
    seed: int,
    smooth: float | None,
    oracle_fraction: float,
    aggregated_seconds: pd.DataFrame | None = None,
) -> list[Block]:
    prefix = _slug(experiment)
    unit = clock_unit(episodes, experiment)
    blocks: list[Block] = [
        Heading(f"Experiment: {experiment}"),
        *recovery_figures(
            episodes,
            experiment,
            prefix,
            figures,
            smooth=smooth,
            reps=reps,
            confidence=confidence,
            seed=seed,
        ),
    ]
    if len(per_seed):
        blocks.append(Heading("Recovery after each shift", 3))
        blocks.append(
            Table(
                metrics_table(aggregated, oracle_fraction),
                f"IQM [{confidence:.0%} CI] across seeds; times in {unit}.",
            )
        )
        if aggregated_seconds is not None and len(aggregated_seconds):
            blocks.append(
                Table(
                    metrics_table(aggregated_seconds, oracle_fraction, TIME_METRICS),
                    f"The same times in wall-clock seconds from the shift (IQM [{confidence:.0%} "
                    "CI] across seeds): what a method's speed per episode makes of its sample "
                    "efficiency. Seconds compare only between runs that shared the machine in "
                    "the same way.",
                )
            )
        blocks.append(recovery_time_figure(aggregated, prefix, figures, unit))
        notes = per_seed.loc[per_seed["note"] != "", "note"].value_counts()
        for note, count in notes.items():
            blocks.append(
                Paragraph(f"Note ({count} run-shift pair{'s' if count > 1 else ''}): {note}.")
            )
    else:
        blocks.append(Paragraph("No shift with data on both sides: no recovery metrics."))

    if len(improvement):
        blocks.append(Heading("Probability of improvement", 3))
        shown = improvement.assign(
            **{
                "P(x better than y)": [
                    f"{p:.2f} [{lo:.2f}, {hi:.2f}]"
                    for p, lo, hi in zip(
                        improvement["probability"], improvement["lower"], improvement["upper"]
                    )
                ]
            }
        )
        blocks.append(
            Table(
                shown[
                    [
                        "method_x",
                        "method_y",
                        "metric",
                        "better_when",
                        "P(x better than y)",
                        "n_strata",
                    ]
                ],
                "Pooled over shifts (each shift one stratum).",
            )
        )

    blocks += prompt_key_blocks(episodes, by_prompt)
    blocks += episode_figures(episodes, prefix, figures, smooth=smooth)
    if updates is not None and len(updates):
        blocks.extend(
            learner_figures(
                updates, episodes, prefix, figures, reps=reps, confidence=confidence, seed=seed
            )
        )
    return blocks


def _verdict_blocks(
    aggregated: pd.DataFrame, unit: str, confidence: float, rho: float, oracle_fraction: float
) -> list[Block]:
    """The verdict: methods ranked by the time to an absolute level, the relative time beside."""
    verdict = verdict_table(aggregated, unit)
    if not len(verdict):
        return [Paragraph("Verdict: no shift has a defined time to recovery (see below).")]
    if verdict["experiment"].nunique() == 1:
        verdict = verdict.drop(columns="experiment")
    return [
        Heading("Verdict", 2),
        Table(
            verdict,
            f"Per shift, the method whose smoothed reward reached {oracle_fraction:g} x the "
            f"oracle's reward first (IQM over seeds, {confidence:.0%} intervals) and the "
            "runner-up. Overlapping intervals mean these runs do not separate the two; below "
            f"{MIN_SEEDS} seeds per method no two are called apart. The last column is the "
            f"time back to {rho:g} x each run's own level before the shift, for the same two "
            "methods: secondary, since it favours a method that plateaued lower before the "
            "shift. Details and the other metrics below.",
        ),
    ]


def write_report(
    paths_or_df: PathsLike | pd.DataFrame,
    out_dir: str | Path,
    *,
    title: str | None = None,
    updates: pd.DataFrame | None = None,
    evals: pd.DataFrame | None = None,
    rho: float = 0.9,
    window: float | None = None,
    smooth: float | None = None,
    horizon: float | None = None,
    oracle_fraction: float = DEFAULT_ORACLE_FRACTION,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    dpi: int | None = None,
) -> Path:
    """Write ``report.md``, ``report.html``, CSV tables and figures for a set of runs.

    Args:
        paths_or_df: run roots / experiment / method / seed directories, or an episodes frame
            from :func:`load_runs` (then pass ``updates``/``evals`` to include them).
        out_dir: created if needed. Receives ``report.md``, ``report.html`` (self-contained
            apart from the PNGs), ``metrics.csv`` (one row per experiment x method x change
            point x metric with ``iqm``, ``lower``, ``upper``, ``censored_fraction``,
            ``n_seeds``), ``recovery_per_seed.csv``, ``improvement.csv`` and ``figures/``.
        title: the report's title.
        updates: the update rows, only with a frame (loaded from the runs when paths are given).
        evals: the evaluation rows, only with a frame (loaded from the runs when paths are
            given).
        rho: as in :func:`recovery_metrics` (world_time axis).
        window: as in :func:`recovery_metrics`.
        smooth: as in :func:`recovery_metrics`.
        horizon: as in :func:`recovery_metrics`.
        oracle_fraction: as in :func:`recovery_metrics`. When the episodes carry wall-clock
            times, the two recovery times are also given in seconds
            (``recovery_per_seed_seconds.csv`` and a table).
        reps: bootstrap resamples (curve bands use at most 500).
        confidence: the intervals' confidence level.
        seed: the bootstrap's seed.
        dpi: the PNGs' resolution (a PDF of each figure is written beside it).

    Returns:
        The path of ``report.md``.

    Works with one seed (intervals collapse to the point) and one method (no comparisons).

    Example:
        >>> write_report("runs/style-shift", "reports/style-shift")  # doctest: +SKIP
    """
    with figure_output(dpi):  # every figure below at that resolution
        if isinstance(paths_or_df, pd.DataFrame):
            episodes = paths_or_df
            sources = "a DataFrame"
        else:
            episodes = load_runs(paths_or_df)
            updates = load_runs(paths_or_df, table="updates")
            evals = load_runs(paths_or_df, table="evals")
            given = [paths_or_df] if isinstance(paths_or_df, str | Path) else list(paths_or_df)
            sources = ", ".join(f"`{path}`" for path in given)
        if not len(episodes):
            raise ValueError("no episodes to report on")
        unequal_budgets = budget_warnings(episodes)
        for warning in unequal_budgets:  # said where the command runs too, not only in the report
            warnings.warn(warning, RunsWarning, stacklevel=2)
        out_dir = Path(out_dir)
        figures = out_dir / "figures"
        figures.mkdir(parents=True, exist_ok=True)

        data = compute_report_data(
            episodes,
            evals,
            rho=rho,
            window=window,
            smooth=smooth,
            horizon=horizon,
            oracle_fraction=oracle_fraction,
            reps=reps,
            confidence=confidence,
            seed=seed,
        )
        per_seed, aggregated, by_prompt = data.per_seed, data.aggregated, data.by_prompt
        improvement, per_seed_seconds = data.improvement, data.per_seed_seconds
        aggregated_seconds = data.aggregated_seconds

        title = title or "Recovery after distribution shifts"
        unit_note = clock_unit(episodes, str(episodes["experiment"].iloc[0]))
        blocks: list[Block] = [
            Heading(title, 1),
            Paragraph(
                f"{episodes.groupby(['experiment', 'method', 'seed']).ngroups} runs from {sources}."
            ),
            *(Paragraph(f"Warning: {warning}") for warning in seed_warnings(episodes)),
            *(Paragraph(f"Warning: {warning}") for warning in unequal_budgets),
            *_verdict_blocks(aggregated, unit_note, confidence, rho, oracle_fraction),
            Table(runs_table(episodes)),
            Heading("How to read this", 2),
            Paragraph(_how_to_read(rho, confidence, unit_note)),
        ]
        for experiment in sorted(episodes["experiment"].unique()):
            mask = episodes["experiment"] == experiment
            blocks += _experiment_blocks(
                experiment,
                episodes[mask],
                updates[updates["experiment"] == experiment]
                if updates is not None and "experiment" in updates
                else None,
                per_seed[per_seed["experiment"] == experiment],
                aggregated[aggregated["experiment"] == experiment],
                improvement[improvement["experiment"] == experiment],
                by_prompt[by_prompt["experiment"] == experiment],
                figures,
                reps=reps,
                confidence=confidence,
                seed=seed,
                smooth=smooth,
                oracle_fraction=oracle_fraction,
                aggregated_seconds=None
                if aggregated_seconds is None
                else aggregated_seconds[aggregated_seconds["experiment"] == experiment],
            )
        blocks += [
            Heading("Files", 2),
            Paragraph(
                "`metrics.csv`: IQM and interval per experiment, method, shift and metric. "
                "`recovery_per_seed.csv`: every metric per run and shift (with a `note` when a "
                "metric is undefined). `recovery_per_seed_seconds.csv` (when episodes carry "
                "wall-clock times): the recovery times per run and shift in seconds. "
                "`improvement.csv`: the pairwise comparisons. `figures/`: the PNGs, and a PDF of "
                "each."
                + (
                    " `reward_by_prompt.csv`: mean reward per method, phase and prompt-key value."
                    if len(by_prompt)
                    else ""
                )
            ),
        ]

        write_csv(aggregated, out_dir / "metrics.csv")
        write_csv(per_seed, out_dir / "recovery_per_seed.csv")
        if per_seed_seconds is not None:
            write_csv(per_seed_seconds, out_dir / "recovery_per_seed_seconds.csv")
        write_csv(improvement, out_dir / "improvement.csv")
        if len(by_prompt):
            write_csv(by_prompt, out_dir / "reward_by_prompt.csv")
        (out_dir / "report.md").write_text(to_markdown(blocks))
        (out_dir / "report.html").write_text(to_html(blocks, title))
        return out_dir / "report.md"
