"""``bench rollout``: both sides counted alike, and a roofline that adds up."""

import pytest

from sao_online.perf.rollout import measure_read_bandwidth, run_rollout_benchmark


def test_quick_benchmark_counts_the_same_tokens_and_a_consistent_roofline():
    result = run_rollout_benchmark(quick=True)
    sides = ("engine", "engine_single_buffer", "engine_hf_forward", "generate")
    # Same seed, same workload: every engine side samples the same answers.
    assert len({result[side]["tokens"] for side in sides[:3]}) == 1
    assert result["speedup"] == pytest.approx(
        result["engine"]["tokens_per_second"] / result["generate"]["tokens_per_second"]
    )
    assert result["banded_cache_speedup"] == pytest.approx(
        result["engine"]["tokens_per_second"] / result["engine_single_buffer"]["tokens_per_second"]
    )
    roofline = result["roofline"]
    bandwidth = roofline["read_bandwidth_bytes_per_second"]
    # 4 heads x 32 dims x keys and values x 4 bytes per column and layer, 4 layers.
    column_bytes = 4 * 32 * 2 * 4 * 4
    for side in ("engine", "engine_single_buffer"):
        read = roofline[side]
        assert read["kv_bytes_read"] == result[side]["kv_columns_read"] * column_bytes
        assert read["kv_read_floor_seconds"] == pytest.approx(
            read["kv_bytes_read"] / bandwidth, abs=1e-4
        )
        assert read["weight_read_floor_seconds"] == pytest.approx(
            result[side]["model_forwards"] * roofline["weight_bytes_per_forward"] / bandwidth,
            abs=1e-4,
        )
    # Bands read at most what one buffer read up to the longest row reads.
    assert roofline["engine"]["kv_bytes_read"] <= roofline["engine_single_buffer"]["kv_bytes_read"]
    assert roofline["weight_bytes_per_forward"] == result["workload"]["parameters"] * 4
    assert "fixed_length" not in result


def test_read_bandwidth_is_a_plausible_number():
    assert 1e8 < measure_read_bandwidth(megabytes=64, repeats=1) < 1e12
