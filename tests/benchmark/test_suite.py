"""Suites are declared files: the built-in core suite at every tier, a user's suite with a task
from their own module, and every malformed field named."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from user_modules import coin_task

from sao_online.api import benchmark
from sao_online.benchmark import SuiteError, builtin_suites, plan_tier

FAMILIES = ["StyleShift", "ToolShift", "ReasonShift", "GridShift", "CodeShift"]


@pytest.mark.parametrize("tier", ["smoke", "lite", "async", "full"])
def test_the_core_suite_declares_the_five_families_at_every_tier(tier):
    assert "core" in builtin_suites()
    plan = plan_tier("core", tier)
    assert [task.name for task in plan.tasks] == FAMILIES
    for task in plan.tasks:
        config = task.load()
        assert config.experiment == task.name  # runs go in <out>/runs/<task>/...
        assert task.family == task.name
        if task.name == "CodeShift":
            assert config.env.kwargs["sandbox"] == "subprocess"
    full = {task.name: task.load() for task in plan_tier("core", "full").tasks}
    assert full["ToolShift"].budget.episodes == 1500  # the per-family config as it stands
    assert plan_tier("core", "full").tasks[0].cpus == 3  # StyleShift: local, 2 workers
    if tier == "smoke":
        assert plan.seeds == 1 and plan.methods == ("sao", "grpo")
        assert all(task.load().runtime.backend == "sync" for task in plan.tasks)
    if tier == "lite":  # sync runs from warm starts that lean to the first regime
        assert plan.methods == ("sao", "sao_running_mean", "grpo_dis", "grpo")
        for task in plan.tasks:
            config = task.load()
            assert config.runtime.backend == "sync"
            if task.name == "GridShift":  # its demonstrations move by the first phase's compass
                assert config.env.kwargs["demo_moves"] == ["compass"]
                continue
            weights = config.model.warm_start_phase_weights
            assert config.model.warm_start_regimes == "schedule"
            assert weights[0] == max(weights) and weights[0] > 1 / len(weights)


def _write(path, suite):
    path.write_text(json.dumps(suite))  # JSON is YAML
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tasks": {}}, "tasks: a suite needs at least one task"),
        ({"colour": 1}, "suite s.yaml: colour: unknown key"),
        ({"tasks": {"A": {"config": "missing.yaml"}}}, "tasks.A.config: no config file"),
        (
            {"tasks": {"A": {"config": "tool_shfit"}}},
            "nor a bundled config 'tool_shfit' (did you mean 'tool_shift'?); bundled configs: ",
        ),
        ({"tasks": {"A": {"config": {}, "cpus": 0}}}, "tasks.A.cpus: expected an integer >= 1"),
        ({"tasks": {"A": {"config": {}, "gpu": 1}}}, "tasks.A.gpu: unknown key"),
        ({"tasks": {"a/b": {"config": {}}}}, "'a/b' cannot name a task"),
        (
            {"tiers": {"smoke": {"tasks": {"B": {}}}}},
            "tiers.smoke.tasks.B: not a task of the suite",
        ),
        ({"tiers": {"huge": {}}}, "tiers.huge: unknown key"),
        ({"methods": ["sao", "grpoo"]}, "s.yaml: methods: unknown method 'grpoo' (did you mean"),
        (
            {"tiers": {"smoke": {"methods": ["my.mod:"]}}},
            "tiers.smoke.methods: unknown method 'my.mod:'",
        ),
        ({"tiers": {"smoke": {"seeds": -1}}}, "tiers.smoke.seeds: expected an integer >= 1"),
        ({"tiers": {"smoke": {"extends": "big"}}}, "tiers.smoke.extends: must be one of smoke"),
        (
            {"tiers": {"smoke": {"extends": "lite"}, "lite": {"extends": "smoke"}}},
            "tiers.lite.extends: a cycle (smoke -> lite -> smoke)",
        ),
        (
            {"tiers": {"smoke": {"extends": "lite"}, "lite": {"seeds": 0}}},
            "tiers.lite.seeds: expected an integer >= 1",
        ),
        ({"tiers": {"smoke": {"time_window": 0}}}, "tiers.smoke.time_window: must be in (0, "),
        (
            {"tiers": {"smoke": {"tasks": {"A": {"time_window": "1m"}}}}},
            "tiers.smoke.tasks.A.time_window: expected a number of seconds, got '1m'",
        ),
        (
            {"tiers": {"smoke": {"set": {"budget.episodes": "many"}}}},
            "task A at tier smoke: budget.episodes: expected an integer",
        ),
    ],
)
def test_a_malformed_suite_is_named_by_file_and_field(tmp_path, change, message):
    suite = {"suite": "s", "tasks": {"A": {"config": {}}}, **change}
    path = _write(tmp_path / "s.yaml", suite)
    with pytest.raises(SuiteError, match=None) as caught:
        plan_tier(path, "smoke")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_tier_that_extends_another_applies_the_others_overrides_then_its_own(tmp_path):
    suite = {
        "suite": "s",
        "methods": ["sao"],
        "tasks": {"A": {"config": {}, "set": {"budget.episodes": 10}}, "B": {"config": {}}},
        "tiers": {
            "lite": {
                "seeds": 2,
                "warm_start_seeds": [0, 1],
                "set": {"optim.lr": 0.1, "rollout.batch_size": 4},
                "tasks": {
                    "A": {
                        "set": {"budget.episodes": 20, "env.latency_mean": 0.5},
                        "methods": {"sao": {"set": {"optim.lr": 0.3}}},  # tuned at lite
                    }
                },
            },
            "async": {
                "extends": "lite",
                "time_window": 30,
                "set": {"env.latency_mean": 2.0, "runtime.backend": "simulated"},
                "tasks": {"B": {"time_window": 60, "set": {"optim.lr": 0.2}}},
            },
        },
    }
    plan = plan_tier(_write(tmp_path / "s.yaml", suite), "async")
    a, b = (task.load() for task in plan.tasks)
    assert plan.seeds == 2 and plan.methods == ("sao",)  # inherited
    assert plan.warm_start_seeds == (0, 1)
    # A: lite's tier-wide and own sets, then async's tier-wide set (its latency wins).
    assert (a.budget.episodes, a.optim.lr, a.rollout.batch_size) == (20, 0.1, 4)
    assert a.env.latency_mean == 2.0 and a.runtime.backend == "simulated"
    assert b.optim.lr == 0.2 and b.env.latency_mean == 2.0
    assert [task.time_window for task in plan.tasks] == [30.0, 60.0]
    assert [task.cpus for task in plan.tasks] == [1, 1]  # simulated workers share one process
    lite = plan_tier(tmp_path / "s.yaml", "lite")
    assert all(task.time_window is None for task in lite.tasks)
    # A method's tuned settings are its tier's own: not taken by a tier that extends it.
    assert lite.tasks[0].method_sets == {"sao": ("optim.lr=0.3",)}
    assert [task.method_sets for task in plan.tasks] == [{}, {}]


def test_the_async_tier_is_the_lite_tier_on_the_simulated_runtime_with_its_warm_starts():
    from sao_online.learning.warm_start import warm_start_path

    lite, timed = plan_tier("core", "lite"), plan_tier("core", "async")
    assert timed.methods == lite.methods and timed.seeds == lite.seeds
    for plain, task in zip(lite.tasks, timed.tasks):
        base, config = plain.load(), task.load()
        assert warm_start_path(config) == warm_start_path(base)  # fitted once for both tiers
        assert config.budget == base.budget and config.schedule == base.schedule
        assert config.runtime.backend == "simulated" and config.runtime.max_staleness == 4
        assert (config.env.latency_mean, config.env.latency_sigma) == (2.0, 1.0)
        assert config.logging.checkpoint_every == 0 and task.cpus == 1
        assert task.time_window is not None and task.time_window > 0


def test_a_task_names_a_bundled_config_unless_a_file_beside_the_suite_has_that_name(tmp_path):
    suite = {"suite": "s", "tasks": {"Tools": {"config": "tool_shift"}}, "tiers": {"full": {}}}
    plan = plan_tier(_write(tmp_path / "s.yaml", suite), "full")
    assert plan.tasks[0].load().env.id == "sao_online/ToolShift-v0"
    (tmp_path / "tool_shift").write_text(json.dumps({"env": {"id": "sao_online/GridShift-v1"}}))
    plan = plan_tier(_write(tmp_path / "s.yaml", suite), "full")
    assert plan.tasks[0].load().env.id == "sao_online/GridShift-v1"


def test_unknown_suites_and_tiers_are_refused(tmp_path):
    with pytest.raises(SuiteError, match="neither a built-in suite"):
        plan_tier("nightly", "smoke")
    with pytest.raises(SuiteError, match="--tier: must be one of smoke, lite, async, full"):
        plan_tier("core", "medium")
    suite = {"suite": "s", "tasks": {"A": {"config": {}}}, "tiers": {"smoke": {}, "full": {}}}
    path = _write(tmp_path / "s.yaml", suite)
    with pytest.raises(SuiteError, match=r"no tier lite \(the suite declares smoke, full\)"):
        plan_tier(path, "lite")  # not the task configs at full size, without a word
    bare = _write(tmp_path / "bare.yaml", {"suite": "s", "tasks": {"A": {"config": {}}}})
    with pytest.raises(SuiteError, match="no tier smoke \\(the suite declares none\\)"):
        plan_tier(bare, "smoke")


MY_TASKS = coin_task("my_coins")


@pytest.mark.e2e
def test_a_users_suite_runs_a_task_from_their_own_module(tmp_path, monkeypatch):
    (tmp_path / "my_coins.py").write_text(MY_TASKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "schedule.yaml").write_text(
        "parameters:\n  side: {kind: abrupt, values: [heads, tails], at: [0, 16]}\n"
    )
    suite = {
        "suite": "coins",
        "methods": ["sao_running_mean"],
        "tasks": {
            "Coins": {
                "config": {
                    "env": {"id": "my_coins:my_coins/CoinCall-v0"},
                    "model": {
                        "num_layers": 1,
                        "hidden_size": 32,
                        "warm_start_steps": 8,
                        "warm_start_batch_size": 8,
                    },
                    "rollout": {
                        "batch_size": 8,
                        "num_slots": 8,
                        "max_turns": 1,
                        "max_action_tokens": 6,
                        "max_episode_tokens": 64,
                    },
                    "runtime": {"backend": "sync"},
                    "logging": {"checkpoint_every": 0},
                },
                "set": {"schedule": "schedule.yaml"},  # relative to the suite file
            }
        },
        "tiers": {"smoke": {"seeds": 2, "set": {"budget.episodes": 32}}},
    }
    path = _write(tmp_path / "coins.yaml", suite)
    card = benchmark(out=tmp_path / "bench", suite=path, progress=False, parallel=1)
    runs = pd.read_csv(tmp_path / "bench" / "results" / "runs.csv")
    assert sorted(zip(runs["method"], runs["seed"])) == [
        ("frozen", 0),
        ("frozen", 1),
        ("sao_running_mean", 0),
        ("sao_running_mean", 1),
    ]
    phases = pd.read_csv(tmp_path / "bench" / "results" / "phases.csv")
    assert set(phases["phase_name"]) == {"side=heads", "side=tails"}
    assert "### Coins" in card.read_text()
    sys.modules.pop("my_coins", None)
