"""Aggregation across seeds in the manner of rliable (Agarwal et al., 2021), from the definitions.

- Interquartile mean (IQM): the mean of the middle 50% of the empirical distribution,
  ``2 * integral_{0.25}^{0.75} Q(u) du`` with Q the empirical quantile function. Each of the n
  sorted values owns probability mass 1/n and is weighted by how much of its mass lies in
  [0.25, 0.75], so the IQM is defined for every n >= 1: n = 1 gives the value, n = 2 the mean,
  n = 3 weights (1/6, 2/3, 1/6), n = 5 weights (0, .3, .4, .3, 0). When n is a multiple of 4
  this equals the 25%-trimmed mean (rliable / ``scipy.stats.trim_mean(x, 0.25)``); for other n
  it differs slightly from trim_mean, which trims whole values only (and so is the plain mean
  for n < 4).
- Stratified bootstrap: within each stratum (e.g. a change point of an experiment, the analogue
  of rliable's "task"), resample the runs with replacement, independently per stratum; pool the
  resampled values and take the IQM. The confidence interval is the percentile interval of the
  ``reps`` bootstrap IQMs. With one seed the interval collapses to the point.
- Probability of improvement P(X > Y): per stratum, the fraction of (run of X, run of Y) pairs
  in which X is better, ties counting one half (the Mann-Whitney U statistic / (n m)); averaged
  over strata; CI by the stratified bootstrap over both methods' runs.
- Censored values (time_to_recovery that never reached the threshold) are aggregated as-is, at
  their censoring time; ``censored_fraction`` reports the share of such values next to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

# Recovery metrics aggregated by default, with the direction in which they are better.
LOWER_IS_BETTER = {
    "time_to_recovery": True,
    "time_to_oracle_fraction": True,
    "drop": True,
    "relative_drop": True,
    "recovery_auc": False,
    "recovery_auc_oracle": False,
    "dynamic_regret_per_episode": True,
    "forgetting": True,
    "pre_level": False,
}

# Right-censored metrics and the column that flags their censored values.
CENSORED_BY = {
    "time_to_recovery": "censored",
    "time_to_oracle_fraction": "oracle_fraction_censored",
}

CI_COLUMNS = [
    "metric",
    "iqm",
    "lower",
    "upper",
    "confidence",
    "n_values",
    "n_seeds",
    "censored_fraction",
]


def iqm_weights(count: int) -> np.ndarray:
    """Weights of the sorted values in the interquartile mean of ``count`` values (sum 1)."""
    if count < 1:
        raise ValueError(f"the interquartile mean needs at least one value, got {count}")
    edges = np.arange(count + 1) / count
    overlap = np.clip(edges[1:], 0.25, 0.75) - np.clip(edges[:-1], 0.25, 0.75)
    return 2.0 * overlap


def interquartile_mean(values: Sequence[float] | np.ndarray) -> float:
    """The interquartile mean of ``values`` (NaNs ignored; NaN when nothing is left).

    Example:
        >>> interquartile_mean([1, 2, 3, 4])   # the middle two values
        2.5
        >>> interquartile_mean([0, 3, 30])     # weights 1/6, 2/3, 1/6
        7.0
    """
    array = np.asarray(values, dtype=float).ravel()
    array = np.sort(array[np.isfinite(array)])
    if not len(array):
        return float("nan")
    return float(array @ iqm_weights(len(array)))


def _row_iqms(samples: np.ndarray) -> np.ndarray:
    """IQM of each row of a [reps, n] matrix."""
    return np.sort(samples, axis=1) @ iqm_weights(samples.shape[1])


def _bootstrap_pool(
    strata_values: list[np.ndarray], reps: int, rng: np.random.Generator
) -> np.ndarray:
    """[reps, total] matrix: each stratum's values resampled with replacement, side by side."""
    columns = [
        values[rng.integers(0, len(values), size=(reps, len(values)))] for values in strata_values
    ]
    return np.concatenate(columns, axis=1)


