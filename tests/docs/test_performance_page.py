"""docs/performance.md and its appendix: their tables are the kept results, rendered, and stay
in step with them."""

import json
import statistics

import pytest
from throughput_runs import throughput_run

from sao_online.commands import performance_page
from sao_online.commands.performance_page import DATA, PAGE, PAGES, render
from sao_online.perf.throughput import summarize


def test_the_pages_tables_are_generated_from_the_kept_results():
    pages = [page.read_text() for page in PAGES]
    assert sum(page.count("<!-- table: ") for page in pages) == len(performance_page.TABLES)
    for page in pages:
        assert render(page) == page, "run: python -m sao_online.commands.performance_page"
    assert performance_page.main(["--check"]) == 0


def test_check_names_a_stale_page(tmp_path, monkeypatch, capsys):
    page = tmp_path / "performance.md"
    page.write_text(PAGE.read_text().replace("| `sao` |", "| `sao-typed` |", 1))
    monkeypatch.setattr(performance_page, "PAGES", (page,))
    assert performance_page.main(["--check"]) == 1
    assert f"{page}: tables differ from the kept results" in capsys.readouterr().err
    assert performance_page.main([]) == 0 and performance_page.main(["--check"]) == 0


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


def test_the_runs_with_trls_gpu_defaults_count_the_runs_that_reach_twice_trl(tmp_path):
    kept = {
        "command": "sao-online bench throughput --peer trl",
        "runs": [_throughput_run("busy", 2.0, 1.99), _throughput_run("quiet", 2.5, 2.1)],
    }
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "bench_throughput_trl-1.json").write_text(json.dumps(kept))
    rendered = render("<!-- table: throughput-gpu-defaults -->\n<!-- end table -->\n", tmp_path)
    assert "| 1 | local | 10.0 | 1.99x | 0.500 | 1 |" in rendered
    assert "| 2 | trl X GRPOTrainer | 5.0 | 1.00x |  | 1 |" in rendered
    assert "sync in 2 of 2 runs; local in 1 of 2 runs." in rendered  # 2.00x counts, 1.99x not
    assert "run 1: busy; run 2: quiet." in rendered


def _local(rate: float) -> dict:
    run = throughput_run(rate, 0, 0.28, 0.15)
    run["split"] = {part: run["split"][part] for part in ("forward", "backward", "optimizer")}
    run["split"]["other"] = 0.15
    return run


def _throughput_kept() -> dict:
    """Three rounds: sync at 128, 160 and 144 completions/s, TRL at 80 each."""
    measured = {
        "sync": [
            throughput_run(128, 0.25, 0.2, 0.04),
            throughput_run(160, 0.2, 0.16, 0.03),
            throughput_run(144, 0.22, 0.2, 0.02),
        ],
        "local": [_local(120), _local(168), _local(160)],
        "peer": [throughput_run(80, 0.6, 0.24, 0.14) for _ in range(3)],
    }
    for peer in measured["peer"]:
        peer |= {
            "trainer": "trl 1.16.0 GRPOTrainer",
            "settings": {"use_cpu": True, "bf16": False, "gradient_checkpointing": False},
            "versions": {"trl": "1.16.0"},
            "reward": "one environment, reset and stepped",
        }
    result = {
        "workload": {"episodes": 1280},
        "threads": {"sync": 2, "local": {"learner": 1, "rollout_worker": 1}, "peer": 2},
        "rounds": 3,
        "order": [["sync", "local", "peer"], ["local", "peer", "sync"], ["peer", "sync", "local"]],
        "target_ratio_to_peer": 2.0,
        **summarize(measured),
        "runs": measured,
    }
    return {
        "command": "sao-online bench throughput --peer trl",
        "load": "load 1.9-2.1 (a quiet machine)",
        "provenance": {"commit": "0123456789abcdef", "dirty": False, "machine": {"cpu_model": "X"}},
        "result": result,
    }


