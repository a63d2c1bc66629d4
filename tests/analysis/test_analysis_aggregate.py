"""IQM hand values, stratified-bootstrap coverage and the probability of improvement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sao_online.analysis import (
    aggregate_recovery,
    interquartile_mean,
    probability_of_improvement,
    stratified_bootstrap_ci,
)
from sao_online.analysis.aggregate import iqm_weights, nan_interquartile_mean


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([5.0], 5.0),
        ([1.0, 9.0], 5.0),  # n = 2: the mean
        ([0.0, 3.0, 30.0], 7.0),  # weights 1/6, 2/3, 1/6
        ([4.0, 1.0, 3.0, 2.0], 2.5),  # middle two of four
        ([0.0, 10.0, 20.0, 30.0, 1000.0], 20.0),  # weights 0, .3, .4, .3, 0
        (list(range(1, 9)), 4.5),  # n = 8: mean of 3, 4, 5, 6 (the trimmed mean)
        ([1.0, np.nan, 3.0], 2.0),  # NaNs ignored
    ],
)
def test_interquartile_mean_hand_values(values, expected):
    assert interquartile_mean(values) == pytest.approx(expected)


def test_interquartile_mean_of_nothing_is_nan():
    assert np.isnan(interquartile_mean([]))
    assert np.isnan(interquartile_mean([np.nan]))


def test_weights_sum_to_one_and_are_symmetric():
    for count in range(1, 13):
        weights = iqm_weights(count)
        assert weights.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(weights, weights[::-1])


def test_nan_aware_iqm_matches_the_scalar_one_row_by_row():
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(50, 7))
    matrix[rng.random(matrix.shape) < 0.3] = np.nan
    expected = [interquartile_mean(row) for row in matrix]
    np.testing.assert_allclose(nan_interquartile_mean(matrix, axis=1), expected, equal_nan=True)


@pytest.mark.parametrize(("confidence", "band"), [(0.95, (0.90, 0.99)), (0.8, (0.71, 0.89))])
def test_bootstrap_intervals_cover_the_true_centre_at_the_stated_rate(confidence, band):
    # 200 simulated experiments of 20 seeds each; for a normal distribution the population
    # IQM equals the mean, 2.0.
    experiments, seeds = 200, 20
    rng = np.random.default_rng(12345)
    frame = pd.DataFrame(
        {
            "experiment": np.repeat(np.arange(experiments), seeds),
            "seed": np.tile(np.arange(seeds), experiments),
            "score": rng.normal(2.0, 1.0, experiments * seeds),
        }
    )
    intervals = stratified_bootstrap_ci(
        frame, "score", by=["experiment"], reps=1000, confidence=confidence, seed=0
    )
    covered = ((intervals["lower"] <= 2.0) & (intervals["upper"] >= 2.0)).mean()
    assert band[0] <= covered <= band[1]
    assert (intervals["n_seeds"] == seeds).all()


def test_strata_are_resampled_separately():
    # every stratum is constant: a stratified resample always holds three 0s and three 10s, so
    # the interval collapses; pooling without strata would not
    frame = pd.DataFrame(
        {"method": "a", "stratum": [0, 0, 0, 1, 1, 1], "score": [0.0, 0.0, 0.0, 10.0, 10.0, 10.0]}
    )
    stratified = stratified_bootstrap_ci(frame, "score", strata=["stratum"], reps=300).iloc[0]
    assert stratified["iqm"] == pytest.approx(5.0)
    assert stratified["lower"] == pytest.approx(5.0) and stratified["upper"] == pytest.approx(5.0)
    pooled = stratified_bootstrap_ci(frame, "score", reps=300).iloc[0]
    assert pooled["upper"] - pooled["lower"] > 1.0


def test_one_seed_collapses_the_interval_and_censoring_is_counted():
    frame = pd.DataFrame(
        {
            "method": ["a", "b", "b", "b", "b"],
            "seed": [0, 0, 1, 2, 3],
            "time_to_recovery": [7.0, 1.0, 2.0, 3.0, 40.0],
            "censored": [False, False, False, False, True],
        }
    )
    table = stratified_bootstrap_ci(frame, "time_to_recovery", reps=200, censored="censored")
    single = table[table["method"] == "a"].iloc[0]
    assert single["iqm"] == single["lower"] == single["upper"] == 7.0
    assert single["n_seeds"] == 1 and single["censored_fraction"] == 0.0
    several = table[table["method"] == "b"].iloc[0]
    assert several["iqm"] == pytest.approx(2.5)
    assert several["censored_fraction"] == pytest.approx(0.25)
    assert several["lower"] <= several["iqm"] <= several["upper"]


def test_groups_without_values_get_nan():
    frame = pd.DataFrame({"method": ["a", "b"], "score": [1.0, np.nan]})
    table = stratified_bootstrap_ci(frame, "score", reps=10).set_index("method")
    assert table.loc["b", "n_values"] == 0 and np.isnan(table.loc["b", "iqm"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metric": "nope"}, "metric 'nope'"),
        ({"metric": "score", "by": ["group"]}, "group"),
        ({"metric": "score", "confidence": 1.5}, "confidence"),
        ({"metric": "score", "reps": 0}, "reps"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    frame = pd.DataFrame({"method": ["a"], "score": [1.0]})
    with pytest.raises(ValueError, match=message):
        stratified_bootstrap_ci(frame, **kwargs)


def two_methods(x_values, y_values, stratum=0):
    return pd.DataFrame(
        {
            "method": ["x"] * len(x_values) + ["y"] * len(y_values),
            "change_point": stratum,
            "score": [*x_values, *y_values],
        }
    )


@pytest.mark.parametrize(
    ("x_values", "y_values", "expected"),
    [
        ([1.0, 2.0], [1.5], 0.5),
        ([1.0, 2.0, 3.0], [2.0], 0.5),  # loss, tie (1/2), win
        ([3.0, 4.0], [1.0, 3.0], 0.875),  # 3 wins and a tie out of 4 pairs
    ],
)
def test_probability_of_improvement_hand_values(x_values, y_values, expected):
    estimate = probability_of_improvement(
        two_methods(x_values, y_values), "score", "x", "y", reps=100
    )
    assert estimate.probability == pytest.approx(expected)


def test_domination_gives_one_and_the_reverse_zero():
    frame = two_methods([5.0, 6.0, 7.0], [1.0, 2.0, 3.0])
    better = probability_of_improvement(frame, "score", "x", "y", reps=300)
    assert (better.probability, better.lower, better.upper) == (1.0, 1.0, 1.0)
    # for a cost the same numbers mean x is worse
    cost = probability_of_improvement(frame, "score", "x", "y", lower_is_better=True, reps=300)
    assert (cost.probability, cost.lower, cost.upper) == (0.0, 0.0, 0.0)


def test_identical_distributions_give_one_half():
    # 50 strata of 10 runs per method from one distribution: the average over strata has a
    # standard deviation of about 0.019 around 0.5
    rng = np.random.default_rng(7)
    same = pd.concat(
        [
            two_methods(rng.normal(size=10), rng.normal(size=10), stratum=stratum)
            for stratum in range(50)
        ]
    )
    estimate = probability_of_improvement(same, "score", "x", "y", reps=500)
    assert 0.44 < estimate.probability < 0.56
    assert estimate.lower < 0.5 < estimate.upper
    assert estimate.n_strata == 50
    mirror = probability_of_improvement(
        two_methods([1.0, 2.0], [1.0, 2.0]), "score", "x", "y", reps=10
    )
    assert mirror.probability == 0.5


def test_strata_are_averaged_and_one_sided_strata_skipped():
    frame = pd.concat(
        [
            two_methods([2.0], [1.0], stratum=1),
            two_methods([1.0], [2.0], stratum=2),
            two_methods([9.0], [], stratum=3),
        ]
    )
    estimate = probability_of_improvement(frame, "score", "x", "y", reps=50)
    assert estimate.probability == pytest.approx(0.5)
    assert estimate.n_strata == 2


def test_unknown_method_is_named():
    with pytest.raises(ValueError, match="method 'z'"):
        probability_of_improvement(two_methods([1.0], [2.0]), "score", "x", "z")


def test_aggregate_recovery_long_table():
    per_seed = pd.DataFrame(
        {
            "experiment": "toy",
            "method": ["a", "a", "b", "b"],
            "seed": [0, 1, 0, 1],
            "change_point": 1,
            "phase_before": "p0",
            "phase_after": "p1",
            "tau_clock": 20.0,
            "time_to_recovery": [10.0, 20.0, 30.0, 50.0],
            "censored": [False, True, False, False],
            "drop": [0.5, 0.5, 0.7, 0.9],
            "forgetting": np.nan,
        }
    )
    table = aggregate_recovery(per_seed, reps=100)
    assert set(table["metric"]) == {"time_to_recovery", "drop"}  # forgetting is all NaN
    ttr = table[table["metric"] == "time_to_recovery"].set_index("method")
    assert ttr.loc["a", "iqm"] == pytest.approx(15.0)
    assert ttr.loc["a", "censored_fraction"] == pytest.approx(0.5)
    assert table.loc[table["metric"] == "drop", "censored_fraction"].isna().all()
    assert {"phase_after", "lower", "upper", "n_seeds", "lower_is_better"} <= set(table.columns)
