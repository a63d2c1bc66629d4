"""``bench async --max-staleness``: one sync run, a local run per bound, ratios to that sync run.

The runs themselves are checked end to end by ``test_bench_async.py``; here ``_measure`` is
replaced by a recorder so the sweep's plumbing (which runs, with which overrides, which ratios)
is checked against hand-computed numbers without starting processes.
"""

from __future__ import annotations

import pytest

from sao_online import cli
from sao_online.bench import sync_vs_async as bench_async


def _fake_runs(monkeypatch) -> list[list[str]]:
    calls: list[list[str]] = []
    # Episodes per second of each run, keyed by (backend, bound).
    speeds = {("sync", 2): 10.0, ("local", 2): 20.0, ("local", 5): 25.0, ("local", 0): 12.5}

    def measure(overrides, run_dir):
        calls.append(list(overrides))
        backend = next(o.split("=")[1] for o in overrides if o.startswith("runtime.backend="))
        bound = int(next(o.split("=")[1] for o in overrides if "max_staleness=" in o))
        speed = speeds[(backend, bound)]
        return {
            "episodes": 24,
            "episodes_per_second": speed,
            "episodes_per_second_end_to_end": speed / 2,
            "learner_busy_fraction": speed / 100,
            "learner_wait_bound_fraction": 0.1 * bound,
            "max_staleness_observed": 0 if backend == "sync" else bound,
            "mean_staleness": bound / 2,
        }

    monkeypatch.setattr(bench_async, "_measure", measure)
    return calls


def test_each_further_bound_adds_one_local_run_compared_with_the_same_sync_run(monkeypatch):
    calls = _fake_runs(monkeypatch)
    result = bench_async.run_async_benchmark(quick=True, ray=False, max_staleness=[2, 5, 0, 5])
    backends = [next(o for o in call if o.startswith("runtime.backend=")) for call in calls]
    assert backends == [
        "runtime.backend=sync",
        "runtime.backend=local",
        "runtime.backend=local",
        "runtime.backend=local",
    ]  # the repeated 5 is not run twice
    for call in calls:  # each run names exactly one bound
        assert sum(option.startswith("runtime.max_staleness=") for option in call) == 1
    assert result["workload"]["max_staleness"] == result["max_staleness"] == 2
    assert result["speedup"] == 2.0
    table = {row["max_staleness"]: row for row in result["local_by_max_staleness"]}
    assert list(table) == [2, 5, 0]
    assert table[5]["speedup"] == 2.5 and table[5]["speedup_end_to_end"] == 2.5
    assert table[0]["speedup"] == 1.25 and table[0]["learner_busy_fraction"] == 0.125
    assert table[5]["max_staleness_observed"] == 5 and table[5]["mean_staleness"] == 2.5
    assert table[5]["learner_wait_bound_fraction"] == 0.5


@pytest.mark.parametrize("bounds", [[], [-1], [2, -3], ["4"]])
def test_bad_bounds_are_refused_by_name(bounds):
    with pytest.raises(ValueError, match="max_staleness must be one or more ints >= 0"):
        bench_async.run_async_benchmark(quick=True, ray=False, max_staleness=bounds)


def test_command_line_parses_the_list_and_refuses_it_elsewhere(capsys):
    parser = cli.build_parser()
    assert parser.parse_args(["bench", "async", "--max-staleness", "4,8,16"]).max_staleness == [
        4,
        8,
        16,
    ]
    for text in ("4,x", "-1", ""):
        with pytest.raises(SystemExit):
            parser.parse_args(["bench", "async", "--max-staleness", text])
        assert "expected comma-separated ints >= 0" in capsys.readouterr().err
    # Each benchmark declares its own flags: another one's is refused by argparse, by name.
    for other in (["rollout", "--max-staleness", "8"], ["async", "--peer", "trl"]):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["bench", *other])
        assert stopped.value.code == 2
        assert f"unrecognized arguments: {' '.join(other[1:])}" in capsys.readouterr().err
