"""The suite aggregates are rliable's: hand-computed values always, rliable's own numbers where
it is installed."""

from __future__ import annotations

import numpy as np
import pytest
from rliable_calls import rliable_intervals, rliable_modules

from sao_online.analysis.suite_metrics import (
    Clustered,
    improvement_interval,
    optimality_gap,
    score_distribution,
    stratified_interval,
    trimmed_iqm,
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([7.0], 7.0),
        ([1.0, 3.0], 2.0),
        ([0.0, 3.0, 30.0], 11.0),  # n < 4: nothing trimmed (the report's IQM gives 7.0)
        ([1.0, 2.0, 3.0, 4.0], 2.5),  # one from each end
        ([1.0, 2.0, 3.0, 4.0, 100.0], 3.0),  # int(1.25) = 1 from each end
        ([5.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0], (3.0 + 5.0 + 7.0 + 8.0 + 2.0) / 5),  # 1 each end
        ([float(v) for v in range(8)], (2 + 3 + 4 + 5) / 4),  # 2 from each end
        ([float(v) for v in range(9)], (2 + 3 + 4 + 5 + 6) / 5),  # int(2.25) = 2
    ],
)
def test_the_iqm_is_the_25_percent_trimmed_mean(values, expected):
    assert trimmed_iqm(values) == pytest.approx(expected)


def test_optimality_gap_and_score_distribution_by_hand():
    assert optimality_gap([0.2, 0.8, 1.4]) == pytest.approx(1 - (0.2 + 0.8 + 1.0) / 3)
    assert optimality_gap([1.0, 2.0]) == 0.0
    # strictly above tau
    assert score_distribution([0.0, 0.5, 0.5, 1.0], [-1.0, 0.0, 0.5, 1.0]).tolist() == [
        1.0,
        0.75,
        0.25,
        0.0,
    ]


def test_probability_of_improvement_is_the_mean_over_strata_of_u_over_nm():
    # stratum 1: x = (1, 3), y = (2, 2): pairs 1>2 no, 1>2 no, 3>2 yes, 3>2 yes -> 0.5
    # stratum 2: x = (5,), y = (5, 4): 5=5 tie (0.5), 5>4 (1) -> 0.75
    estimate = improvement_interval([[1.0, 3.0], [5.0]], [[2.0, 2.0], [5.0, 4.0]], reps=50)
    assert estimate.point == pytest.approx((0.5 + 0.75) / 2)
    # a stratum where one side has no score is left out
    alone = improvement_interval([[1.0, 3.0], []], [[2.0, 2.0], [5.0]], reps=50)
    assert alone.point == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no stratum"):
        improvement_interval([[1.0]], [[]])


def test_the_bootstrap_resamples_within_strata_only():
    # Each stratum is constant, so every resample pools the same multiset: a point interval.
    # An unstratified bootstrap of the same 6 values would vary.
    strata = [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    estimate = stratified_interval(strata, lambda x: x.mean(axis=-1), reps=200)
    assert estimate.point == estimate.lower == estimate.upper == pytest.approx(0.5)
    spread = stratified_interval([[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]], lambda x: x.mean(-1), reps=200)
    assert spread.lower < 0.5 < spread.upper


def test_the_interval_is_the_percentile_interval_of_the_resampled_statistic():
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.9])
    estimate = stratified_interval([values], lambda x: trimmed_iqm(x, axis=-1), reps=4000, seed=3)
    rng = np.random.default_rng(3)
    samples = values[rng.integers(0, 5, size=(4000, 5))]
    by_hand = np.percentile(trimmed_iqm(samples, axis=-1), [2.5, 97.5])
    assert (estimate.lower, estimate.upper) == pytest.approx(tuple(by_hand))
    assert estimate.point == pytest.approx((0.35 + 0.4 + 0.8) / 3)  # 0.1 and 0.9 trimmed


# --- against rliable itself ---------------------------------------------------------------


@pytest.fixture(scope="module")
def rliable():
    return rliable_modules()


def _scores(seed: int, runs: int = 7, tasks: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.4, 0.35, size=(runs, tasks))


