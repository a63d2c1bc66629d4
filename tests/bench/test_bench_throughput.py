"""``bench throughput`` reports consistent numbers from real sync and local runs."""

import pytest
from tiny_model import TINY_MODEL

from sao_online.bench.contention import run_contention_benchmark
from sao_online.bench.throughput import (
    TARGET_COMPLETIONS_PER_SECOND,
    run_throughput_benchmark,
)

TINY = [*TINY_MODEL, "rollout.max_action_tokens=4"]


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
            side["completions_per_second"] / TARGET_COMPLETIONS_PER_SECOND, abs=1e-3
        )
        # Steady state is the one update after the first: 64 completions over its seconds.
        assert side["steady_completions_per_second"] == pytest.approx(
            64 / side["seconds_per_update"], rel=1e-2
        )
        assert 0 < side["learner_seconds_per_update"] < side["seconds_per_update"]
        assert 0 < side["first_update_seconds"] < side["seconds"]
        assert 1 <= side["mean_completion_tokens"] <= 4
    assert result["sync"]["rollout_seconds_per_update"] == pytest.approx(
        result["sync"]["seconds_per_update"] - result["sync"]["learner_seconds_per_update"],
        abs=1e-3,
    )
    assert result["sync"]["rollout_seconds_per_update"] > 0
    assert result["local"]["learner_wait_seconds_per_update"] >= 0


def test_unknown_peer_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown peer 'vllm'"):
        run_throughput_benchmark(episodes=64, overrides=TINY, peer="vllm")


def test_trl_peer_runs_the_same_workload_and_reports_the_ratio():
    pytest.importorskip("trl", reason="TRL is an optional extra: pip install 'sao-online[trl]'")
    result = run_throughput_benchmark(episodes=64, overrides=TINY, peer="trl")
    peer = result["peer"]
    assert peer["trainer"].startswith("trl ") and "GRPOTrainer" in peer["trainer"]
    assert peer["completions"] == 64 and peer["updates"] == 1
    assert peer["completions_per_second"] == pytest.approx(64 / peer["seconds"], rel=1e-2)
    assert 1 <= peer["mean_completion_tokens"] <= 4  # the same 4-token completion cap
    for name in ("sync", "local"):
        assert result["ratio_to_peer"][name] == pytest.approx(
            result[name]["completions_per_second"] / peer["completions_per_second"], abs=1e-3
        )


def test_contention_benchmark_keeps_the_busy_core_free_and_reports_the_share():
    result = run_contention_benchmark(episodes=64, overrides=TINY)
    quiet, contended = result["quiet"], result["contended"]
    assert quiet["completions"] == contended["completions"] == 64
    assert result["kept_share"] == pytest.approx(
        contended["completions_per_second"] / quiet["completions_per_second"], abs=1e-3
    )
    # The busy loop's core is seen and left alone.
    assert 1 <= contended["threads"] <= max(1, result["workload"]["usable_cores"] - 1)
    assert result["target_kept_share"] == 0.4
