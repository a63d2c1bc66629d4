"""The figures of a report: each function draws its PNGs into the report's ``figures/`` folder
and returns the blocks (image and caption, or a sentence where a figure would say nothing) that
``report`` lays out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sao_online.analysis.plots import (
    plot_behavior_shares,
    plot_metric_intervals,
    plot_recovery,
    plot_staleness_histogram,
    plot_update_metric,
)
from sao_online.analysis.report_data import clock_unit, run_clock
from sao_online.analysis.report_render import Block, Heading, Image, Paragraph

# The learner diagnostics a report draws: (figure name, update metrics, caption).
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
        "band (DIS: each token by its ratio; sequence-masked IS: the tokens of rejected "
        "sequences; decoupled PPO: tokens above the behaviour-weight cap).",
    ),
    (
        "truncated_fraction",
        ["charts/truncated_fraction"],
        "Share of action tokens whose importance weight was truncated at the cap (token TIS); "
        "they still learn, at the cap's weight.",
    ),
    (
        "clip_fractions",
        ["charts/clip_fraction_low", "charts/clip_fraction_high"],
        "Share of action tokens where the PPO clip bound below / above (no gradient): against "
        "the sampling policy (PPO clip), the proximal policy (decoupled PPO) or, for GSPO, the "
        "share of sequences.",
    ),
    (
        "effective_sample_size",
        ["charts/effective_sample_size"],
        "Normalized effective sample size of the policy loss's token weights, (sum w)^2 / "
        "(n sum w^2): 1 when every token weighs the same, lower as fewer tokens carry the update.",
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
    "truncated_fraction": "No importance weight was truncated (truncated share 0 throughout): "
    "every ratio stayed at or below the cap.",
    "clip_fractions": "The PPO clip never bound (both clip fractions 0 throughout); for decoupled "
    "PPO, whose one gradient step per batch is taken at the proximal policy, it cannot.",
}


def recovery_figure_name(prefix: str, x: str, clock: str | None) -> str:
    """``<experiment>_recovery_by_<axis>.png``: episodes (or the run's clock), tokens or wall
    seconds."""
    axis = {"tokens": "tokens", "seconds": "wall_seconds"}.get(x, clock or "clock")
    return f"{prefix}_recovery_by_{axis}.png"


def recovery_figures(
    episodes: pd.DataFrame,
    experiment: str,
    prefix: str,
    figures: Path,
    *,
    smooth: float | None,
    reps: int,
    confidence: float,
    seed: int,
) -> list[Block]:
    """The recovery curves of one experiment, against its clock, action tokens and wall-clock
    seconds (each axis the episodes carry)."""
    blocks: list[Block] = []
    unit = clock_unit(episodes, experiment)
    for x, description in (
        ("world_time", unit),
        ("tokens", "action tokens generated"),
        ("seconds", "wall-clock seconds"),
    ):
        needed = {"tokens": "num_action_tokens", "seconds": "wall_time"}.get(x, "world_time")
        if needed not in episodes or not np.isfinite(episodes[needed].to_numpy(float)).any():
            continue
        name = recovery_figure_name(prefix, x, run_clock(episodes, experiment))
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
    return blocks


def recovery_time_figure(aggregated: pd.DataFrame, prefix: str, figures: Path, unit: str) -> Block:
    """Time to recovery per method and shift with its intervals, or a paragraph saying it is
    undefined everywhere."""
    if not (aggregated["metric"] == "time_to_recovery").any():
        return Paragraph(
            "Time to recovery is undefined for every run and shift (see "
            "the notes below): nothing was learned before the shifts."
        )
    name = f"{prefix}_time_to_recovery.png"
    plot_metric_intervals(aggregated, "time_to_recovery", path=figures / name, unit=unit)
    return Image(
        f"figures/{name}",
        "Time to recovery per method and shift (hollow points: some runs censored).",
    )


def episode_figures(
    episodes: pd.DataFrame, prefix: str, figures: Path, *, smooth: float | None
) -> list[Block]:
    """Behaviour shares over time and the staleness of trained episodes, where the episodes
    carry them."""
    blocks: list[Block] = []
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
    return blocks


def learner_figures(
    updates: pd.DataFrame,
    episodes: pd.DataFrame,
    prefix: str,
    figures: Path,
    *,
    reps: int,
    confidence: float,
    seed: int,
) -> list[Block]:
    """The learner diagnostics of ``LEARNER_PLOTS`` that the updates logged, under a heading
    (an all-zero metric is a sentence instead of a figure)."""
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
