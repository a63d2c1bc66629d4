"""``bench throughput`` reports consistent numbers from real sync and local runs."""

import pytest

from sao_online.commands.bench_throughput import (
    TARGET_COMPLETIONS_PER_SECOND,
    run_throughput_benchmark,
)

TINY = ["model.num_layers=2", "model.hidden_size=64", "rollout.max_action_tokens=4"]


def test_tiny_benchmark_reports_consistent_numbers():
    # Two updates of 64 completions per backend; a tiny model with 4-token completions.
    result = run_throughput_benchmark(episodes=128, overrides=TINY)
    assert result["workload"]["episodes"] == 128
    for name in ("sync", "local"):
        side = result[name]
        assert side["completions"] == 128 and side["updates"] == 2
        assert side["completions_per_second"] == pytest.approx(128 / side["seconds"], rel=1e-2)
        assert result["completions_per_second"][name] == side["completions_per_second"]
        assert result["ratio_to_target"][name] == pytest.approx(
            side["completions_per_second"] / TARGET_COMPLETIONS_PER_SECOND, abs=1e-3)
        # Steady state is the one update after the first: 64 completions over its seconds.
        assert side["steady_completions_per_second"] == pytest.approx(
            64 / side["seconds_per_update"], rel=1e-2)
        assert 0 < side["learner_seconds_per_update"] < side["seconds_per_update"]
        assert 0 < side["first_update_seconds"] < side["seconds"]
        assert 1 <= side["mean_completion_tokens"] <= 4
    assert result["sync"]["rollout_seconds_per_update"] == pytest.approx(
        result["sync"]["seconds_per_update"] - result["sync"]["learner_seconds_per_update"],
        abs=1e-3)
    assert result["sync"]["rollout_seconds_per_update"] > 0
    assert result["local"]["learner_wait_seconds_per_update"] >= 0
