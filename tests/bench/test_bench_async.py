"""``bench async`` returns consistent numbers from real sync, local and Ray runs."""

from __future__ import annotations

import pytest

from sao_online.perf.sync_vs_async import run_async_benchmark

pytestmark = pytest.mark.e2e


def test_quick_benchmark_reports_consistent_numbers():
    # Two batches of 8: the steady window (first update to last) holds one batch. Each side's
    # time is mostly start-up (worker processes, Ray) and the env's simulated latency.
    result = run_async_benchmark(quick=True, episodes=16, straggler_options=[("requeue", "tokens")])
    sync, asynchronous, on_ray = result["sync"], result["async"], result["ray"]
    assert sync["episodes"] == asynchronous["episodes"] == on_ray["episodes"] == 16
    assert sync["updates"] == asynchronous["updates"] == on_ray["updates"] == 2
    assert result["speedup_ray"] == pytest.approx(
        on_ray["episodes_per_second"] / sync["episodes_per_second"], rel=1e-2
    )
    assert 0 < result["learner_busy_fraction_ray"] <= 1.0
    assert on_ray["max_token_staleness"] <= result["max_token_staleness"] <= 4
    assert result["speedup"] == pytest.approx(
        asynchronous["episodes_per_second"] / sync["episodes_per_second"], rel=1e-2
    )
    assert sync["max_token_staleness"] == 0
    assert 0 <= result["max_token_staleness"] <= result["max_staleness"] == 4
    assert 0 < result["learner_busy_fraction"] <= 1.0
    for side in (asynchronous, on_ray):
        # Busy, held back by the bound, waiting for episodes: shares of one window (the rest is
        # publishing weights and logging).
        shares = [
            side[f"learner_{part}_fraction"] for part in ("busy", "wait_bound", "wait_episodes")
        ]
        assert min(shares) >= 0 and sum(shares) <= 1.02
        # The learner's seconds over the updates after the first (one here).
        per_update = side["learner_seconds_per_update"]
        assert per_update == pytest.approx(side["learner_seconds"], rel=1e-2)
    assert "learner_wait_bound_fraction" not in sync
    # The config's default way with stragglers (the async run) and requeue, side by side.
    default, requeue = result["by_straggler_option"]
    assert (default["stragglers"], default["staleness_from"]) == ("wait", "tokens")
    assert default["learner_busy_fraction"] == asynchronous["learner_busy_fraction"]
    assert (requeue["stragglers"], requeue["staleness_from"]) == ("requeue", "tokens")
    assert default["requeued_stale"] == default["wasted_action_tokens"] == 0
    for option in (default, requeue):
        assert option["requeued_stale"] == option["dropped_episodes"]  # no worker died
        assert 0 <= option["wasted_action_token_share"] < 1
        assert option["wasted_env_seconds"] >= 0
        assert 0 <= option["max_token_staleness"] <= 4
        assert len(option["load_average_1min"]) == 2
    for side in (sync, asynchronous, on_ray):
        # Steady state: the episodes after the first update (1 batch of 8) over its seconds.
        # Both are rounded (seconds to 1 ms, the rate to 1e-3): the rate lies within what the
        # seconds' rounding allows.
        window = side["steady_seconds"]
        low, high = 8 / (window + 5e-4), 8 / max(window - 5e-4, 1e-9)
        assert low - 5e-4 <= side["episodes_per_second"] <= high + 5e-4
        assert 0 < side["first_update_seconds"] < side["seconds"]
        assert side["mean_env_seconds_per_episode"] >= 0
