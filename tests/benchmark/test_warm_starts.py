"""Which warm starts a benchmark's tasks start from: a folder of exported ones is checked
against the tier's tasks, and a resumed task must go on from the weights it started from."""

from __future__ import annotations

import pytest

from sao_online.benchmark import plan_tier
from sao_online.benchmark.warm_starts import check_resumed_warm_starts, shared_warm_starts
from sao_online.config import ConfigError


def test_a_folder_of_warm_starts_is_used_for_the_tier_s_tasks_it_holds(tmp_path):
    plan = plan_tier("core", "smoke")
    (tmp_path / "StyleShift").mkdir()
    assert shared_warm_starts(plan, tmp_path) == ({"StyleShift": tmp_path / "StyleShift"}, [])
    (tmp_path / "StyleShft").mkdir()  # misspelt, or a task of another suite: named, not used
    assert shared_warm_starts(plan, tmp_path) == (
        {"StyleShift": tmp_path / "StyleShift"},
        ["StyleShft"],
    )
    (tmp_path / "StyleShift").rmdir()
    with pytest.raises(ConfigError) as refused:
        shared_warm_starts(plan, tmp_path)
    assert str(refused.value) == (
        f"--warm-starts: {tmp_path} holds no warm start of this tier's tasks (CodeShift, "
        "GridShift, ReasonShift, StyleShift, ToolShift); it holds: StyleShft"
    )
    with pytest.raises(ConfigError, match="is not a folder"):
        shared_warm_starts(plan, tmp_path / "missing")


def _finished(task, weights):
    return {"key": {"task": task, "method": "sao", "seed": 0}, "warm_start": weights}


def test_a_resumed_task_goes_on_only_from_the_weights_it_started_from():
    finished = [_finished("T", "a" * 16), _finished("U", "b" * 16), _finished("V", None)]
    # Same weights, not fitted yet here, a task with no finished run, an old record: fine.
    check_resumed_warm_starts({"T": "a" * 16, "U": None, "W": "c" * 16, "V": "d" * 16}, finished)
    with pytest.raises(ConfigError) as refused:
        check_resumed_warm_starts({"T": "a" * 16, "U": "c" * 16}, finished)
    assert str(refused.value).startswith(
        f"--resume: task U's finished runs started from the warm start {'b' * 16}; its next "
        f"runs would start from {'c' * 16}. "
    )
