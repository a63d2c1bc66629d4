"""``write_report``: recovery metrics, intervals, comparisons and figures in one folder."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from sao_online.analysis.aggregate import (
    LOWER_IS_BETTER,
    aggregate_recovery,
    probability_of_improvement,
)
from sao_online.analysis.loading import PathsLike, load_runs
from sao_online.analysis.plots import (
    plot_behavior_shares,
    plot_metric_intervals,
    plot_recovery,
    plot_staleness_histogram,
    plot_update_metric,
)
from sao_online.analysis.prompt_groups import prompt_key_blocks, reward_by_prompt_key
from sao_online.analysis.recovery import recovery_metrics
from sao_online.analysis.report_render import (
    Block,
    Heading,
    Image,
    Paragraph,
    Table,
    to_html,
    to_markdown,
    write_csv,
)
from sao_online.analysis.verdict import MIN_SEEDS, seed_warnings, verdict_table
from sao_online.defaults import DEFAULT_ORACLE_FRACTION

# Metrics shown in the report's tables, in order, with their column titles ({f}: the oracle
# fraction of the absolute recovery level).
TABLE_METRICS = {
    "time_to_recovery": "time to recovery",
    "time_to_oracle_fraction": "time to {f:g} x oracle",
    "drop": "drop",
    "recovery_auc": "recovery AUC (x pre-level)",
    "dynamic_regret_per_episode": "regret / episode",
    "forgetting": "forgetting",
}
# Metrics compared pairwise with the probability of improvement.
COMPARED_METRICS = ["time_to_recovery", "recovery_auc", "dynamic_regret_per_episode"]
LEARNER_PLOTS = [
    (
        "zero_variance",
        ["charts/zero_variance_group_fraction"],
        "Share of groups whose rewards were all equal (no learning signal for group baselines).",
    ),
    (
        "masked_fractions",
        ["charts/masked_below_fraction", "charts/masked_above_fraction"],
        "Share of action tokens masked out of the policy loss below / above the importance-ratio "
        "band.",
    ),
    (
        "explained_variance",
        ["charts/explained_variance"],
        "Critic explained variance of the returns (1 is perfect, 0 no better than a constant).",
    ),
]
# Said instead of drawing a figure whose every value is 0.
ALL_ZERO_NOTES = {
    "zero_variance": "Every group had some reward variance (zero-variance share 0 throughout).",
    "masked_fractions": "No action token was masked out of the policy loss (both masked "
    "fractions 0 throughout): every importance ratio stayed inside the band.",
}


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


def _interval(row: pd.Series) -> str:
    if not np.isfinite(row["iqm"]):
        return ""
    text = f"{row['iqm']:.3g} [{row['lower']:.3g}, {row['upper']:.3g}]"
    censored = row.get("censored_fraction", np.nan)
    if np.isfinite(censored) and censored > 0:
        text += f" ({censored:.0%} censored)"
    return text


# The metrics that are times: the wall-clock table shows these, in seconds.
TIME_METRICS = ["time_to_recovery", "time_to_oracle_fraction"]


def _metrics_table(
    aggregated: pd.DataFrame, oracle_fraction: float, metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    rows = []
    for (method, change_point), group in aggregated.groupby(["method", "change_point"]):
        by_metric = group.set_index("metric")
        first = group.iloc[0]
        row = {
            "method": method,
            "shift": f"{change_point}: {first.get('phase_before', '')} -> "
            f"{first.get('phase_after', '')}",
            "seeds": int(by_metric["n_seeds"].max()),
        }
        for metric, title in TABLE_METRICS.items():
            if metric in by_metric.index and (metrics is None or metric in metrics):
                row[title.format(f=oracle_fraction)] = _interval(by_metric.loc[metric])
        rows.append(row)
    return pd.DataFrame(rows)


def _improvement_rows(
    per_seed: pd.DataFrame, experiment: str, *, reps: int, confidence: float, seed: int
) -> pd.DataFrame:
    """P(improvement) for every pair of methods of one experiment and each compared metric."""
    rows = []
    methods = sorted(per_seed["method"].unique()) if len(per_seed) else []
    for method_x, method_y in itertools.combinations(methods, 2):
        for metric in COMPARED_METRICS:
            try:
                estimate = probability_of_improvement(
                    per_seed,
                    metric,
                    method_x,
                    method_y,
                    lower_is_better=LOWER_IS_BETTER[metric],
                    reps=reps,
                    confidence=confidence,
                    seed=seed,
                )
            except ValueError:
                continue  # no shift where both methods have a finite value of this metric
            rows.append(
                {
                    "experiment": experiment,
                    "method_x": method_x,
                    "method_y": method_y,
                    "metric": metric,
                    "better_when": "lower" if estimate.lower_is_better else "higher",
                    "probability": estimate.probability,
                    "lower": estimate.lower,
                    "upper": estimate.upper,
                    "n_strata": estimate.n_strata,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "experiment",
            "method_x",
            "method_y",
            "metric",
            "better_when",
            "probability",
            "lower",
            "upper",
            "n_strata",
        ],
    )


def _runs_table(episodes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (experiment, method), group in episodes.groupby(["experiment", "method"]):
        per_seed = group.groupby("seed").size()
        dropped = float(group["dropped"].mean()) if "dropped" in group else 0.0
        rows.append(
            {
                "experiment": experiment,
                "method": method,
                "seeds": len(per_seed),
                "episodes per seed": int(per_seed.median()),
                "mean reward": float(group["reward"].mean()),
                "dropped": f"{dropped:.1%}",
            }
        )
    return pd.DataFrame(rows)


def _clock(episodes: pd.DataFrame, experiment: str) -> str | None:
    """The clock of an experiment's runs (``episodes``, ``steps``, ...), None when unknown."""
    clocks = {
        info.get("clock")
        for key, info in episodes.attrs.get("runs", {}).items()
        if key[0] == experiment
    }
    return clocks.pop() if len(clocks) == 1 else None


