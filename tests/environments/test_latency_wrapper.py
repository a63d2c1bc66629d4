"""LatencyWrapper: seeded long-tailed delays, really slept, recorded in info, arguments checked."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from sao_online.environments import LatencyWrapper, StyleShiftEnv, ToolShiftEnv


class SleepRecorder:
    def __init__(self):
        self.slept = []

    def __call__(self, seconds):
        self.slept.append(seconds)


def test_sampled_latency_is_slept_and_recorded_on_steps_only_by_default():
    recorder = SleepRecorder()
    env = LatencyWrapper(ToolShiftEnv(), mean=0.2, sigma=1.0, seed=0, sleep=recorder)
    _, info = env.reset(seed=0)
    assert info["latency"] == 0.0 and recorder.slept == []
    latencies = [env.step("nonsense")[4]["latency"] for _ in range(3)]
    assert recorder.slept == latencies
    assert all(latency > 0 for latency in latencies) and len(set(latencies)) == 3


@pytest.mark.parametrize(
    ("on", "reset_delayed", "step_delayed"),
    [("reset", True, False), ("both", True, True), ("step", False, True)],
)
def test_on_selects_which_calls_wait(on, reset_delayed, step_delayed):
    recorder = SleepRecorder()
    env = LatencyWrapper(StyleShiftEnv(), mean=0.1, seed=0, on=on, sleep=recorder)
    _, reset_info = env.reset(seed=0)
    *_, step_info = env.step("x")
    assert (reset_info["latency"] > 0) == reset_delayed
    assert (step_info["latency"] > 0) == step_delayed
    assert len(recorder.slept) == reset_delayed + step_delayed


def test_same_seed_same_latencies_independent_of_the_env_seed():
    def latencies(wrapper_seed, env_seed):
        env = LatencyWrapper(
            StyleShiftEnv(), mean=0.1, seed=wrapper_seed, on="reset", sleep=SleepRecorder()
        )
        return [env.reset(seed=env_seed + k)[1]["latency"] for k in range(5)]

    assert latencies(3, 0) == latencies(3, 100)
    assert latencies(3, 0) != latencies(4, 0)


def test_lognormal_moments_match_mean_and_sigma():
    env = LatencyWrapper(StyleShiftEnv(), mean=0.05, sigma=1.0, seed=0, sleep=SleepRecorder())
    draws = np.array([env.sample_latency() for _ in range(40_000)])
    assert draws.mean() == pytest.approx(0.05, rel=0.05)
    # median = mean * exp(-sigma^2 / 2); the tail past 3x the mean holds P(Z > ln 3 + 1/2) = 5.5%
    assert np.median(draws) == pytest.approx(0.05 * math.exp(-0.5), rel=0.05)
    assert (draws > 0.15).mean() == pytest.approx(0.0550, abs=0.006)


def test_sigma_zero_is_constant_and_mean_zero_never_sleeps():
    env = LatencyWrapper(StyleShiftEnv(), mean=0.02, sigma=0.0, seed=0, sleep=SleepRecorder())
    assert [env.sample_latency() for _ in range(5)] == pytest.approx([0.02] * 5)
    recorder = SleepRecorder()
    env = LatencyWrapper(StyleShiftEnv(), mean=0, seed=0, on="both", sleep=recorder)
    env.reset(seed=0)
    assert env.step("x")[4]["latency"] == 0.0 and recorder.slept == []


def test_it_really_sleeps_by_default():
    env = LatencyWrapper(StyleShiftEnv(), mean=0.03, sigma=0.0, seed=0, on="reset")
    started = time.perf_counter()
    env.reset(seed=0)
    assert time.perf_counter() - started >= 0.03


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"mean": -1.0}, "mean"),
        ({"mean": math.inf}, "mean"),
        ({"mean": "1"}, "mean"),
        ({"sigma": -0.1}, "sigma"),
        ({"sigma": math.nan}, "sigma"),
        ({"on": "close"}, "on"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_arguments_are_validated(kwargs, named):
    with pytest.raises(ValueError, match=f"^{named}:"):
        LatencyWrapper(StyleShiftEnv(), **kwargs)
