"""``sao-online benchmark``'s input errors: one line each, before any run starts."""

from __future__ import annotations

import re

import pytest

from sao_online.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--methods", "sao,nope"], "--methods: unknown method 'nope'; choose from sao, "),
        (["--methods", "grpo_dsi"], "unknown method 'grpo_dsi' (did you mean 'grpo_dis'?)"),
        (["--methods", "sao,grpo:"], "--methods: unknown method 'grpo:'"),
        (["--methods", "no_such_module:make"], "cannot import module 'no_such_module'"),
        (["--seeds", "0"], "--seeds: must be an integer in [1, 10000], got 0"),
        (["--seeds", "1000000000"], "--seeds: must be an integer in [1, 10000], got 1000000000"),
        (["--first-seed", "-1"], "--first-seed: must be an integer in [0, 4294967295], got -1"),
        (["--first-seed", "4294967295", "--seeds", "2"], "pass the largest seed, 4294967295"),
        (["--reps", "0"], "--reps: must be an integer in [1, 1000000], got 0"),
        (["--reps", "-5"], "--reps: must be an integer in [1, 1000000], got -5"),
        (["--reps", "1000000000"], "--reps: must be an integer in [1, 1000000], got 1000000000"),
        (["--seeds", "5000", "--dry-run"], "--reps: the bootstrap needs about"),  # 5,000^2 pairs
        (
            ["--set", "budget.episodes=1000000000", "--dry-run"],
            "the tasks' budget.episodes and model (--set): one run of ",
        ),
        (
            ["--seeds", "10000", "--reps", "1", "--set", "budget.episodes=20000", "--dry-run"],
            "--seeds: the plan (150000 runs) takes about",
        ),
        (["--resume", "--force"], "--resume and --force: continue the benchmark or replace it"),
        (["--address", "auto"], "--address: applies to --backend ray only"),
        (["--parallel", "0"], "--parallel: must be an integer in [1, "),
        (["--parallel", "1000000"], "--parallel: must be an integer in [1, "),
        (["--suite", "nightly"], "--suite: 'nightly' is neither a built-in suite"),
        (["--set", "budget.episodes=lots"], "--set: task StyleShift: budget.episodes: expected"),
    ],
)
def test_bad_input_is_one_line_and_starts_nothing(tmp_path, capsys, args, message):
    code = main(["benchmark", "--tier", "smoke", "--out", str(tmp_path / "bench"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("sao-online benchmark: error: ") and "\n" not in err
    assert message in err
    assert not (tmp_path / "bench").exists()


def test_out_is_required_to_run(capsys):
    assert main(["benchmark", "--tier", "smoke"]) == 2
    assert "--out is required" in capsys.readouterr().err


def test_a_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    assert main(["benchmark", "--tier", "smoke", "--dry-run", "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "suite core, tier smoke: 5 tasks" in out and "methods: frozen, sao, grpo" in out
    assert re.search(r"estimate: 15 runs: about .* on \d+ core\(s\)", out)
    assert not (tmp_path / "b").exists()


def test_an_out_folder_that_holds_a_benchmark_is_refused_unless_told(tmp_path, capsys):
    out = tmp_path / "bench"
    (out / "results").mkdir(parents=True)
    (out / "results" / "benchmark.json").write_text("{}")
    assert main(["benchmark", "--tier", "smoke", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds a benchmark already; --resume continues it, --force replaces its results" in err
