"""The benchmark's time axis and what runs exercised, against hand-computed values."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from sao_online.benchmark.exercised import exercised
from sao_online.benchmark.protocol import ProtocolMismatch, check_same_protocol
from sao_online.benchmark.time_scores import time_score_settings, time_shift_rows, window_scores


def one_run(rewards_after: list[float]) -> pd.DataFrame:
    """20 episodes, the shift at the 11th (world_time 10); the learner took episode i at second
    2i; reward 1 before the shift, ``rewards_after`` after it; oracle 1 throughout."""
    rewards = [1.0] * 10 + rewards_after
    return pd.DataFrame(
        {
            "experiment": "T",
            "method": "m",
            "seed": 0,
            "episode": range(20),
            "world_time": np.arange(20, dtype=float),
            "wall_time": 2.0 * np.arange(20),
            "phase": [0] * 10 + [1] * 10,
            "reward": rewards,
            "oracle_reward": 1.0,
            "dropped": False,
        }
    )


def test_the_time_to_half_oracle_and_the_window_are_read_in_seconds():
    episodes = one_run([0, 0, 0, 1, 1, 1, 1, 1, 1, 1])
    # W = 10 s: the trailing mean spans 2 s (one episode), defined from 1 s after the shift at
    # 20 s (the first episode of phase 1 taken). It reads 0 at 22 and 24 s, 1 at 26 s: 6 s.
    # The window [20, 30) holds the episodes taken at 20..28 s: rewards 0, 0, 0, 1, 1.
    [row] = time_shift_rows(episodes, 10.0, 0.5).values()
    assert row["seconds_tau"] == 20.0
    assert row["seconds_to_half_oracle"] == 6.0 and not row["seconds_censored"]
    assert row["seconds_available"] == 18.0  # to the last episode, at 38 s
    assert row["window_reward_mean"] == pytest.approx(0.4) and row["window_episodes"] == 5
    assert not row["window_cut"]
    # A window past the phase's end is cut to the phase: all 10 episodes, mean 0.7.
    [cut] = time_shift_rows(episodes, 30.0, 0.5).values()
    assert cut["window_reward_mean"] == pytest.approx(0.7) and cut["window_episodes"] == 10
    assert cut["window_cut"]


def test_a_run_that_never_reaches_half_the_oracle_is_censored_at_the_phases_end():
    [row] = time_shift_rows(one_run([0.0] * 10), 10.0, 0.5).values()
    assert row["seconds_censored"] and row["seconds_to_half_oracle"] == 18.0
    assert row["window_reward_mean"] == 0.0


def test_the_window_score_uses_the_phases_floor_and_oracle():
    scores = pd.DataFrame(
        {
            "task": ["T", "T", "U"],
            "method": ["m", "m", "m"],
            "seed": [0, 0, 0],
            "phase": [0, 1, 1],
            "family": ["F", "F", "G"],
            "floor": [0.5, 0.2, 0.9],
            "oracle": [1.0, 1.0, 0.92],
            "gap": [0.5, 0.8, 0.02],
            "score": [0.0, 0.3, np.nan],  # U's phase 1: oracle - floor under the minimum gap
        }
    )
    shifts = pd.DataFrame(
        {
            "task": ["T", "U"],
            "method": ["m", "m"],
            "seed": [0, 0],
            "shift": [1, 1],
            "window_reward_mean": [0.4, 0.91],
        }
    )
    timed = window_scores(scores, shifts).set_index("task")
    assert timed.loc["T", "score"] == pytest.approx((0.4 - 0.2) / 0.8)
    assert np.isnan(timed.loc["U", "score"]) and timed.loc["T", "family"] == "F"
    # Results kept before the time axis existed have no window: no rows.
    assert window_scores(scores, shifts.drop(columns="window_reward_mean")).empty


def test_what_a_run_exercised_weighs_updates_by_their_tokens():
    episodes = pd.DataFrame(
        {"staleness": [0, 1, 3, 4, -1, 2], "dropped": [False, False, False, False, False, True]}
    )
    updates = pd.DataFrame(
        {
            "charts/truncated_fraction": [0.5, 0.0, np.nan],  # a critic-only step logs none
            "charts/effective_sample_size": [0.8, 0.6, np.nan],
            "charts/num_action_tokens": [10.0, 30.0, np.nan],
        }
    )
    row = exercised(episodes, updates)
    # Trained, not dropped: staleness 0, 1, 3, 4.
    assert row["staleness_mean"] == 2.0 and row["staleness_max"] == 4
    assert row["stale_share"] == 0.75
    assert row["truncated_fraction"] == pytest.approx((0.5 * 10 + 0.0 * 30) / 40)
    assert row["effective_sample_size"] == pytest.approx(0.7)  # a plain mean of ratios
    assert row["masked_fraction"] is None and row["clip_fraction"] is None  # never logged
    nothing = exercised(pd.DataFrame({"staleness": [-1]}), None)
    assert set(nothing.values()) == {None}


def test_tasks_scored_on_another_time_window_are_not_pooled():
    task = {"family": "F", "config": {}, "config_hash": "h", "cpus": 1}
    protocol = {
        "format": 1,
        "tier": "async",
        "score": {},
        "tasks": {"T": {**task, "time_score": time_score_settings(50)}},
        "methods": {},
    }
    assert check_same_protocol(protocol, copy.deepcopy(protocol), "a", "b") == protocol
    other = copy.deepcopy(protocol)
    other["tasks"]["T"]["time_score"] = time_score_settings(60)
    with pytest.raises(ProtocolMismatch, match=r"task T: .*time_score.window: 50.0 vs 60.0"):
        check_same_protocol(protocol, other, "a", "b")
    untimed = copy.deepcopy(protocol)
    del untimed["tasks"]["T"]["time_score"]
    with pytest.raises(ProtocolMismatch, match="time_score.window: 50.0 vs '.absent.'"):
        check_same_protocol(protocol, untimed, "a", "b")
