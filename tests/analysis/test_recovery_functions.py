"""The per-shift recovery computations as pure functions, against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sao_online.analysis.recovery import first_crossing, shift_metrics


def test_first_crossing_takes_the_earliest_time_whatever_the_row_order():
    times = np.array([4.0, 1.0, 3.0, 2.0])
    curve = np.array([0.9, 0.1, 0.85, np.nan])  # t=2 undefined, t=3 is the first >= 0.8
    assert first_crossing(times, curve, 0.8, 10.0) == (3.0, True, False)


def test_first_crossing_censors_at_the_time_available_and_is_undefined_without_a_curve():
    assert first_crossing(np.array([1.0, 2.0]), np.array([0.1, 0.2]), 0.8, 7.5) == (
        7.5,
        False,
        True,
    )
    value, reached, censored = first_crossing(np.array([1.0]), np.array([np.nan]), 0.8, 7.5)
    assert math.isnan(value) and not reached and not censored


def test_first_crossing_counts_a_level_equal_to_the_threshold_up_to_rounding():
    assert first_crossing(np.array([1.0]), np.array([0.3 * 3 / 3]), 0.1 * 3, 5.0)[1]


def _run():
    # Ten episodes at x = 0..9, shift at tau = 5; oracle ceiling 1 before, 0.5 after.
    xs = np.arange(10, dtype=float)
    rewards = np.array([0.8, 0.6, 1.0, 0.8, 0.6, 0.0, 0.0, 0.2, 0.4, 0.5])
    oracle = np.array([1.0] * 5 + [0.5] * 5)
    # A stand-in smoothed curve (the function takes it as given): NaN during warm-up.
    smoothed = np.array([np.nan, 0.7, 0.8, 0.8, 0.75, np.nan, 0.0, 0.1, 0.3, 0.45])
    return xs, rewards, oracle, smoothed


def test_shift_metrics_by_hand():
    xs, rewards, oracle, smoothed = _run()
    phase = xs >= 5
    pre = (xs >= 2) & (xs < 5)  # window 3
    metrics = shift_metrics(
        xs,
        rewards,
        oracle,
        smoothed,
        phase=phase,
        pre=pre,
        tau=5.0,
        time_available=5.0,
        horizon=2.0,
        rho=0.5,
        min_pre_level=0.05,
        oracle_fraction=0.8,
    )
    # pre_level = mean(1.0, 0.8, 0.6) = 0.8; min smoothed in phase = 0.0 -> drop 0.8.
    assert metrics["pre_level"] == pytest.approx(0.8) and metrics["pre_episodes"] == 3
    assert metrics["drop"] == pytest.approx(0.8) and metrics["relative_drop"] == pytest.approx(1)
    # rho * pre_level = 0.4: smoothed reaches 0.45 at x = 9 -> 4 after the shift.
    assert (metrics["time_to_recovery"], metrics["recovered"], metrics["censored"]) == (
        4.0,
        True,
        False,
    )
    # 0.8 x mean oracle ceiling of the phase (0.5) = 0.4: the same crossing, 4.
    assert metrics["time_to_oracle_fraction"] == 4.0
    assert not metrics["oracle_fraction_censored"]
    # Horizon 2: episodes at x = 5, 6 -> mean reward 0 -> AUC 0 / 0.8 = 0.
    assert metrics["recovery_auc"] == 0.0 and metrics["auc_horizon"] == 2.0
    # Regret: sum(0.5 - r) over the phase = 2.5 - 1.1 = 1.4; per episode 0.28.
    assert metrics["dynamic_regret"] == pytest.approx(1.4)
    assert metrics["dynamic_regret_per_episode"] == pytest.approx(0.28)
    assert metrics["phase_episodes"] == 5 and metrics["note"] == ""


def test_shift_metrics_absolute_level_is_censored_where_the_relative_one_is_not():
    # A low plateau recovers relative to itself (0.5 x 0.8 = 0.4 reached) but never gets to
    # 0.95 x the ceiling: the absolute measure is censored at the time available.
    xs, rewards, oracle, smoothed = _run()
    metrics = shift_metrics(
        xs,
        rewards,
        oracle,
        smoothed,
        phase=xs >= 5,
        pre=(xs >= 2) & (xs < 5),
        tau=5.0,
        time_available=5.0,
        horizon=2.0,
        rho=0.5,
        min_pre_level=0.05,
        oracle_fraction=0.95,
    )
    assert metrics["recovered"] and metrics["time_to_recovery"] == 4.0
    assert metrics["time_to_oracle_fraction"] == 5.0 and metrics["oracle_fraction_censored"]


def test_shift_metrics_with_nothing_learned_before_the_shift():
    xs, rewards, oracle, smoothed = _run()
    rewards = rewards.copy()
    rewards[:5] = 0.0
    metrics = shift_metrics(
        xs,
        rewards,
        oracle,
        smoothed,
        phase=xs >= 5,
        pre=xs < 5,
        tau=5.0,
        time_available=5.0,
        horizon=2.0,
        rho=0.9,
        min_pre_level=0.05,
        oracle_fraction=0.8,
    )
    assert math.isnan(metrics["time_to_recovery"]) and math.isnan(metrics["recovery_auc"])
    assert not metrics["recovered"] and not metrics["censored"]
    assert "nothing learned" in metrics["note"]
    assert metrics["time_to_oracle_fraction"] == 4.0  # the absolute measure is still defined
