"""Aggregate performance across tasks exactly as rliable computes it (Agarwal et al., 2021).

These are the definitions of the ``rliable`` library (``rliable.metrics`` and
``rliable.library``), written from them for score arrays grouped by stratum (rliable's tasks;
the benchmark's task families), so strata may hold different numbers of scores:

- IQM: the 25% trimmed mean of all scores pooled, ``scipy.stats.trim_mean(x, 0.25)``: sort
  the n scores, drop ``floor(0.25 n)`` from each end, average the rest. For n = 5 that drops one
  from each end (the mean of the middle 3); for n < 4 nothing is dropped. (The report's
  :func:`~sao_online.analysis.aggregate.interquartile_mean` instead weights values by their
  share of the middle half, which agrees with this only when n is a multiple of 4.)
- Optimality gap: ``gamma - mean(min(x, gamma))`` with gamma = 1: how far the scores fall
  short of the oracle, scores above it counting as 1.
- Score distribution (performance profile): for each threshold tau, the fraction of all
  scores strictly above tau.
- Probability of improvement P(X > Y): per stratum, the Mann-Whitney U statistic over the n x m
  pairs divided by n m (ties count one half), averaged over the strata where both have scores.
- Stratified bootstrap: each rep resamples every stratum's scores with replacement (its own
  size, independently), pools them and recomputes the statistic; the interval is the
  percentile interval of the reps (rliable's default, ``method="percentile"``). For P(X > Y)
  the two methods' scores are resampled independently (``StratifiedIndependentBootstrap``).

With equal stratum sizes these are rliable's numbers for a (runs x tasks) score matrix whose
columns are the strata; the test suite checks them against rliable where it is installed. A
stratum may also be :class:`Clustered` (runs that share a warm start): its bootstrap then draws
the clusters before the runs within them, which rliable does not do; with one cluster, or one
run per cluster, it is rliable's again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: A statistic of a [reps, n] array of pooled scores, one value (or one row of values) per rep.
Statistic = Callable[[np.ndarray], np.ndarray]


def trimmed_iqm(scores: Sequence[float] | np.ndarray, axis: int = -1) -> np.ndarray | float:
    """rliable's IQM: the 25% trimmed mean along ``axis`` (scipy ``trim_mean(x, 0.25)``).

    Example:
        >>> trimmed_iqm([1, 2, 3, 4, 100])   # drops 1 and 100
        3.0
        >>> trimmed_iqm([0, 3, 30])          # n < 4: the plain mean
        11.0
    """
    array = np.sort(np.asarray(scores, dtype=float), axis=axis)
    count = array.shape[axis]
    if count == 0:
        raise ValueError("the IQM needs at least one score")
    cut = int(0.25 * count)
    kept = np.take(array, np.arange(cut, count - cut), axis=axis)
    result = kept.mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def optimality_gap(
    scores: Sequence[float] | np.ndarray, gamma: float = 1.0, axis: int = -1
) -> np.ndarray | float:
    """``gamma - mean(min(scores, gamma))`` along ``axis`` (rliable's optimality gap).

    Example:
        >>> optimality_gap([0.5, 1.5])   # 1 - mean(0.5, 1.0)
        0.25
    """
    array = np.asarray(scores, dtype=float)
    result = gamma - np.minimum(array, gamma).mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def score_distribution(
    scores: Sequence[float] | np.ndarray, taus: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Fraction of scores strictly above each tau; for a [reps, n] array, one row per rep.

    Example:
        >>> score_distribution([0.0, 0.5, 1.0], [0.0, 0.5]).tolist()
        [0.6666666666666666, 0.3333333333333333]
    """
    array = np.asarray(scores, dtype=float)
    thresholds = np.asarray(taus, dtype=float)
    return (array[..., :, None] > thresholds).mean(axis=-2)


@dataclass(frozen=True)
class Interval:
    """A point estimate and its stratified-bootstrap percentile interval (arrays for profiles)."""

    point: np.ndarray | float
    lower: np.ndarray | float
    upper: np.ndarray | float


@dataclass(frozen=True)
class Clustered:
    """A stratum whose scores come in clusters that share a random factor (the runs of one
    warm start): its bootstrap draws clusters with replacement, then scores within each drawn
    cluster, so the interval carries the factor's variation as well as the runs'. With one
    cluster, or one score per cluster, that is the one-level bootstrap; clusters of unequal
    sizes are resampled one level too (the pooled size must stay fixed).

    Example:
        >>> stratum = Clustered(([0.1, 0.2], [0.7, 0.8]))   # two warm starts, two runs each
        >>> stratified_interval([stratum], lambda x: x.mean(axis=-1), reps=200).point
        0.45
    """

    clusters: tuple[Sequence[float] | np.ndarray, ...]


Stratum = Sequence[float] | np.ndarray | Clustered


@dataclass(frozen=True)
class _Draws:
    """One stratum ready to resample: its finite scores and, for a two-level bootstrap, the
    [clusters, size] matrix of their indices (None: one level)."""

    values: np.ndarray
    members: np.ndarray | None = None

    def resample(self, reps: int, rng: np.random.Generator) -> np.ndarray:
        """[reps, n] resampled scores."""
        n = len(self.values)
        if self.members is None:
            return self.values[rng.integers(0, n, size=(reps, n))]
        clusters, size = self.members.shape
        drawn = rng.integers(0, clusters, size=(reps, clusters))
        within = rng.integers(0, size, size=(reps, clusters, size))
        return self.values[self.members[drawn[..., None], within]].reshape(reps, n)


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    return array[np.isfinite(array)]


def _draws(stratum: Stratum) -> _Draws:
    if not isinstance(stratum, Clustered):
        return _Draws(_finite(stratum))
    clusters = [c for c in (_finite(c) for c in stratum.clusters) if len(c)]
    values = np.concatenate(clusters) if clusters else np.zeros(0)
    sizes = {len(c) for c in clusters}
    if len(clusters) < 2 or sizes == {1} or len(sizes) > 1:
        return _Draws(values)
    return _Draws(values, np.arange(len(values)).reshape(len(clusters), sizes.pop()))


def _clean_strata(strata: Sequence[Stratum]) -> list[_Draws]:
    cleaned = [draws for draws in map(_draws, strata) if len(draws.values)]
    if not cleaned:
        raise ValueError("no finite score in any stratum")
    return cleaned


def _percentiles(samples: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    tail = 100.0 * (1.0 - confidence) / 2.0
    lower, upper = np.percentile(samples, [tail, 100.0 - tail], axis=0)
    return lower, upper


def _resampled(strata: list[_Draws], reps: int, rng: np.random.Generator) -> np.ndarray:
    """[reps, total]: each stratum resampled with replacement at its own size, side by side."""
    return np.concatenate([draws.resample(reps, rng) for draws in strata], axis=1)


def stratified_interval(
    strata: Sequence[Stratum],
    statistic: Statistic,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """``statistic`` of the pooled scores with a stratified-bootstrap percentile interval.

    Args:
        strata: the scores of each stratum (NaNs dropped; empty strata left out), or a
            :class:`Clustered` stratum's clusters of scores.
        statistic: maps a [reps, n] array to [reps] (or [reps, k]); e.g.
            ``lambda x: trimmed_iqm(x, axis=-1)``.
        reps: bootstrap replications.
        confidence: coverage of the interval.
        seed: seeds the resampling.

    Example:
        >>> iqm = stratified_interval([[0.1, 0.4], [0.8, 0.9, 1.0]],
        ...                           lambda x: trimmed_iqm(x, axis=-1), reps=500)
        >>> round(iqm.point, 3)
        0.7
    """
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    cleaned = _clean_strata(strata)
    point = statistic(np.concatenate([draws.values for draws in cleaned])[None, :])[0]
    samples = statistic(_resampled(cleaned, reps, np.random.default_rng(seed)))
    lower, upper = _percentiles(samples, confidence)
    as_value = (lambda v: float(v)) if np.ndim(point) == 0 else (lambda v: np.asarray(v))
    return Interval(as_value(point), as_value(lower), as_value(upper))


def _win_rate(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(x > y) over all pairs along the last axes, ties one half (Mann-Whitney U / (n m))."""
    difference = x[..., :, None] - y[..., None, :]
    return (difference > 0).mean(axis=(-2, -1)) + 0.5 * (difference == 0).mean(axis=(-2, -1))


def improvement_interval(
    x_strata: Sequence[Stratum],
    y_strata: Sequence[Stratum],
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """P(X > Y) averaged over the strata both have scores in, with its bootstrap interval.

    ``x_strata[i]`` and ``y_strata[i]`` are the two methods' scores in stratum i; a stratum
    where either has none is left out.

    Raises:
        ValueError: no stratum where both have scores.

    Example:
        >>> improvement_interval([[1.0, 2.0]], [[0.0, 1.0]], reps=100).point
        0.875
    """
    if len(x_strata) != len(y_strata):
        raise ValueError("x_strata and y_strata must list the same strata")
    pairs = []
    for x_stratum, y_stratum in zip(x_strata, y_strata):
        x_draws, y_draws = _draws(x_stratum), _draws(y_stratum)
        if len(x_draws.values) and len(y_draws.values):
            pairs.append((x_draws, y_draws))
    if not pairs:
        raise ValueError("no stratum has scores of both methods")
    point = float(np.mean([_win_rate(x.values, y.values) for x, y in pairs]))
    rng = np.random.default_rng(seed)
    samples = np.zeros(reps)
    for x_draws, y_draws in pairs:
        samples += _win_rate(x_draws.resample(reps, rng), y_draws.resample(reps, rng))
    lower, upper = _percentiles(samples / len(pairs), confidence)
    return Interval(point, float(lower), float(upper))
