"""``bench async --max-staleness``: one sync run, a local run per bound, ratios to that sync run.

The runs themselves are checked end to end by ``test_bench_async.py``; here ``_measure`` is
replaced by a recorder so the sweep's plumbing (which runs, with which overrides, which ratios)
is checked against hand-computed numbers without starting processes.
"""

from __future__ import annotations

import pytest

from sao_online import cli
from sao_online.perf import sync_vs_async as bench_async


def _fake_runs(monkeypatch) -> list[list[str]]:
    calls: list[list[str]] = []
    # Episodes per second of each run, keyed by (backend, bound, stragglers, staleness_from).
    speeds = {
        ("sync", 2, "wait", "tokens"): 10.0,
        ("local", 2, "wait", "tokens"): 20.0,
        ("local", 2, "wait", "admission"): 16.0,
        ("local", 2, "requeue", "tokens"): 30.0,
        ("local", 5, "wait", "tokens"): 25.0,
        ("local", 0, "wait", "tokens"): 12.5,
    }

    def measure(overrides, run_dir):
        calls.append(list(overrides))

        def option(name, default):
            return next((o.split("=")[1] for o in overrides if o.startswith(name + "=")), default)

        backend = option("runtime.backend", None)
        bound = int(option("runtime.max_staleness", None))
        stragglers = option("runtime.stragglers", "wait")
        speed = speeds[(backend, bound, stragglers, option("runtime.staleness_from", "tokens"))]
        requeued = 3 if stragglers == "requeue" else 0
        return {
            "episodes": 24,
            "episodes_per_second": speed,
            "episodes_per_second_end_to_end": speed / 2,
            "learner_busy_fraction": speed / 100,
            "learner_seconds_per_update": 10 / speed,
            "learner_wait_bound_fraction": 0.1 * bound,
            "learner_wait_episodes_fraction": 0.05,
            "max_token_staleness": 0 if backend == "sync" else bound,
            "mean_staleness": bound / 2,
            "requeued_stale": requeued,
            "dropped_episodes": requeued,
            "wasted_action_tokens": 100 * requeued,
            "wasted_action_token_share": 0.01 * requeued,
            "wasted_env_seconds": 0.5 * requeued,
            "episodes_started_after_admission": 0,
            "load_average_1min": [float(bound), 2.0],
        }

    monkeypatch.setattr(bench_async, "_measure", measure)
    return calls


def test_each_further_bound_adds_one_local_run_compared_with_the_same_sync_run(monkeypatch):
    calls = _fake_runs(monkeypatch)
    result = bench_async.run_async_benchmark(
        quick=True, ray=False, max_staleness=[2, 5, 0, 5], straggler_options=[]
    )
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
    assert table[5]["max_token_staleness"] == 5 and table[5]["mean_staleness"] == 2.5
    assert table[5]["learner_wait_bound_fraction"] == 0.5
    assert table[5]["learner_seconds_per_update"] == 0.4
    assert table[5]["load_average_1min"] == [5.0, 2.0]


def test_each_straggler_option_is_one_local_run_at_the_workloads_bound(monkeypatch):
    calls = _fake_runs(monkeypatch)
    result = bench_async.run_async_benchmark(quick=True, ray=False, max_staleness=[2])
    # sync, then the config's default (wait, tokens) as the async run, then the other two.
    assert len(calls) == 4
    for call in calls[2:]:
        assert "runtime.backend=local" in call and "runtime.max_staleness=2" in call
    assert {option for call in calls[2:] for option in call if "stragglers=" in option} == {
        "runtime.stragglers=wait",
        "runtime.stragglers=requeue",
    }
    rows = {
        (row["stragglers"], row["staleness_from"]): row for row in result["by_straggler_option"]
    }
    assert list(rows) == [("wait", "tokens"), ("wait", "admission"), ("requeue", "tokens")]
    assert rows["wait", "admission"]["speedup"] == 1.6
    requeue = rows["requeue", "tokens"]
    assert requeue["speedup"] == 3.0 and requeue["speedup_end_to_end"] == 3.0
    assert requeue["learner_busy_fraction"] == 0.3 and requeue["requeued_stale"] == 3
    assert requeue["wasted_action_tokens"] == 300 and requeue["wasted_action_token_share"] == 0.03
    assert requeue["learner_seconds_per_update"] == pytest.approx(1 / 3)
    assert result["learner_busy_fraction"] == rows["wait", "tokens"]["learner_busy_fraction"]
    assert result["max_token_staleness"] == 2


@pytest.mark.parametrize("bounds", [[], [-1], [2, -3], ["4"]])
def test_bad_bounds_are_refused_by_name(bounds):
    with pytest.raises(ValueError, match="max_staleness must be one or more ints >= 0"):
        bench_async.run_async_benchmark(quick=True, ray=False, max_staleness=bounds)


def test_unknown_straggler_options_are_refused_by_name():
    with pytest.raises(ValueError, match="straggler option .*'drop'"):
        bench_async.run_async_benchmark(quick=True, ray=False, straggler_options=[("drop", "x")])


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
