"""``bench throughput`` reports consistent numbers from real sync and local runs."""

import pytest
from throughput_runs import throughput_run
from tiny_model import TINY_MODEL

from sao_online import cli
from sao_online.perf import THROUGHPUT_RUNS
from sao_online.perf.contention import run_contention_benchmark
from sao_online.perf.throughput import (
    TARGET_COMPLETIONS_PER_SECOND,
    run_throughput_benchmark,
    summarize,
)

TINY = [*TINY_MODEL, "rollout.max_action_tokens=4"]


def _check_side(side: dict, completions: int, split_parts: tuple[str, ...]) -> None:
    assert side["completions"] == completions
    assert side["completions_per_second"] == pytest.approx(completions / side["seconds"], rel=1e-2)
    assert 1 <= side["mean_completion_tokens"] <= 4  # the 4-token completion cap
    split = side["split"]
    assert tuple(split) == split_parts
    # Every part is time the run spent; together they are its seconds (rounded per part).
    assert all(split[part] > 0 for part in split_parts if part != "other")
    assert sum(split.values()) * side["updates"] == pytest.approx(side["seconds"], abs=0.02)


@pytest.mark.e2e
def test_tiny_benchmark_reports_consistent_numbers():
    # Two updates of 64 completions per backend; a tiny model with 4-token completions.
    result = run_throughput_benchmark(episodes=128, overrides=TINY, runs=1, threads=2)
    assert result["workload"]["episodes"] == 128 and result["rounds"] == 1
    assert result["threads"] == {"sync": 2, "local": {"learner": 1, "rollout_worker": 1}}
    assert "peer" not in result["runs"] and "ratio_to_peer" not in result
    for name, parts in (("sync", SYNC_PARTS), ("local", LOCAL_PARTS)):
        [side] = result["runs"][name]
        _check_side(side, 128, parts)
        assert side["updates"] == 2 and side["threads"] == result["threads"]["sync"] - (
            name == "local"
        )
        # Steady state is the one update after the first: 64 completions over its seconds.
        assert side["steady_completions_per_second"] == pytest.approx(
            64 / side["seconds_per_update"], rel=1e-2
        )
        assert 0 < side["learner_seconds_per_update"] < side["seconds_per_update"]
        assert 0 < side["first_update_seconds"] < side["seconds"]
        rate = side["completions_per_second"]
        assert result["completions_per_second"][name] == {"median": rate, "min": rate, "max": rate}
        assert result["ratio_to_target"][name] == pytest.approx(
            rate / TARGET_COMPLETIONS_PER_SECOND, abs=1e-3
        )


SYNC_PARTS = ("generation", "environment", "forward", "backward", "optimizer", "other")
LOCAL_PARTS = ("forward", "backward", "optimizer", "other")


def test_unknown_peer_and_bad_counts_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown peer 'vllm'"):
        run_throughput_benchmark(episodes=64, overrides=TINY, peer="vllm")
    with pytest.raises(ValueError, match="runs must be >= 1, got 0"):
        run_throughput_benchmark(episodes=64, overrides=TINY, runs=0)


def test_command_line_refuses_a_count_below_one(capsys):
    parser = cli.build_parser()
    args = parser.parse_args(["bench", "throughput", "--runs", "7", "--threads", "3"])
    assert (args.runs, args.threads) == (7, 3)
    assert parser.parse_args(["bench", "throughput"]).runs == THROUGHPUT_RUNS
    for flag in ("--runs", "--threads"):
        with pytest.raises(SystemExit):
            parser.parse_args(["bench", "throughput", flag, "0"])
        assert "expected an int >= 1, got '0'" in capsys.readouterr().err


def _run(rate: float, generation: float, learner: float, other: float) -> dict:
    return throughput_run(rate, generation, learner, other, completions=128, updates=2)


