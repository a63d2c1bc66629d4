"""Which warm starts a benchmark's tasks start from: a folder of exported ones is checked
against the tier's tasks, and a resumed task must go on from the weights it started from."""

from __future__ import annotations

import json

import pytest

from sao_online.benchmark import plan_tier
from sao_online.benchmark.warm_starts import check_resumed_warm_starts, shared_warm_starts
from sao_online.config import ConfigError


def test_a_folder_of_warm_starts_is_used_for_the_tier_s_tasks_it_holds(tmp_path):
    plan = plan_tier("core", "smoke")
    (tmp_path / "StyleShift").mkdir()
    styleshift = {("StyleShift", 0): tmp_path / "StyleShift"}  # (task, warm-start seed)
    assert shared_warm_starts(plan, tmp_path) == (styleshift, [])
    (tmp_path / "StyleShft").mkdir()  # misspelt, or a task of another suite: named, not used
    assert shared_warm_starts(plan, tmp_path) == (styleshift, ["StyleShft"])
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
    planned = {("T", 0): "a" * 16, ("U", 0): None, ("W", 0): "c" * 16, ("V", 0): "d" * 16}
    check_resumed_warm_starts(planned, finished)
    with pytest.raises(ConfigError) as refused:
        check_resumed_warm_starts({("T", 0): "a" * 16, ("U", 0): "c" * 16}, finished)
    assert str(refused.value).startswith(
        f"--resume: task U's finished runs started from the warm start {'b' * 16}; its next "
        f"runs would start from {'c' * 16}. "
    )


SUITE = """
suite: seeded
tasks:
  StyleShift: {config: demo}
  ToolShift: {config: tool_shift}
tiers:
  smoke:
    seeds: 2
    warm_start_seeds: [4, 7, 9]
"""


def test_a_tier_may_declare_several_warm_starts_each_run_seed_paired_with_one(tmp_path):
    (tmp_path / "suite.yaml").write_text(SUITE)
    plan = plan_tier(tmp_path / "suite.yaml", "smoke")
    assert [plan.warm_start_seed(seed) for seed in range(7)] == [4, 7, 9, 4, 7, 9, 4]
    assert plan_tier("core", "smoke").warm_start_seed(5) is None  # the config's own
    for seed in (4, 9):
        (tmp_path / "shared" / "StyleShift" / f"seed-{seed}").mkdir(parents=True)
    shared, unused = shared_warm_starts(plan, tmp_path / "shared")
    assert (
        shared
        == {
            ("StyleShift", 4): tmp_path / "shared" / "StyleShift" / "seed-4",
            ("StyleShift", 9): tmp_path / "shared" / "StyleShift" / "seed-9",
        }
        and unused == []
    )
    finished = [{"key": {"task": "T", "seed": 1, "warm_start_seed": 7}, "warm_start": "a" * 16}]
    check_resumed_warm_starts({("T", 4): "b" * 16, ("T", 7): "a" * 16}, finished)
    with pytest.raises(ConfigError, match=r"task T's finished runs \(warm-start seed 7\)"):
        check_resumed_warm_starts({("T", 4): "b" * 16, ("T", 7): "c" * 16}, finished)
    for bad in ("[1, 1]", "[-1]", "3", "[true]"):
        (tmp_path / "bad.yaml").write_text(SUITE.replace("[4, 7, 9]", bad))
        with pytest.raises(ConfigError, match=r"tiers.smoke.warm_start_seeds: expected a list"):
            plan_tier(tmp_path / "bad.yaml", "smoke")


def test_the_warm_starts_table_reads_each_exported_summary(tmp_path):
    from sao_online.benchmark.tables import TableSpecError, render_block

    def summary(folder, weights, seconds, first, last):
        folder.mkdir(parents=True)
        (folder / "warm_start.json").write_text(
            json.dumps(
                {
                    "weights": weights,
                    "steps": 400,
                    "demonstrations": 2048,
                    "seconds": seconds,
                    "loss_first": first,
                    "loss_last": last,
                    "fitted_on": {"cpu_model": "AMD EPYC"},
                }
            )
        )

    summary(tmp_path / "kept" / "GridShift" / "seed-1", "b" * 16, 148.6, 4.7514, 0.5044)
    summary(tmp_path / "kept" / "GridShift" / "seed-0", "a" * 16, 156.4, 4.7456, 0.4886)
    table = render_block("warm-starts kept", tmp_path).splitlines()
    assert table[0].startswith("| task | warm-start seed | SFT steps | demonstrations | seconds")
    assert table[2] == "| GridShift | 0 | 400 | 2048 | 156 | AMD EPYC | 4.746 | 0.489 |"
    assert table[3] == "| GridShift | 1 | 400 | 2048 | 149 | AMD EPYC | 4.751 | 0.504 |"
    (tmp_path / "empty").mkdir()
    with pytest.raises(TableSpecError, match="holds no exported warm start"):
        render_block("warm-starts empty", tmp_path)
