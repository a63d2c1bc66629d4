"""``bench sandbox``: the same programs on every backend, counted and checked."""

from __future__ import annotations

import json

import pytest

from sao_online.cli import main
from sao_online.environments import CodeShiftEnv
from sao_online.perf.sandbox import run_sandbox_benchmark, workload

# The sandbox modules run on one worker: the containment tests find no sao-sandbox-* folder
# in the shared temp dir only while no other sandbox runs, and fork bombs and wall-clock
# limits must not meet each other's bursts.
pytestmark = pytest.mark.xdist_group("sandbox")


def test_workload_is_six_programs_per_task_with_hand_counted_passes():
    runs = workload(num_tasks=1)
    assert len(runs) == 6 and len({program for program, *_ in runs}) == 5  # one reused, v2 kit
    env = CodeShiftEnv(sandbox="subprocess")
    env.reset(seed=0, options={"drift": {"boundary": "exclusive", "helper_version": "v1"}})
    at_or_above_high = sum(env._task.inner(t.args[0]) >= env._task.high for t in env._tests)
    env.close()
    result = run_sandbox_benchmark(backends=["subprocess"], num_tasks=1, repeats=1)
    side = result["subprocess"]
    assert side["available"] and side["executions"] == 6
    # Two correct programs pass all 6; the inclusive one passes the tests below HI; the stale
    # helper call, the syntax error and the exception pass none.
    assert side["tests_passed"] == 12 + (6 - at_or_above_high)
    assert result["executions_per_second"]["subprocess"] == side["executions_per_second"] > 0
    assert side["p50_ms"] <= side["p95_ms"]


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown 'gvisor'"):
        run_sandbox_benchmark(backends=["gvisor"])


def test_cli_prints_one_json_object_with_every_backend(capsys):
    assert main(["bench", "sandbox", "--quick"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["executions_per_second"]) == {
        "docker",
        "bubblewrap",
        "subprocess",
        "subprocess-per-run",
    }
    passed = {
        result[name]["tests_passed"]
        for name in result["executions_per_second"]
        if result[name]["available"]
    }
    assert len(passed) == 1  # every backend (and the fork server or not) agrees on every verdict
    for name in result["executions_per_second"]:
        assert result[name]["available"] or result[name]["reason"]