def _percentile_interval(statistics: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    lower, upper = np.quantile(statistics, [tail, 1.0 - tail])
    return float(lower), float(upper)


def _check_common(
    df: pd.DataFrame, metric: str, columns: Sequence[str], reps: int, confidence: float
) -> None:
    if metric not in df.columns:
        raise ValueError(
            f"metric {metric!r} is not a column; columns are {', '.join(map(str, df.columns))}"
        )
    missing = [column for column in columns if column not in df.columns]
    if missing:
        raise ValueError(f"grouping column(s) {', '.join(missing)} not in the frame")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def stratified_bootstrap_ci(
    df: pd.DataFrame,
    metric: str,
    by: Sequence[str] = ("method",),
    strata: Sequence[str] = (),
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    *,
    censored: str | None = None,
) -> pd.DataFrame:
    """IQM of ``metric`` per group with a stratified-bootstrap percentile confidence interval.

    Args:
        df: one row per run (and stratum), e.g. the output of :func:`recovery_metrics`.
        metric: the column to aggregate; NaN rows are left out (and not counted).
        by: columns that define the groups compared (one output row per group).
        strata: columns within which runs are resampled independently (e.g.
            ``["experiment", "change_point"]`` to pool shifts while keeping each shift's share).
        reps: bootstrap replications.
        confidence: coverage of the interval (0.95 gives the 2.5% and 97.5% percentiles).
        seed: seeds the resampling; every group uses the same stream, so a group's interval does
            not depend on which other groups are present.
        censored: name of a boolean column flagging right-censored values, for
            ``censored_fraction`` (NaN when None).

    Returns:
        The ``by`` columns, then ``metric`` (its name), ``iqm``, ``lower``, ``upper``,
        ``confidence``, ``n_values``, ``n_seeds`` (distinct ``seed`` values, when that column
        exists) and ``censored_fraction``. Groups with no finite value get NaN statistics.

    Example:
        >>> table = stratified_bootstrap_ci(per_seed, "time_to_recovery",
        ...                                 by=["method"], strata=["change_point"],
        ...                                 censored="censored")  # doctest: +SKIP
    """
    by, strata = list(by), list(strata)
    extra = [censored] if censored else []
    _check_common(df, metric, by + strata + extra, reps, confidence)
    rows = []
    groups = df.groupby(by, sort=True, dropna=False) if by else [((), df)]
    for group_key, group in groups:
        group_key = group_key if isinstance(group_key, tuple) else (group_key,)
        finite = group[np.isfinite(group[metric].to_numpy(dtype=float))]
        values = finite[metric].to_numpy(dtype=float)
        row = dict(zip(by, group_key))
        row.update(
            metric=metric,
            confidence=confidence,
            n_values=len(values),
            n_seeds=int(finite["seed"].nunique()) if "seed" in finite else np.nan,
            censored_fraction=(
                float(finite[censored].astype(bool).mean()) if censored and len(finite) else np.nan
            ),
        )
        if not len(values):
            row.update(iqm=np.nan, lower=np.nan, upper=np.nan)
            rows.append(row)
            continue
        strata_values = (
            [
                part[metric].to_numpy(dtype=float)
                for _, part in finite.groupby(strata, sort=True, dropna=False)
            ]
            if strata
            else [values]
        )
        rng = np.random.default_rng(seed)
        bootstrap_iqms = _row_iqms(_bootstrap_pool(strata_values, reps, rng))
        lower, upper = _percentile_interval(bootstrap_iqms, confidence)
        row.update(iqm=interquartile_mean(values), lower=lower, upper=upper)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *CI_COLUMNS])


@dataclass(frozen=True)
class ImprovementEstimate:
    """P(method_x better than method_y on ``metric``) with a bootstrap confidence interval.

    Attributes:
        method_x / method_y: the two methods compared.
        metric: the column compared.
        lower_is_better: whether smaller values of ``metric`` count as better.
        probability: the point estimate, averaged over strata.
        lower / upper: percentile bootstrap interval at ``confidence``.
        confidence: coverage of the interval.
        n_strata: strata where both methods have values (the others are left out).
    """

    method_x: str
    method_y: str
    metric: str
    lower_is_better: bool
    probability: float
    lower: float
    upper: float
    confidence: float
    n_strata: int


def _pairwise_win_rate(
    x_samples: np.ndarray, y_samples: np.ndarray, lower_is_better: bool
) -> np.ndarray:
    """Per leading index, the fraction of (x, y) pairs where x beats y, ties counting 1/2."""
    difference = x_samples[..., :, None] - y_samples[..., None, :]
    if lower_is_better:
        difference = -difference
    wins = (difference > 0).mean(axis=(-2, -1))
    ties = (difference == 0).mean(axis=(-2, -1))
    return wins + 0.5 * ties


