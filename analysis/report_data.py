"""The numbers of a report: recovery metrics per run and aggregated, pairwise comparisons, the
tables the page shows. ``report_figures`` draws the figures and ``report`` lays out the page."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sao_online.analysis.aggregate import (
    LOWER_IS_BETTER,
    aggregate_recovery,
    probability_of_improvement,
)
from sao_online.analysis.prompt_groups import reward_by_prompt_key
from sao_online.analysis.recovery import recovery_metrics

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
# The metrics that are times: the wall-clock table shows these, in seconds.
TIME_METRICS = ["time_to_recovery", "time_to_oracle_fraction"]


def interval(row: pd.Series) -> str:
    """An aggregated row as ``IQM [lower, upper]``, with its censored share when it has one."""
    if not np.isfinite(row["iqm"]):
        return ""
    text = f"{row['iqm']:.3g} [{row['lower']:.3g}, {row['upper']:.3g}]"
    censored = row.get("censored_fraction", np.nan)
    if np.isfinite(censored) and censored > 0:
        text += f" ({censored:.0%} censored)"
    return text


def metrics_table(
    aggregated: pd.DataFrame, oracle_fraction: float, metrics: Sequence[str] | None = None
) -> pd.DataFrame:
    """One row per method and shift: each of ``TABLE_METRICS`` (or of ``metrics``) as an
    interval."""
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
                row[title.format(f=oracle_fraction)] = interval(by_metric.loc[metric])
        rows.append(row)
    return pd.DataFrame(rows)


def improvement_rows(
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


def runs_table(episodes: pd.DataFrame) -> pd.DataFrame:
    """One row per experiment and method: seeds, episodes per seed, mean reward, dropped share."""
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


def run_clock(episodes: pd.DataFrame, experiment: str) -> str | None:
    """The clock of an experiment's runs (``episodes``, ``steps``, ...), None when unknown."""
    clocks = {
        info.get("clock")
        for key, info in episodes.attrs.get("runs", {}).items()
        if key[0] == experiment
    }
    return clocks.pop() if len(clocks) == 1 else None


def clock_unit(episodes: pd.DataFrame, experiment: str) -> str:
    """What an experiment's clock counts, in words (``episodes started``, ...)."""
    clock = run_clock(episodes, experiment)
    return {
        "episodes": "episodes started",
        "steps": "environment steps",
        "versions": "learner versions",
        "seconds": "seconds",
    }.get(clock, "clock units")


@dataclass
class ReportData:
    """Everything a report computes before it draws or lays out anything.

    Attributes:
        per_seed: :func:`recovery_metrics` per run and shift (the episodes' clock).
        aggregated: :func:`aggregate_recovery` of ``per_seed``.
        improvement: P(improvement) rows, every pair of methods per experiment.
        by_prompt: mean reward per method, phase and prompt-key value.
        per_seed_seconds: the recovery times per run and shift in wall-clock seconds, when
            every episode carries a wall time (else None).
        aggregated_seconds: :func:`aggregate_recovery` of ``per_seed_seconds`` (or None).
    """

    per_seed: pd.DataFrame
    aggregated: pd.DataFrame
    improvement: pd.DataFrame
    by_prompt: pd.DataFrame
    per_seed_seconds: pd.DataFrame | None = None
    aggregated_seconds: pd.DataFrame | None = None


def compute_report_data(
    episodes: pd.DataFrame,
    evals: pd.DataFrame | None,
    *,
    rho: float,
    window: float | None,
    smooth: float | None,
    horizon: float | None,
    oracle_fraction: float,
    reps: int,
    confidence: float,
    seed: int,
) -> ReportData:
    """The report's numbers for ``episodes`` (arguments as in :func:`write_report`)."""
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
            improvement_rows(
                per_seed[per_seed["experiment"] == experiment],
                experiment,
                reps=reps,
                confidence=confidence,
                seed=seed,
            )
            for experiment in sorted(per_seed["experiment"].unique())
        ]
        or [improvement_rows(per_seed, "", reps=reps, confidence=confidence, seed=seed)],
        ignore_index=True,
    )
    return ReportData(
        per_seed=per_seed,
        aggregated=aggregated,
        improvement=improvement,
        by_prompt=reward_by_prompt_key(episodes),
        per_seed_seconds=per_seed_seconds,
        aggregated_seconds=aggregated_seconds,
    )
