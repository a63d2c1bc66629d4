"""``bench async`` returns consistent numbers from real sync and local runs."""

from __future__ import annotations

import pytest

from sao_online.bench_async import run_async_benchmark


def test_quick_benchmark_reports_consistent_numbers():
    result = run_async_benchmark(quick=True, episodes=24)
    sync, asynchronous = result["sync"], result["async"]
    assert sync["episodes"] == asynchronous["episodes"] == 24
    assert sync["updates"] == asynchronous["updates"] == 3
    assert result["speedup"] == pytest.approx(
        asynchronous["episodes_per_second"] / sync["episodes_per_second"], rel=1e-2)
    assert sync["max_staleness_observed"] == 0
    assert 0 <= result["max_staleness_observed"] <= result["max_staleness"] == 4
    assert 0 < result["learner_busy_fraction"] <= 1.0