def test_summary_pairs_each_round_with_trl_and_takes_medians():
    measured = {
        "sync": [_run(100, 0.2, 0.4, 0.04), _run(80, 0.3, 0.4, 0.1)],
        "local": [_run(120, 0, 0.4, 0.1), _run(90, 0, 0.4, 0.1)],
        "peer": [_run(50, 0.6, 0.6, 0.08), _run(50, 0.6, 0.8, 0.08)],
    }
    summary = summarize(measured)
    assert summary["completions_per_second"]["sync"] == {"median": 90, "min": 80, "max": 100}
    # Round ratios: sync 2.0 and 1.6, local 2.4 and 1.8.
    assert summary["ratio_to_peer"]["sync"] == {"median": 1.8, "min": 1.6, "max": 2.0}
    assert summary["ratio_to_peer"]["local"] == {"median": 2.1, "min": 1.8, "max": 2.4}
    by_part = summary["ratio_to_peer_by_part"]
    assert by_part["generation"] == pytest.approx((3 + 2) / 2)  # 0.6 / 0.2, 0.6 / 0.3
    assert by_part["learner"] == pytest.approx((1.5 + 2) / 2)  # 0.6 / 0.4, 0.8 / 0.4
    assert by_part["backward"] == pytest.approx(1.75) and by_part["environment"] == 1
    assert by_part["other"] == pytest.approx((2 + 0.8) / 2)
    assert summary["split_per_update"]["peer"]["backward"] == pytest.approx(0.35)
    # TRL's seconds per update (1.28 both rounds) over the sync learner's 0.4.
    assert summary["ratio_limit_learner_only"] == pytest.approx(3.2)


def test_a_part_our_side_never_spent_has_no_ratio():
    measured = {
        "sync": [_run(100, 0.2, 0.4, 0.0)],
        "local": [_run(100, 0, 0.4, 0.1)],
        "peer": [_run(50, 0.6, 0.6, 0.08)],
    }
    assert summarize(measured)["ratio_to_peer_by_part"]["other"] is None


@pytest.mark.e2e
def test_trl_peer_takes_turns_on_the_same_prompts_and_reports_its_split():
    pytest.importorskip("trl", reason="TRL is an optional extra: make trl")
    result = run_throughput_benchmark(episodes=64, overrides=TINY, peer="trl", runs=2, threads=1)
    assert result["order"] == [["sync", "local", "peer"], ["local", "peer", "sync"]]
    assert result["threads"]["peer"] == result["threads"]["sync"] == 1
    runs = result["runs"]
    for peer in runs["peer"]:
        assert peer["trainer"].startswith("trl ") and "GRPOTrainer" in peer["trainer"]
        assert (
            peer["settings"]["bf16"] is False
            and peer["settings"]["gradient_checkpointing"] is False
        )
        assert peer["threads"] == 1 and peer["updates"] == 1
        _check_side(peer, 64, SYNC_PARTS)
    # The same prompts, tokenized by the same template, on both sides.
    assert runs["peer"][0]["prompt_tokens"] == runs["sync"][0]["prompt_tokens"] > 10
    ratios = [
        ours["completions_per_second"] / peer["completions_per_second"]
        for ours, peer in zip(runs["sync"], runs["peer"])
    ]
    assert result["ratio_to_peer"]["sync"]["min"] == pytest.approx(min(ratios), abs=1e-3)
    assert result["ratio_to_peer"]["sync"]["max"] == pytest.approx(max(ratios), abs=1e-3)
    assert result["target_ratio_to_peer"] == 2.0
    assert set(result["ratio_to_peer_by_part"]) == {*SYNC_PARTS, "learner"}


def test_contention_benchmark_keeps_the_busy_core_free_and_reports_the_share():
    result = run_contention_benchmark(episodes=64, overrides=TINY)
    quiet, contended = result["quiet"], result["contended"]
    assert quiet["completions"] == contended["completions"] == 64
    assert result["kept_share"] == pytest.approx(
        contended["completions_per_second"] / quiet["completions_per_second"], abs=1e-3
    )
    # The busy loop's core is seen and left alone.
    assert 1 <= contended["threads"] <= max(1, result["workload"]["usable_cores"] - 1)
    assert result["target_kept_share"] == 0.4


def test_the_trl_peer_refuses_a_workload_without_groups():
    pytest.importorskip("trl", reason="TRL is an optional extra: make trl")
    from sao_online.config import load_config
    from sao_online.perf.trl_peer import run_trl_grpo

    config = load_config(None, [*TINY, "algorithm.name=sao"])
    with pytest.raises(ValueError, match="algorithm.group_size must be >= 2"):
        run_trl_grpo(config, episodes=64, threads=1)
