"""docs/performance.md: its tables are the kept results, rendered, and stay in step with them."""

import json

import pytest

from sao_online.commands import performance_page
from sao_online.commands.performance_page import PAGE, render


def test_the_pages_tables_are_generated_from_the_kept_results():
    page = PAGE.read_text()
    assert page.count("<!-- table: ") == len(performance_page.TABLES)
    assert render(page) == page, "run: python -m sao_online.commands.performance_page"
    assert performance_page.main(["--check"]) == 0


def _learner_result():
    row = {"seconds_per_update": 2.0, "cpu_seconds_per_update": 1.0}
    sao = {
        **row,
        "seconds_per_update": 3.0,
        "critic_lane_cpu_seconds": 1.2,
        "policy_lane_cpu_seconds": 0.9,
    }
    return {
        "per_method": {"sao": sao, "sao_running_mean": row},
        "ratio_to_running_mean": {"sao": 1.5, "sao_running_mean": 1.0},
        "cpu_ratio_to_running_mean": {"sao": 2.1, "sao_running_mean": 1.0},
        "sao": {
            "ratio_to_running_mean": 1.5,
            "in_line_ratio_to_running_mean": 2.2,
            "critical_path_cpu_over_running_mean": 1.234,
            "target_ratio_to_running_mean": 1.3,
        },
    }


def test_a_table_shows_its_files_numbers_and_command(tmp_path):
    kept = {"command": "sao-online bench learner", "load": "load 5", "result": _learner_result()}
    (tmp_path / "bench_learner.json").write_text(json.dumps(kept))
    page = "# P\n<!-- table: learner -->\nstale\n<!-- end table -->\nafter\n"
    rendered = render(page, tmp_path)
    assert "stale" not in rendered and rendered.endswith("<!-- end table -->\nafter\n")
    assert "| `sao` | 3.000 | 1.50x | 1.000 | 2.10x | 1.200 / 0.900 |" in rendered
    assert "is 1.23x the running mean's CPU time (target 1.30x)" in rendered
    assert "Command: `sao-online bench learner`; load 5." in rendered
    assert render(rendered, tmp_path) == rendered


def test_unknown_tables_and_missing_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown table 'speed'"):
        render("<!-- table: speed -->\n<!-- end table -->\n", tmp_path)
    with pytest.raises(ValueError, match="no kept result .*bench_learner.json"):
        render("<!-- table: learner -->\n<!-- end table -->\n", tmp_path)


def _async_result(requeued: int, busy: float) -> dict:
    option = {
        "stragglers": "requeue" if requeued else "wait",
        "staleness_from": "tokens",
        "speedup": 2.5,
        "learner_busy_fraction": busy,
        "learner_wait_bound_fraction": 0.0 if requeued else 0.3,
        "learner_wait_episodes_fraction": 0.02,
        "requeued_stale": requeued,
        "wasted_action_tokens": 1234 * requeued,
        "wasted_action_token_share": 0.0125 * requeued,
        "wasted_env_seconds": 0.5 * requeued,
        "max_token_staleness": 4,
        "episodes_started_after_admission": 3 - requeued,
    }
    workload = {
        "episodes": 384,
        "batch_size": 16,
        "max_staleness": 4,
        "workers": 1,
        "latency_mean": 0.5,
        "latency_sigma": 1.0,
    }
    sweep = {"max_staleness": 16, "learner_busy_fraction": 0.97, "learner_wait_bound_fraction": 0}
    return {
        "workload": workload,
        "by_straggler_option": [option],
        "local_by_max_staleness": [{"max_staleness": 4}, sweep],
        # 24 updates: the learner's seconds over the 23 after the first.
        "async": {"learner_seconds": 23 * busy, "updates": 24},
        "sync": {"learner_seconds": 11.5, "updates": 24},
    }


def test_the_async_table_has_a_row_per_run_and_way_with_stragglers(tmp_path):
    kept = {
        "command": "sao-online bench async",
        "runs": [
            {"load": "load 3", "result": _async_result(0, 0.655)},
            {"load": "load 7", "result": _async_result(2, 0.961)},
        ],
    }
    (tmp_path / "bench_async.json").write_text(json.dumps(kept))
    rendered = render("<!-- table: async -->\n<!-- end table -->\n", tmp_path)
    wait = "| 1 | 4 | `wait`, `tokens` | 2.50x | 66% | 30% | 2% | 0 | 0 (0.0%) | 0.0 | 4 |"
    requeue = "| 2 | 4 | `requeue`, `tokens` | 2.50x | 96% | 0% | 2% | 2 | 2,468 (2.5%) | 1.0 | 4 |"
    assert wait in rendered and requeue in rendered
    assert "run 2, max_staleness 16: learner busy 97%, held back by the bound 0%" in rendered
    assert "Command: `sao-online bench async`; run 1: load 3; run 2: load 7." in rendered
    assert "(the sync run's in brackets): run 1: 0.66 (0.50); run 2: 0.96 (0.50)." in rendered
    started = "by way: run 1: `wait`/`tokens` 3; run 2: `requeue`/`tokens` 1."
    assert started in rendered


def _throughput_run(load: str, sync: float, local: float) -> dict:
    side = {"completions_per_second": 10.0, "learner_seconds_per_update": 0.5, "threads": 1}
    peer = {"trainer": "trl X GRPOTrainer", "completions_per_second": 5.0, "threads": 1}
    result = {"sync": side, "local": side, "peer": peer}
    return {"load": load, "result": result | {"ratio_to_peer": {"sync": sync, "local": local}}}


def test_the_throughput_table_counts_the_runs_that_reach_twice_trl(tmp_path):
    kept = {
        "command": "sao-online bench throughput --peer trl",
        "runs": [_throughput_run("busy", 2.0, 1.99), _throughput_run("quiet", 2.5, 2.1)],
    }
    (tmp_path / "bench_throughput_trl.json").write_text(json.dumps(kept))
    rendered = render("<!-- table: throughput -->\n<!-- end table -->\n", tmp_path)
    assert "| 1 | local | 10.0 | 1.99x | 0.500 | 1 |" in rendered
    assert "| 2 | trl X GRPOTrainer | 5.0 | 1.00x |  | 1 |" in rendered
    assert "sync in 2 of 2 runs; local in 1 of 2 runs." in rendered  # 2.00x counts, 1.99x not
    assert "run 1: busy; run 2: quiet." in rendered


def test_grpo_reaches_twice_trl_in_every_quiet_run_and_the_sync_side_under_load():
    kept = json.loads((performance_page.DATA / "bench_throughput_trl.json").read_text())
    quiet = [run for run in kept["runs"] if "quiet machine" in run["load"]]
    busy = [run for run in kept["runs"] if "other work running" in run["load"]]
    assert len(quiet) == 3 and len(busy) == 1
    for run in quiet:
        assert min(run["result"]["ratio_to_peer"].values()) >= 2
    [loaded] = busy
    assert (
        loaded["result"]["ratio_to_peer"]["sync"] >= 2 > loaded["result"]["ratio_to_peer"]["local"]
    )
