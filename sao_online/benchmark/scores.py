"""The normalized adaptation score and everything the scorecard computes from it.

Definition (docs/benchmark.md is the reference): for task T and phase p,

    floor(T, p)  = mean over the seeds of ``frozen`` of its mean reward over phase p
    oracle(T, p) = the mean oracle reward of phase p's episodes (the env's expected oracle
                   return under the phase's regime)
    score(run, p) = (mean reward of the run over phase p - floor) / (oracle - floor)

1 is the oracle, 0 is not learning at all, negative is worse than not learning. A phase whose
oracle exceeds the floor by less than ``min_gap`` (the warm start is already about as good as
the oracle, or the oracle cannot do better) has no score: it is left out of every aggregate and
shown as not scored.

The aggregates are rliable's on a (runs x families) score matrix: one score per run and family,
the run's mean score over the family's phases that follow a shift (a family with two shifts
weighs as much as one with one), so every family holds one score per run and the columns have
equal length whenever every family ran the same seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations

import numpy as np
import pandas as pd

from sao_online.analysis.suite_metrics import (
    Clustered,
    Interval,
    improvement_interval,
    optimality_gap,
    score_distribution,
    stratified_interval,
    trimmed_iqm,
)

#: Fewer seeds than this on either side and two methods are never called separated: their
#: bootstrap intervals describe the runs at hand, not the methods (rliable asks for 5 or more).
MIN_SEEDS_TO_SEPARATE = 3


def normalized_scores(
    phases: pd.DataFrame, runs: pd.DataFrame, *, floor_method: str, min_gap: float
) -> pd.DataFrame:
    """``phases`` with ``family``, ``warm_start_seed``, ``floor``, ``oracle``, ``gap``,
    ``score`` and ``note``.

    The floor of a run is the mean of the ``frozen`` runs of its task from its warm start
    (``runs``' ``warm_start_seed``; one warm start per task where the column is absent).
    ``score`` is NaN where the phase is not scored; ``note`` says why.
    """
    if "warm_start_seed" not in runs:
        runs = runs.assign(warm_start_seed=0)
    frame = phases.merge(
        runs[["task", "method", "seed", "family", "warm_start_seed"]],
        on=["task", "method", "seed"],
        how="left",
    )
    floor_keys = ["task", "warm_start_seed", "phase"]
    floors = (
        frame[frame["method"] == floor_method]
        .groupby(floor_keys)["reward_mean"]
        .mean()
        .rename("floor")
    )
    oracles = frame.groupby(["task", "phase"])["oracle_mean"].mean().rename("oracle")
    frame = frame.join(floors, on=floor_keys).join(oracles, on=["task", "phase"])
    frame["gap"] = frame["oracle"] - frame["floor"]
    scored = frame["gap"] >= min_gap
    frame["score"] = np.where(
        scored, (frame["reward_mean"] - frame["floor"]) / frame["gap"], np.nan
    )
    frame["note"] = ""
    frame.loc[frame["floor"].isna(), "note"] = f"no {floor_method} run: no floor"
    frame.loc[frame["oracle"].isna(), "note"] = "no oracle reward"
    close = frame["floor"].notna() & frame["oracle"].notna() & ~scored
    frame.loc[close, "note"] = f"oracle - floor < {min_gap:g}: not scored"
    return frame


def shift_scores(scores: pd.DataFrame, shifts: pd.DataFrame) -> pd.DataFrame:
    """Per run and shift k: the score of the phase before (k - 1) and after (k), and the
    episodes to 0.5 x oracle after the shift."""
    by_phase = scores.set_index(["task", "method", "seed", "phase"])["score"]
    frame = shifts.copy()
    keys = list(zip(frame["task"], frame["method"], frame["seed"]))
    frame["score_before"] = [
        by_phase.get((*key, shift - 1), np.nan) for key, shift in zip(keys, frame["shift"])
    ]
    frame["score_after"] = [
        by_phase.get((*key, shift), np.nan) for key, shift in zip(keys, frame["shift"])
    ]
    return frame


def phase_units(scores: pd.DataFrame) -> pd.DataFrame:
    """The scores of the phases after a shift, one per (family, task, phase, seed)."""
    return scores[(scores["phase"] >= 1) & scores["score"].notna()]


#: The columns that name one run of a method in a family (the score matrix's rows); its
#: warm-start seed goes with it where the scores have one.
RUN_KEYS = ["family", "method", "seed"]


def aggregate_units(scores: pd.DataFrame) -> pd.DataFrame:
    """The entries of the (runs x families) score matrix the aggregates are computed on: per
    (family, method, seed), the mean of the run's scores over the family's phases after a
    shift (``phases`` says how many), on every task of the family.

    Example:
        >>> scores = pd.DataFrame({"family": "F", "method": "m", "seed": 0, "task": "T",
        ...                        "phase": [0, 1, 2], "score": [0.9, 0.25, 0.75]})
        >>> aggregate_units(scores)[["family", "seed", "score", "phases"]].to_dict("records")
        [{'family': 'F', 'seed': 0, 'score': 0.5, 'phases': 2}]
    """
    units = phase_units(scores)
    keys = RUN_KEYS + (["warm_start_seed"] if "warm_start_seed" in units else [])
    return units.groupby(keys, as_index=False, sort=True).agg(
        score=("score", "mean"), phases=("score", "size")
    )


def stratum(units: pd.DataFrame) -> np.ndarray | Clustered:
    """One family's scores of one method as the bootstrap takes them: clustered by warm start
    where they carry one, so runs from one warm start are drawn together."""
    if "warm_start_seed" not in units:
        return units["score"].to_numpy(float)
    return Clustered(
        tuple(part["score"].to_numpy(float) for _, part in units.groupby("warm_start_seed"))
    )


def score_matrix(units: pd.DataFrame, method: str) -> tuple[np.ndarray, list[str]] | None:
    """``method``'s (runs x families) score matrix, as rliable takes it, and its families; None
    when it is not rectangular (the families hold different seeds)."""
    mine = units[units["method"] == method]
    if not len(mine):
        return None
    wide = mine.pivot_table(index="seed", columns="family", values="score", aggfunc="first")
    if wide.isna().any().any():
        return None
    return wide.to_numpy(float), [str(f) for f in wide.columns]


def matrix_note(units: pd.DataFrame, methods: Sequence[str]) -> str:
    """One sentence: the score matrix's shape per method, or why there is no rectangular one."""
    shapes = {}
    for method in methods:
        matrix = score_matrix(units, method)
        mine = units[units["method"] == method]
        if matrix is None and len(mine):
            counts = mine.groupby("family")["seed"].nunique()
            return (
                f"{method}'s families hold {counts.min()} to {counts.max()} runs, so its scores "
                "make no rectangular (runs x families) matrix: the aggregates weight every run's "
                "score alike within its family, as rliable's stratified bootstrap does, but no "
                "rliable matrix has these numbers"
            )
        if matrix is not None:
            shapes[method] = matrix[0].shape
    sizes = sorted({f"{runs} runs x {families} families" for runs, families in shapes.values()})
    return f"a (runs x families) matrix of {' or '.join(sizes)} per method" if sizes else ""


def _strata(units: pd.DataFrame, method: str) -> tuple[list[str], list]:
    mine = units[units["method"] == method]
    families = sorted(mine["family"].unique())
    return families, [stratum(mine[mine["family"] == f]) for f in families]


def _iqm(x: np.ndarray) -> np.ndarray:
    return trimmed_iqm(x, axis=-1)


def _gap(x: np.ndarray) -> np.ndarray:
    return optimality_gap(x, axis=-1)


@dataclass
class Aggregates:
    """Everything the scorecard shows across the suite."""

    table: pd.DataFrame  # per method: IQM, optimality gap with intervals, counts
    profiles: pd.DataFrame  # per method and tau: fraction of scores above tau, with band
    improvement: pd.DataFrame  # per ordered pair: P(X > Y) with interval
    families: pd.DataFrame  # per family and method: IQM with interval, rank
    flips: pd.DataFrame  # per family: pairs ranked against the aggregate


def aggregate(
    units: pd.DataFrame, methods: Sequence[str], *, reps: int = 2000, seed: int = 0
) -> Aggregates:
    """Aggregates as rliable computes them, strata = families (see ``suite_metrics``)."""
    methods = [m for m in methods if (units["method"] == m).any()]
    rows, profile_rows = [], []
    lowest = float(min(units["score"].min(), 0.0)) if len(units) else 0.0
    highest = float(max(units["score"].max(), 1.0)) if len(units) else 1.0
    taus = np.linspace(lowest, highest, 61)
    for method in methods:
        families, strata = _strata(units, method)
        iqm = stratified_interval(strata, _iqm, reps=reps, seed=seed)
        gap = stratified_interval(strata, _gap, reps=reps, seed=seed)
        profile = stratified_interval(
            strata, lambda x: score_distribution(x, taus), reps=reps, seed=seed
        )
        rows.append(
            {
                "method": method,
                "iqm": iqm.point,
                "iqm_lower": iqm.lower,
                "iqm_upper": iqm.upper,
                "optimality_gap": gap.point,
                "gap_lower": gap.lower,
                "gap_upper": gap.upper,
                "scores": int((units["method"] == method).sum()),
                "families": len(families),
            }
        )
        for tau, point, lower, upper in zip(taus, profile.point, profile.lower, profile.upper):
            profile_rows.append(
                {"method": method, "tau": tau, "fraction": point, "lower": lower, "upper": upper}
            )
    table = pd.DataFrame(rows).sort_values("iqm", ascending=False, kind="stable")
    table.insert(0, "rank", range(1, len(table) + 1))
    improvement = _improvement(units, methods, reps=reps, seed=seed)
    families = _family_table(units, methods, reps=reps, seed=seed)
    flips = _flips(table, families)
    return Aggregates(
        table.reset_index(drop=True), pd.DataFrame(profile_rows), improvement, families, flips
    )


def _improvement(
    units: pd.DataFrame, methods: Sequence[str], *, reps: int, seed: int
) -> pd.DataFrame:
    families = sorted(units["family"].unique())

    def strata(method: str) -> list:
        mine = units[units["method"] == method]
        return [stratum(mine[mine["family"] == f]) for f in families]

    seeds = units.groupby("method")["seed"].nunique()
    rows = []
    for x, y in permutations(methods, 2):
        try:
            estimate = improvement_interval(strata(x), strata(y), reps=reps, seed=seed)
        except ValueError:  # no family where both have scores
            continue
        rows.append(
            {
                "method_x": x,
                "method_y": y,
                "probability": estimate.point,
                "lower": estimate.lower,
                "upper": estimate.upper,
                "seeds": int(min(seeds[x], seeds[y])),
            }
        )
    return pd.DataFrame(
        rows, columns=["method_x", "method_y", "probability", "lower", "upper", "seeds"]
    )


def _family_table(
    units: pd.DataFrame, methods: Sequence[str], *, reps: int, seed: int
) -> pd.DataFrame:
    rows = []
    for family in sorted(units["family"].unique()):
        part = units[units["family"] == family]
        for method in methods:
            mine = part[part["method"] == method]
            values = mine["score"].to_numpy(float)
            if not len(values):
                continue
            estimate: Interval = stratified_interval([stratum(mine)], _iqm, reps=reps, seed=seed)
            rows.append(
                {
                    "family": family,
                    "method": method,
                    "iqm": estimate.point,
                    "iqm_lower": estimate.lower,
                    "iqm_upper": estimate.upper,
                    "scores": len(values),
                }
            )
    frame = pd.DataFrame(
        rows, columns=["family", "method", "iqm", "iqm_lower", "iqm_upper", "scores"]
    )
    frame["rank"] = frame.groupby("family")["iqm"].rank(ascending=False, method="min")
    return frame


def _flips(table: pd.DataFrame, families: pd.DataFrame) -> pd.DataFrame:
    """Per family, the pairs of methods it orders against the aggregate (strictly)."""
    overall = dict(zip(table["method"], table["iqm"]))
    rows = []
    for family, part in families.groupby("family", sort=True):
        local = dict(zip(part["method"], part["iqm"]))
        for better, worse in permutations(local, 2):
            if overall[better] > overall[worse] and local[better] < local[worse]:
                rows.append(
                    {
                        "family": family,
                        "aggregate_order": f"{better} > {worse}",
                        "family_order": f"{worse} > {better}",
                        "family_iqms": f"{local[worse]:.3f} vs {local[better]:.3f}",
                    }
                )
    return pd.DataFrame(rows, columns=["family", "aggregate_order", "family_order", "family_iqms"])


def separated(improvement: pd.DataFrame, better: str, worse: str) -> tuple[bool, pd.Series | None]:
    """Whether ``better`` is separated from ``worse``, and the P(better > worse) row.

    Separated: the 95% interval of P(better > worse) lies above 1/2 and both methods have at
    least :data:`MIN_SEEDS_TO_SEPARATE` seeds.
    """
    row = improvement[(improvement["method_x"] == better) & (improvement["method_y"] == worse)]
    if not len(row):
        return False, None
    row = row.iloc[0]
    return bool(row["lower"] > 0.5 and row["seeds"] >= MIN_SEEDS_TO_SEPARATE), row