@pytest.mark.parametrize("runs", [3, 5, 6, 7])  # pooled sizes 12, 20, 24, 28 and odd columns
def test_point_estimates_equal_rliables(rliable, runs):
    _, metrics = rliable
    for seed in range(3):
        x, y = _scores(seed, runs), _scores(seed + 10, runs + 1)
        strata_x, strata_y = list(x.T), list(y.T)  # rliable's tasks are our strata
        assert trimmed_iqm(np.concatenate(strata_x)) == pytest.approx(metrics.aggregate_iqm(x))
        assert optimality_gap(x.ravel()) == pytest.approx(metrics.aggregate_optimality_gap(x))
        assert improvement_interval(strata_x, strata_y, reps=10).point == pytest.approx(
            metrics.probability_of_improvement(x, y)
        )
    odd = _scores(5, runs=5, tasks=1)[:, 0]  # a size rliable's trim_mean trims unevenly
    assert trimmed_iqm(odd) == pytest.approx(metrics.aggregate_iqm(odd[:, None]))


def test_profiles_equal_rliables_score_distribution(rliable):
    library, _ = rliable
    x = _scores(1)
    taus = np.linspace(-0.5, 1.5, 21)
    expected = library.score_distributions(x, taus)
    assert score_distribution(x.ravel(), taus) == pytest.approx(expected)


def test_intervals_agree_with_rliables_stratified_bootstrap(rliable):
    library, metrics = rliable
    scores = _scores(2, runs=6, tasks=3)
    strata = list(scores.T)
    reps = 4000
    points, intervals = rliable_intervals(
        library,
        scores,
        lambda s: np.array([metrics.aggregate_iqm(s), metrics.aggregate_optimality_gap(s)]),
        reps,
        seed=0,
    )
    ours_iqm = stratified_interval(strata, lambda x: trimmed_iqm(x, axis=-1), reps=reps)
    ours_gap = stratified_interval(strata, lambda x: optimality_gap(x, axis=-1), reps=reps)
    lower, upper = intervals["m"]
    assert ours_iqm.point == pytest.approx(points["m"][0])
    assert ours_gap.point == pytest.approx(points["m"][1])
    # Two independent bootstraps of 4000 reps: bounds agree to Monte-Carlo error.
    assert ours_iqm.lower == pytest.approx(lower[0], abs=0.03)
    assert ours_iqm.upper == pytest.approx(upper[0], abs=0.03)
    assert ours_gap.lower == pytest.approx(lower[1], abs=0.03)
    assert ours_gap.upper == pytest.approx(upper[1], abs=0.03)


# --- runs that share a warm start -------------------------------------------------------------


def _mean(x):
    return x.mean(axis=-1)


def test_clusters_of_one_or_a_single_cluster_are_the_one_level_bootstrap():
    scores = [0.1, 0.5, 0.2, 0.9]
    plain = stratified_interval([scores], _mean, reps=300, seed=4)
    for stratum in (Clustered(([0.1, 0.5, 0.2, 0.9],)), Clustered(tuple([v] for v in scores))):
        same = stratified_interval([stratum], _mean, reps=300, seed=4)
        assert (same.point, same.lower, same.upper) == (plain.point, plain.lower, plain.upper)
    unequal = Clustered(([0.1, 0.5, 0.2], [0.9]))  # sizes differ: resampled one level
    same = stratified_interval([unequal], _mean, reps=300, seed=4)
    assert (same.lower, same.upper) == (plain.lower, plain.upper)


def test_the_bootstrap_draws_warm_starts_before_the_runs_within_them():
    # Two warm starts, three runs each, all runs of one warm start alike: a rep's mean is 0,
    # 1/2 or 1 as it draws the first warm start twice, both, or the second twice (1/4, 1/2,
    # 1/4), so the 95% interval is [0, 1]; resampling the six runs alone narrows it.
    stratum = Clustered(([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]))
    two_level = stratified_interval([stratum], _mean, reps=4000)
    assert (two_level.point, two_level.lower, two_level.upper) == (0.5, 0.0, 1.0)
    one_level = stratified_interval([[0.0] * 3 + [1.0] * 3], _mean, reps=4000)
    assert one_level.lower > 0.1 and one_level.upper < 0.9
    win = improvement_interval([stratum], [[0.5] * 6], reps=4000)
    assert (win.point, win.lower, win.upper) == (0.5, 0.0, 1.0)