def test_the_throughput_table_gives_the_spread_the_split_and_the_limit(tmp_path):
    (tmp_path / "bench_throughput_trl.json").write_text(json.dumps(_throughput_kept()))
    rendered = render("<!-- table: throughput -->\n<!-- end table -->\n", tmp_path)
    # Round ratios 1.6, 2.0, 1.8 (sync) and 1.5, 2.1, 2.0 (local).
    assert "the sync backend at 1.80x (1.60x-2.00x) TRL's completions per second" in rendered
    assert "the local backend at 2.00x (1.50x-2.10x)." in rendered
    # Generation differs most: 0.6 s in TRL against the median 0.22 s.
    assert "differ most in generation: 0.600 s per update in TRL against 0.220 s" in rendered
    # The learner: TRL's 0.24 s over 0.2, 0.16, 0.2 s -> 1.2x, 1.5x, 1.2x.
    assert "the learner's three passes, over the same model, take 1.20x as long in TRL" in rendered
    assert "Target 2x TRL: reached by local, missed by sync." in rendered
    # TRL's update: 1280 / 80 / 20 = 0.8 s; at 2x a sync update would take 0.4 s; the sync
    # learner's median 0.2 s leaves 0.2 s against 1280 / 144 / 20 - 0.2 = 0.244 s now.
    assert "At 2x a sync update would take 0.400 s (TRL's 0.800 s over 2)" in rendered
    assert "which leaves 0.200 s for generation, the environment and the rest, against 0.244 s" in (
        rendered
    )
    assert "the sync backend would reach 4.00x (`ratio_limit_learner_only`)" in rendered
    assert "| sync | 2 | 144.0 (128.0-160.0) | 1.80x (1.60x-2.00x) | 73.3 | 30.6 |" in rendered
    assert "| local | learner 1, worker 1 | 160.0 (120.0-168.0) |" in rendered
    assert "| generation | 0.220 |  | 0.600 | 2.73x |" in rendered  # 0.6 / (0.25, 0.2, 0.22)
    assert "| **an update, all of it** | 0.444 | 0.400 | 0.800 | 1.80x |" in rendered
    assert "| 2 | local, TRL, sync | 160.0 | 168.0 | 80.0 | 2.00x | 2.10x |" in rendered
    assert "`bf16=False`, `gradient_checkpointing=False`; trl 1.16.0;" in rendered
    assert "; load 1.9-2.1 (a quiet machine); X; kept, with the commit" in rendered
    assert render(rendered, tmp_path) == rendered


def test_nothing_kept_yet_says_so_and_how_to_keep_it(tmp_path):
    rendered = render("<!-- table: throughput -->\n<!-- end table -->\n", tmp_path)
    assert "is kept yet: `make measure-throughput` on a quiet machine" in rendered
    with pytest.raises(ValueError, match="no kept result"):
        render("<!-- table: learner -->\n<!-- end table -->\n", tmp_path)


def test_the_pages_trl_finding_is_the_kept_result():
    page = PAGE.read_text()
    block = page[page.index("<!-- table: throughput -->") : page.index("### SAO's learner")]
    kept_file = DATA / "bench_throughput_trl.json"
    if not kept_file.is_file():
        assert "No run of `sao-online bench throughput --peer trl`" in block
        return
    result = json.loads(kept_file.read_text())["result"]
    runs = result["runs"]
    for side in ("sync", "local"):
        ratios = [
            ours["completions_per_second"] / peer["completions_per_second"]
            for ours, peer in zip(runs[side], runs["peer"])
        ]
        assert len(ratios) >= 5  # at least five rounds
        median, low, high = statistics.median(ratios), min(ratios), max(ratios)
        assert f"{median:.2f}x ({low:.2f}x-{high:.2f}x)" in block
    for part, ratio in result["ratio_to_peer_by_part"].items():
        if ratio is not None and part != "learner":
            assert f"| {ratio:.2f}x |" in block
    for peer in runs["peer"]:
        assert (
            peer["settings"]["bf16"] is False
            and peer["settings"]["gradient_checkpointing"] is False
        )
        assert peer["threads"] == result["threads"]["sync"]


def test_the_simulated_runtime_table_is_its_kept_bench(tmp_path):
    rendered = render("<!-- table: simulated -->\n<!-- end table -->\n", tmp_path)
    assert "No run of `sao-online bench simulated` is kept yet" in rendered

    def run(backend, seconds, tokens, learner):
        return {
            "backend": backend,
            "seconds": seconds,
            "episodes": 320,
            "action_tokens": tokens,
            "seconds_per_episode": seconds / 320,
            "seconds_per_1k_tokens": 1000 * seconds / tokens,
            "learner_seconds": learner,
            "other_seconds": seconds - learner,
        }

    result = {
        "workload": {"episodes": 320, "repeats": 1},
        "runs": [run("sync", 40.0, 8000, 10.0), run("simulated", 44.0, 8800, 10.5)],
        "ratio_per_episode": 1.1,
        "ratio_per_1k_tokens": 1.0,
        "range_per_episode": [1.1, 1.1],
        "target": 1.3,
        "meets_target": True,
    }
    kept = {"command": "sao-online bench simulated", "load": "a quiet machine", "result": result}
    (tmp_path / "bench_simulated.json").write_text(json.dumps(kept))
    rendered = render("<!-- table: simulated -->\n<!-- end table -->\n", tmp_path)
    assert "costs 1.10x sync's real seconds per episode (1.10-1.10x over 1 pairs" in rendered
    assert "it meets the target of at most 1.3x" in rendered
    # 40 s / 320 episodes = 125 ms; 40 s / 8 = 5.00 s per thousand tokens.
    assert "| sync | 320 | 8000 | 40.0 | 125.0 | 5.00 | 10.0 | 30.0 |" in rendered
    assert "| simulated | 320 | 8800 | 44.0 | 137.5 | 5.00 | 10.5 | 33.5 |" in rendered
    assert "Command: `sao-online bench simulated`; a quiet machine." in rendered
