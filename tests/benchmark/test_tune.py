"""``benchmark tune``'s pieces without runs: the grid and seeds it accepts, the rule and the
sensitivity checked against hand-computed values, the tuned suite's per-method settings and
the scorecard section that shows them."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml
from benchmark_synthetic import protocol, record, write_results

from sao_online.analysis.report_render import to_markdown
from sao_online.benchmark import plan_tier
from sao_online.benchmark.protocol import (
    ProtocolMismatch,
    check_same_protocol,
    method_labels,
    protocol_of,
)
from sao_online.benchmark.runner import run_benchmark
from sao_online.benchmark.tune import rule_values, write_suite
from sao_online.benchmark.tuning_plan import parse_grid, parse_seed_ranges, tuning_plan
from sao_online.benchmark.tuning_tables import choose, tuning_blocks
from sao_online.config import ConfigError

GRID = {"optim.lr": [1.0e-4, 1.0e-3], "regularizers.kl_coef": [0.0, 0.3]}


def _suite(tmp_path, tier: dict | None = None, name: str = "s.yaml"):
    suite = {
        "suite": "s",
        "methods": ["sao"],
        "tasks": {"Tools": {"config": "tool_shift"}, "Grid": {"config": "grid_shift"}},
        "tiers": {"smoke": {"seeds": 3, **(tier or {})}},
    }
    path = tmp_path / name
    path.write_text(json.dumps(suite))  # JSON is YAML
    return path


def test_grid_options_read_yaml_values_and_name_what_is_wrong():
    assert parse_grid(["optim.lr=1e-4,1.0e-3", "regularizers.kl_coef=0,0.3"]) == {
        "optim.lr": ["1e-4", 1e-3],  # YAML 1.1 reads 1e-4 as a string...
        "regularizers.kl_coef": [0, 0.3],
    }
    with pytest.raises(ConfigError, match=r"^--grid: expected FIELD=V1,V2,\.\.\., got 'optim.lr'$"):
        parse_grid(["optim.lr"])
    with pytest.raises(ConfigError, match="^--grid: optim.lr given twice$"):
        parse_grid(["optim.lr=1,2", "optim.lr=3,4"])
    assert parse_seed_ranges("0-2,7") == [0, 1, 2, 7]
    with pytest.raises(ConfigError, match="--eval-seeds: expected N or N-M with N <= M"):
        parse_seed_ranges("5-3")


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"optim.lr": [1e-4, 1e-3]}, "--grid: 2 grid points; a tuning needs 4 or more"),
        (
            {"model.hidden_size": [32, 64], "optim.lr": [1e-4, 1e-3]},
            "'model.hidden_size': a grid sets how a method learns, a field of algorithm, optim, "
            "regularizers",
        ),
        (
            {"algorithm.name": ["sao", "grpo"], "optim.lr": [1e-4, 1e-3]},
            "algorithm.name picks the method",
        ),
        ({"optim.lr": [1e-4, 1e-4, 1e-3, 1e-2]}, "a value is listed twice"),
    ],
)
def test_a_grid_of_fewer_than_four_points_or_of_other_fields_is_refused(tmp_path, grid, message):
    plan = plan_tier(_suite(tmp_path), "smoke")
    with pytest.raises(ConfigError) as caught:
        tuning_plan(plan, grid=grid)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_tuning_seeds_must_avoid_the_evaluation_seeds_named_in_one_line(tmp_path):
    plan = plan_tier(_suite(tmp_path), "smoke")  # evaluates seeds 0-2
    with pytest.raises(ConfigError) as caught:
        tuning_plan(plan, grid=GRID, seeds=3, first_seed=1)
    assert str(caught.value) == (
        "tuning seeds 1, 2 are evaluation seeds too (the tier evaluates 0-2): tune on disjoint "
        "seeds (--first-seed)"
    )
    with pytest.raises(
        ConfigError, match=r"tuning seeds 8 are evaluation seeds too .*--eval-seeds"
    ):
        tuning_plan(plan, grid=GRID, seeds=2, first_seed=7, eval_seeds=parse_seed_ranges("8-9"))
    tuning = tuning_plan(plan, grid=GRID, seeds=2, first_seed=3)
    assert tuning.seeds == (3, 4) and tuning.rule == "mean-normalized-score"
    assert tuning.points("Tools")[1] == {"optim.lr": 1e-4, "regularizers.kl_coef": 0.3}
    grid = parse_grid(["optim.lr=1e-4,1e-3", "regularizers.kl_coef=0,0.3"])
    tuning = tuning_plan(plan, grid=grid, first_seed=3)  # ...a number in the plan
    assert tuning.points("Grid")[3] == {"optim.lr": 1e-3, "regularizers.kl_coef": 0.3}


def test_the_suite_declares_the_grid_per_task_and_every_task_has_as_many_points(tmp_path):
    tier = {
        "tuning": {
            "seeds": 1,
            "first_seed": 50,
            "rule": "mean-post-shift-score",
            "grid": GRID,
            "tasks": {"Tools": {"grid": {"optim.lr": [1e-5, 3e-5, 1e-4, 3e-4]}}},
        }
    }
    tuning = tuning_plan(plan_tier(_suite(tmp_path, tier), "smoke"))
    assert tuning.seeds == (50,) and tuning.rule == "mean-post-shift-score"
    assert [point["optim.lr"] for point in tuning.points("Tools")] == [1e-5, 3e-5, 1e-4, 3e-4]
    assert len(tuning.points("Grid")) == 4
    tier["tuning"]["tasks"]["Tools"]["grid"]["optim.lr"].append(1e-3)
    with pytest.raises(ConfigError, match=r"the tasks' grids have \[4, 5\] points"):
        tuning_plan(plan_tier(_suite(tmp_path, tier), "smoke"))


def _values(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["task", "family", "method", "spec", "point", "seed", "value"]
    )


def test_the_rule_picks_the_highest_mean_over_seeds_and_the_first_on_a_tie():
    rows = []
    # sao on T: points 0..3 over seeds 1 and 2 -> means 0.25, 0.55, 0.10, 0.55: point 1 (the
    # first of the tie), sensitivity 0.55 - 0.10 = 0.45.
    for point, (a, b) in enumerate([(0.2, 0.3), (0.5, 0.6), (0.0, 0.2), (0.6, 0.5)]):
        rows += [("T", "F", "sao", "sao", point, 1, a), ("T", "F", "sao", "sao", point, 2, b)]
    # mine on T: point 2 never scored (NaN: not a candidate); means 0.1, -0.2, -, 0.0.
    for point, value in enumerate([0.1, -0.2, math.nan, 0.0]):
        rows += [("T", "F", "m", "mod:m", point, seed, value) for seed in (1, 2)]
    rows += [("T", "F", "frozen", "frozen", point, 1, 0.0) for point in range(4)]
    chosen = choose(_values(rows)).set_index("method")
    assert list(chosen.index) == ["m", "sao"]  # the floor is not tuned
    assert chosen.loc["sao", "point"] == 1 and chosen.loc["sao", "value"] == pytest.approx(0.55)
    assert chosen.loc["sao", "sensitivity"] == pytest.approx(0.45)
    assert chosen.loc["m", "point"] == 0 and chosen.loc["m", "sensitivity"] == pytest.approx(0.3)
    assert chosen.loc["m", "points"] == 3 and chosen.loc["m", "spec"] == "mod:m"
    unscored = [("T", "F", "sao", "sao", point, 1, math.nan) for point in range(4)]
    with pytest.raises(ConfigError, match="sao on T has no scored phase at any grid point"):
        choose(_values(unscored))


def _point_results(out, point: int, sao_rewards: list[list[float]]):
    """Point ``point``'s results: frozen at (0.2, 0.0), oracle 1.0, sao's seed k at
    ``sao_rewards[k]`` per phase."""
    records = [
        record("T", "F", "frozen", seed, [0.2, 0.0], [1.0, 1.0]) for seed in range(len(sao_rewards))
    ]
    records += [
        record("T", "F", "sao", seed, rewards, [1.0, 1.0])
        for seed, rewards in enumerate(sao_rewards)
    ]
    write_results(
        out / "points" / f"point-{point}",
        records,
        protocol({"T": "F"}, ["frozen", "sao"]),
    )


def test_a_runs_value_is_its_mean_normalized_score_over_the_phases_the_rule_names(tmp_path):
    # Floor (0.2, 0.0), oracle 1: phase 0 scores (r - 0.2) / 0.8, phase 1 scores r.
    _point_results(tmp_path, 0, [[0.6, 0.3], [1.0, 0.1]])  # (0.5, 0.3) and (1.0, 0.1)
    _point_results(tmp_path, 1, [[0.2, 0.8], [0.2, 0.4]])  # (0.0, 0.8) and (0.0, 0.4)
    labels = {"frozen": "frozen", "sao": "sao"}
    every = rule_values(tmp_path, 2, "mean-normalized-score", labels).set_index(
        ["method", "point", "seed"]
    )["value"]
    assert every["sao", 0, 0] == pytest.approx(0.4) and every["sao", 0, 1] == pytest.approx(0.55)
    assert every["sao", 1, 0] == pytest.approx(0.4) and every["sao", 1, 1] == pytest.approx(0.2)
    assert every["frozen", 1, 1] == pytest.approx(0.0)
    post = rule_values(tmp_path, 2, "mean-post-shift-score", labels)
    by_run = post.set_index(["method", "point", "seed"])["value"]
    assert by_run["sao", 0, 1] == pytest.approx(0.1) and by_run["sao", 1, 0] == pytest.approx(0.8)
    # Over all phases point 0 wins (0.475 vs 0.3, moved by 0.175); after the shift point 1
    # (0.6 vs 0.2, moved by 0.4).
    [first] = choose(rule_values(tmp_path, 2, "mean-normalized-score", labels)).itertuples()
    assert (first.point, first.value, first.sensitivity) == (
        0,
        pytest.approx(0.475),
        pytest.approx(0.175),
    )
    [second] = choose(post).itertuples()
    assert (second.point, second.value, second.sensitivity) == (
        1,
        pytest.approx(0.6),
        pytest.approx(0.4),
    )


def test_a_tuned_suite_runs_each_method_at_its_own_point_and_records_it(tmp_path):
    plan = plan_tier(_suite(tmp_path), "smoke")
    tuned = {
        "rule": "mean-normalized-score",
        "seeds": [100, 101],
        "from": "tune-out",
        "grids": {"Tools": GRID, "Grid": GRID},
        "chosen": {"Tools": {"sao": {"point": 3, "value": 0.5, "sensitivity": 0.25}}},
    }
    edit = {
        "tuned": tuned,
        "tasks": {"Tools": {"methods": {"sao": {"set": {"optim.lr": 1e-3}}}}},
    }
    path = write_suite(plan, tmp_path / "elsewhere" / "suite.yaml", edit)
    plan = plan_tier(path, "smoke")
    tools, grid = plan.tasks
    assert (
        tools.method_overrides("sao") == ["optim.lr=0.001"] and grid.method_overrides("sao") == []
    )
    assert plan.tuned["seeds"] == [100, 101]
    labels = method_labels(plan, ["frozen", "sao", "grpo"], [])
    made = protocol_of(plan, labels, [])
    assert made["methods"]["sao"]["set"] == {"Tools": ["optim.lr=0.001"]}
    assert "set" not in made["methods"]["grpo"] and made["tuning"]["from"] == "tune-out"
    other = json.loads(json.dumps(made))
    other["methods"]["sao"]["set"]["Tools"] = ["optim.lr=0.0001"]
    with pytest.raises(ProtocolMismatch, match=r"method sao on task Tools: its own settings"):
        check_same_protocol(made, other, "a", "b")
    with pytest.raises(ConfigError) as caught:
        run_benchmark(out=tmp_path / "bench", suite=path, tier="smoke", first_seed=99, seeds=3)
    assert str(caught.value) == (
        "--seeds/--first-seed: this suite's settings were tuned (in tune-out) on seeds 100, 101 "
        "among these: evaluate on others"
    )
    assert not (tmp_path / "bench").exists()

    blocks = to_markdown(tuning_blocks(made["tuning"], {"sao": "sao", "grpo": "grpo"}))
    assert "| Tools | optim.lr: 0.0001, 0.001; regularizers.kl_coef: 0.0, 0.3 | 4 |" in blocks
    assert "| sao | optim.lr=0.001, regularizers.kl_coef=0.3 (0.50; moved by 0.25) |" in blocks
    assert "Not tuned (run at the suite's settings, not the grid's): grpo." in blocks
    assert tuning_blocks(None, {"sao": "sao"}) == []


def test_a_pilot_suite_keeps_only_its_tasks_wherever_the_suite_names_tasks(tmp_path):
    plan = plan_tier(_suite(tmp_path), "smoke")
    edit = {"tuning": {"tasks": {"Tools": {"grid": GRID}, "Grid": {"grid": GRID}}}}
    path = write_suite(plan, tmp_path / "pilot.yaml", edit, only=["Grid"])
    data = yaml.safe_load(path.read_text())
    assert list(data["tasks"]) == ["Grid"]
    assert list(data["tiers"]["smoke"]["tuning"]["tasks"]) == ["Grid"]
    assert [task.name for task in plan_tier(path, "smoke").tasks] == ["Grid"]
    with pytest.raises(ConfigError, match=r"^tasks: Code: not a task of the suite \(its tasks: "):
        write_suite(plan, tmp_path / "other.yaml", {}, only=["Grid", "Code"])
    assert not (tmp_path / "other.yaml").exists()


@pytest.mark.parametrize(
    ("own", "message"),
    [
        (
            {"model.warm_start_steps": 7},
            "task Tools, method sao: its own settings change its warm start",
        ),
        (
            {"algorithm.name": "grpo"},
            "task Tools, method sao: its own settings make a method named",
        ),
        ({"optim.lr": "fast"}, "task Tools, method sao: its own settings: "),
    ],
)
def test_a_methods_own_settings_may_not_move_its_warm_start_or_make_another_method(
    tmp_path, own, message
):
    tier = {"tasks": {"Tools": {"methods": {"sao": {"set": own}}}}}
    plan = plan_tier(_suite(tmp_path, tier), "smoke")
    with pytest.raises(ConfigError) as caught:
        method_labels(plan, ["frozen", "sao"], [])
    assert message in str(caught.value) and "\n" not in str(caught.value)
