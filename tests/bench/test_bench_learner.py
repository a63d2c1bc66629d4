"""``bench learner`` times every method's real learner steps and reports consistent ratios."""

import json

import pytest
from tiny_model import TINY_MODEL, merge_overrides

from sao_online.cli import main
from sao_online.perf import learner as bench_learner
from sao_online.perf.learner import IN_LINE, run_learner_benchmark

TINY = merge_overrides(
    TINY_MODEL,
    [
        "rollout.batch_size=8",
        "rollout.num_slots=8",
        "rollout.max_action_tokens=6",
    ],
)


def test_every_method_is_timed_on_its_own_batches_and_the_ratios_agree():
    result = run_learner_benchmark(
        methods=("sao", "sao_running_mean", "grpo"), batches=2, rounds=2, overrides=TINY
    )
    per_method = result["per_method"]
    assert list(per_method) == ["sao", IN_LINE, "sao_running_mean", "grpo"]
    base = per_method["sao_running_mean"]["seconds_per_update"]
    for name, row in per_method.items():
        assert len(row["samples"]) == 4 and all(value > 0 for value in row["samples"])
        assert len(row["batch_tokens"]) == 2
        assert result["ratio_to_running_mean"][name] == pytest.approx(
            row["seconds_per_update"] / base, abs=1e-3
        )
    # Both SAO learners train on the same batches; only where the critic runs differs.
    assert per_method["sao"]["batch_tokens"] == per_method[IN_LINE]["batch_tokens"]
    for name in ("sao", IN_LINE):
        row = per_method[name]
        for lane in ("critic", "policy"):
            assert row[f"{lane}_lane_seconds"] > 0 and row[f"{lane}_lane_cpu_seconds"] > 0
        assert row["critical_path_cpu_seconds"] <= row["cpu_seconds_per_update"]
    # In line, one thread does everything: its critical path is all of its CPU time.
    assert (
        per_method[IN_LINE]["critical_path_cpu_seconds"]
        == (per_method[IN_LINE]["cpu_seconds_per_update"])
    )
    assert result["cpu_ratio_to_running_mean"]["sao_running_mean"] == 1.0
    sao = result["sao"]
    assert sao["ratio_to_running_mean"] == result["ratio_to_running_mean"]["sao"]
    assert sao["critic_lane_over_running_mean"] == pytest.approx(
        per_method["sao"]["critic_lane_seconds"] / base, abs=1e-3
    )
    assert sao["critical_path_cpu_over_running_mean"] == pytest.approx(
        per_method["sao"]["critical_path_cpu_seconds"]
        / per_method["sao_running_mean"]["cpu_seconds_per_update"],
        abs=1e-3,
    )
    assert sao["target_ratio_to_running_mean"] == 1.3
    assert len(result["load_average"]["before"]) == 3
    assert result["machine"]["torch_threads"] == 1


def test_unknown_methods_and_empty_runs_are_refused():
    with pytest.raises(ValueError, match=r"unknown method\(s\) \['ppo'\]"):
        run_learner_benchmark(methods=("ppo",), overrides=TINY)
    with pytest.raises(ValueError, match="batches and rounds must be >= 1"):
        run_learner_benchmark(batches=0, overrides=TINY)


def test_the_command_prints_the_benchmarks_json(monkeypatch, capsys):
    calls = []

    def fake(**options):
        calls.append(options)
        return {"per_method": {}}

    monkeypatch.setattr(bench_learner, "run_learner_benchmark", fake)
    assert main(["bench", "learner", "--quick"]) == 0
    assert calls == [{"quick": True}]
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"per_method": {}}
