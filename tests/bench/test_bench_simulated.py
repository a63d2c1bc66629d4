"""``sao-online bench simulated``: the numbers it reports are consistent with each other (speed
itself is measured by the bench on a quiet machine and kept in docs/performance/)."""

from __future__ import annotations

import pytest

from sao_online.cli import main
from sao_online.perf.simulated import TARGET_RATIO, run_simulated_benchmark


@pytest.mark.e2e
def test_the_quick_bench_reports_both_backends_and_their_ratio():
    result = run_simulated_benchmark(quick=True, repeats=1)
    sync, simulated = result["runs"]
    assert (sync["backend"], simulated["backend"]) == ("sync", "simulated")
    for run in result["runs"]:
        assert run["episodes"] == 64 and run["action_tokens"] > 0
        assert run["seconds_per_episode"] == pytest.approx(run["seconds"] / 64)
        assert run["learner_seconds"] + run["other_seconds"] == pytest.approx(run["seconds"])
    assert result["ratio_per_episode"] == pytest.approx(
        simulated["seconds_per_episode"] / sync["seconds_per_episode"]
    )
    assert result["range_per_episode"] == [pytest.approx(result["ratio_per_episode"])] * 2
    assert result["target"] == TARGET_RATIO
    assert result["meets_target"] == (result["ratio_per_episode"] <= TARGET_RATIO)


def test_repeats_below_one_are_refused(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "simulated", "--repeats", "0"])
    assert "expected an int >= 1, got '0'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="repeats must be >= 1, got 0"):
        run_simulated_benchmark(repeats=0)