def _recovery_figure_name(prefix: str, x: str, clock: str | None) -> str:
    """``<experiment>_recovery_by_<axis>.png``: episodes (or the run's clock), tokens or wall
    seconds."""
    axis = {"tokens": "tokens", "seconds": "wall_seconds"}.get(x, clock or "clock")
    return f"{prefix}_recovery_by_{axis}.png"


def _clock_unit(episodes: pd.DataFrame, experiment: str) -> str:
    clock = _clock(episodes, experiment)
    return {
        "episodes": "episodes started",
        "steps": "environment steps",
        "versions": "learner versions",
        "seconds": "seconds",
    }.get(clock, "clock units")


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
    blocks: list[Block] = [Heading(f"Experiment: {experiment}")]
    prefix = _slug(experiment)
    unit = _clock_unit(episodes, experiment)
    for x, description in (
        ("world_time", unit),
        ("tokens", "action tokens generated"),
        ("seconds", "wall-clock seconds"),
    ):
        needed = {"tokens": "num_action_tokens", "seconds": "wall_time"}.get(x, "world_time")
        if needed not in episodes or not np.isfinite(episodes[needed].to_numpy(float)).any():
            continue
        name = _recovery_figure_name(prefix, x, _clock(episodes, experiment))
        plot_recovery(
            episodes,
            x=x,
            smooth=smooth if x == "world_time" else None,
            path=figures / name,
            reps=min(reps, 500),
            confidence=confidence,
            seed=seed,
        )
        blocks.append(
            Image(
                f"figures/{name}",
                f"Reward against {description}: IQM across seeds "
                f"with a {confidence:.0%} bootstrap band.",
            )
        )

    if len(per_seed):
        blocks.append(Heading("Recovery after each shift", 3))
        blocks.append(
            Table(
                _metrics_table(aggregated, oracle_fraction),
                f"IQM [{confidence:.0%} CI] across seeds; times in {unit}.",
            )
        )
        if aggregated_seconds is not None and len(aggregated_seconds):
            blocks.append(
                Table(
                    _metrics_table(aggregated_seconds, oracle_fraction, TIME_METRICS),
                    f"The same times in wall-clock seconds from the shift (IQM [{confidence:.0%} "
                    "CI] across seeds): what a method's speed per episode makes of its sample "
                    "efficiency. Seconds compare only between runs that shared the machine in "
                    "the same way.",
                )
            )
        name = f"{prefix}_time_to_recovery.png"
        if (aggregated["metric"] == "time_to_recovery").any():
            plot_metric_intervals(aggregated, "time_to_recovery", path=figures / name, unit=unit)
            blocks.append(
                Image(
                    f"figures/{name}",
                    "Time to recovery per method and shift (hollow points: some runs censored).",
                )
            )
        else:
            blocks.append(
                Paragraph(
                    "Time to recovery is undefined for every run and shift (see "
                    "the notes below): nothing was learned before the shifts."
                )
            )
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
    if "behavior" in episodes and episodes["behavior"].nunique() > 0:
        name = f"{prefix}_behavior_shares.png"
        plot_behavior_shares(episodes, smooth=smooth, path=figures / name)
        blocks.append(
            Image(
                f"figures/{name}",
                "Share of each behaviour label over time, mean "
                "across seeds: the policy switching behaviour.",
            )
        )
    trained = episodes["staleness"] >= 0 if "staleness" in episodes else None
    if trained is not None and trained.any() and (episodes.loc[trained, "staleness"] == 0).all():
        blocks.append(
            Paragraph(
                "Every trained episode had staleness 0 (sampled by the policy "
                "version that trained on it, as with the sync backend)."
            )
        )
    elif trained is not None and trained.any():
        name = f"{prefix}_staleness.png"
        plot_staleness_histogram(episodes, path=figures / name)
        blocks.append(Image(f"figures/{name}", "Staleness of the episodes trained on."))
    if updates is not None and len(updates):
        blocks.extend(
            _learner_blocks(
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


def _learner_blocks(
    updates: pd.DataFrame,
    episodes: pd.DataFrame,
    prefix: str,
    figures: Path,
    *,
    reps: int,
    confidence: float,
    seed: int,
) -> list[Block]:
    x = "episodes_seen" if "episodes_seen" in updates else "version"
    markers = None
    if x == "episodes_seen":
        configs = [
            info
            for key, info in episodes.attrs.get("runs", {}).items()
            if key[0] == episodes["experiment"].iloc[0]
        ]
        if configs and all(info.get("clock") == "episodes" for info in configs):
            markers = configs[0].get("change_points") or None
    blocks: list[Block] = []
    drawn = False
    for name, metrics, caption in LEARNER_PLOTS:
        present = [
            metric
            for metric in metrics
            if metric in updates and np.isfinite(updates[metric].to_numpy(dtype=float)).any()
        ]
        if not present:
            continue  # e.g. GRPO-only runs log no explained variance: skip quietly
        if name in ALL_ZERO_NOTES and all(
            (updates[metric].dropna() == 0).all() for metric in present
        ):
            blocks.append(Paragraph(ALL_ZERO_NOTES[name]))  # an all-zero figure says nothing
            continue
        file_name = f"{prefix}_{name}.png"
        plot_update_metric(
            updates,
            present if len(present) > 1 else present[0],
            x=x,
            path=figures / file_name,
            change_points=markers,
            reps=min(reps, 500),
            confidence=confidence,
            seed=seed,
        )
        blocks.append(Image(f"figures/{file_name}", caption))
        drawn = True
    if not blocks:
        return []
    header: list[Block] = [Heading("Learner diagnostics", 3)]
    if drawn and markers:
        header.append(
            Paragraph(
                "Dashed lines mark the shifts at episodes trained on = the shift's clock "
                "reading; the learner lags the clock by the episodes in flight."
            )
        )
    return header + blocks


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

    Returns:
        The path of ``report.md``.

    Works with one seed (intervals collapse to the point) and one method (no comparisons).

    Example:
        >>> write_report("runs/style-shift", "reports/style-shift")  # doctest: +SKIP
    """
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
    out_dir = Path(out_dir)
    figures = out_dir / "figures"
    figures.mkdir(parents=True, exist_ok=True)

    per_seed = recovery_metrics(
        episodes,
        window=window,
        rho=rho,
        horizon=horizon,
        smooth=smooth,
        evals=evals,
        oracle_fraction=oracle_fraction,
    )
    aggregated = aggregate_recovery(per_seed, reps=reps, confidence=confidence, seed=seed)
    per_seed_seconds, aggregated_seconds = None, None
    if "wall_time" in episodes and np.isfinite(episodes["wall_time"].to_numpy(float)).all():
        per_seed_seconds = recovery_metrics(
            episodes, x="seconds", rho=rho, oracle_fraction=oracle_fraction
        )
        aggregated_seconds = aggregate_recovery(
            per_seed_seconds,
            TIME_METRICS,
            reps=reps,
            confidence=confidence,
            seed=seed,
        )
    improvement = pd.concat(
        [
            _improvement_rows(
                per_seed[per_seed["experiment"] == experiment],
                experiment,
                reps=reps,
                confidence=confidence,
                seed=seed,
            )
            for experiment in sorted(per_seed["experiment"].unique())
        ]
        or [_improvement_rows(per_seed, "", reps=reps, confidence=confidence, seed=seed)],
        ignore_index=True,
    )
    by_prompt = reward_by_prompt_key(episodes)

    title = title or "Recovery after distribution shifts"
    unit_note = _clock_unit(episodes, str(episodes["experiment"].iloc[0]))
    blocks: list[Block] = [
        Heading(title, 1),
        Paragraph(
            f"{episodes.groupby(['experiment', 'method', 'seed']).ngroups} runs from {sources}."
        ),
        *(Paragraph(f"Warning: {warning}") for warning in seed_warnings(episodes)),
        *_verdict_blocks(aggregated, unit_note, confidence, rho, oracle_fraction),
        Table(_runs_table(episodes)),
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
            "`recovery_per_seed.csv`: every metric per run and shift (with a `note` when a metric "
            "is undefined). `recovery_per_seed_seconds.csv` (when episodes carry wall-clock "
            "times): the recovery times per run and shift in seconds. `improvement.csv`: the "
            "pairwise comparisons. `figures/`: the PNGs."
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