def probability_of_improvement(
    df: pd.DataFrame,
    metric: str,
    method_x: str,
    method_y: str,
    *,
    lower_is_better: bool = False,
    strata: Sequence[str] | None = None,
    method_column: str = "method",
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ImprovementEstimate:
    """P(X > Y): the chance a run of ``method_x`` beats a run of ``method_y``, averaged over strata.

    Args:
        df: one row per run and stratum (e.g. :func:`recovery_metrics` output).
        metric: the column compared; NaN values are left out.
        method_x: a value of ``method_column``.
        method_y: another value of ``method_column``.
        lower_is_better: True for costs such as time_to_recovery or regret.
        strata: columns defining strata (rliable's tasks); default: whichever of
            ``experiment`` and ``change_point`` exist.
        method_column: the column naming the method.
        reps: as in :func:`stratified_bootstrap_ci`.
        confidence: as in :func:`stratified_bootstrap_ci`.
        seed: as in :func:`stratified_bootstrap_ci`.

    Raises:
        ValueError: unknown columns or methods, or no stratum where both methods have values.

    Example:
        >>> estimate = probability_of_improvement(per_seed, "time_to_recovery", "sao", "grpo",
        ...                                       lower_is_better=True)  # doctest: +SKIP
        >>> estimate.probability, estimate.lower, estimate.upper  # doctest: +SKIP
    """
    if strata is None:
        strata = [column for column in ("experiment", "change_point") if column in df.columns]
    strata = list(strata)
    _check_common(df, metric, [method_column, *strata], reps, confidence)
    known = set(df[method_column].unique())
    for method in (method_x, method_y):
        if method not in known:
            raise ValueError(
                f"method {method!r} not in column {method_column!r}; "
                f"have {', '.join(sorted(map(str, known)))}"
            )
    finite = df[np.isfinite(df[metric].to_numpy(dtype=float))]
    pairs = []
    for _, part in finite.groupby(strata, sort=True, dropna=False) if strata else [((), finite)]:
        x_values = part.loc[part[method_column] == method_x, metric].to_numpy(dtype=float)
        y_values = part.loc[part[method_column] == method_y, metric].to_numpy(dtype=float)
        if len(x_values) and len(y_values):
            pairs.append((x_values, y_values))
    if not pairs:
        raise ValueError(
            f"no stratum has finite {metric!r} values for both {method_x!r} and {method_y!r}"
        )
    point = float(np.mean([_pairwise_win_rate(x, y, lower_is_better) for x, y in pairs]))
    rng = np.random.default_rng(seed)
    bootstrap = np.zeros(reps)
    for x_values, y_values in pairs:
        x_samples = x_values[rng.integers(0, len(x_values), size=(reps, len(x_values)))]
        y_samples = y_values[rng.integers(0, len(y_values), size=(reps, len(y_values)))]
        bootstrap += _pairwise_win_rate(x_samples, y_samples, lower_is_better)
    lower, upper = _percentile_interval(bootstrap / len(pairs), confidence)
    return ImprovementEstimate(
        method_x=method_x,
        method_y=method_y,
        metric=metric,
        lower_is_better=lower_is_better,
        probability=point,
        lower=lower,
        upper=upper,
        confidence=confidence,
        n_strata=len(pairs),
    )


def aggregate_recovery(
    per_seed: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    by: Sequence[str] = ("experiment", "method", "change_point"),
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Long table of IQM and CI per group and metric (the report's ``metrics.csv``).

    Args:
        per_seed: :func:`recovery_metrics` output.
        metrics: columns to aggregate; default the keys of ``LOWER_IS_BETTER`` present in
            ``per_seed``. Metrics with no finite value anywhere (e.g. ``forgetting`` without
            evals) are left out.
        by: group columns (each group's seeds are one stratum).
        reps: as in :func:`stratified_bootstrap_ci`.
        confidence: as in :func:`stratified_bootstrap_ci`.
        seed: as in :func:`stratified_bootstrap_ci`.

    Returns:
        The ``by`` columns, ``phase_before``/``phase_after``/``tau_clock`` when grouping by
        change point, then the columns of ``CI_COLUMNS`` and ``lower_is_better``.
        ``censored_fraction`` is filled for the right-censored times (``CENSORED_BY``).
    """
    by = list(by)
    if metrics is None:
        metrics = [name for name in LOWER_IS_BETTER if name in per_seed.columns]
    tables = []
    for metric in metrics:
        if metric not in per_seed.columns:
            raise ValueError(f"metric {metric!r} is not a recovery metric column")
        if not np.isfinite(per_seed[metric].to_numpy(dtype=float)).any():
            continue
        censored = CENSORED_BY.get(metric)
        table = stratified_bootstrap_ci(
            per_seed,
            metric,
            by=by,
            reps=reps,
            confidence=confidence,
            seed=seed,
            censored=censored if censored in per_seed else None,
        )
        table["lower_is_better"] = LOWER_IS_BETTER.get(metric, np.nan)
        tables.append(table)
    if not tables:
        return pd.DataFrame(columns=[*by, *CI_COLUMNS, "lower_is_better"])
    combined = pd.concat(tables, ignore_index=True)
    labels = [
        column
        for column in ("phase_before", "phase_after", "tau_clock")
        if column in per_seed.columns
    ]
    if "change_point" in by and labels:
        keys = [column for column in ("experiment", "change_point") if column in by]
        first = per_seed.drop_duplicates(keys)[keys + labels]
        combined = combined.merge(first, on=keys, how="left")
        ordered = by + labels + [c for c in combined.columns if c not in by + labels]
        combined = combined[ordered]
    return combined


def nan_interquartile_mean(array: np.ndarray, axis: int = -1) -> np.ndarray:
    """IQM along ``axis`` over the finite entries only (NaN where a slice has none).

    Vectorised over every other axis: used for curves across seeds where some seeds have no
    value at a grid point.
    """
    moved = np.moveaxis(np.asarray(array, dtype=float), axis, -1)
    size = moved.shape[-1]
    ordered = np.sort(moved, axis=-1)  # NaNs sort last, so the finite values lead each slice
    counts = np.isfinite(ordered).sum(axis=-1)
    weight_table = np.zeros((size + 1, size))
    for count in range(1, size + 1):
        weight_table[count, :count] = iqm_weights(count)
    weighted = np.where(np.isfinite(ordered), ordered, 0.0) * weight_table[counts]
    return np.where(counts > 0, weighted.sum(axis=-1), np.nan)
