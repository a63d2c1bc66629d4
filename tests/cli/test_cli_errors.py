"""User mistakes at the command line: one line naming the field or file, exit code 2."""

from __future__ import annotations

import json
import os

import pytest

from sao_online.cli import main
from sao_online.config import load_config

TINY = "model: {warm_start: false, num_layers: 1, hidden_size: 32}\nruntime: {backend: sync}\n"


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[:2000]
    return lines[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("algorithm: {name: sao\n", "c.yaml: not valid YAML at line 2"),
        (
            "experiment: !!python/object/apply:os.system ['echo hi']\n",
            "c.yaml: not valid YAML at line 3, column 13: could not determine a constructor",
        ),
        ("- a\n- b\n", "c.yaml: expected a mapping of config sections, got a list"),
        ("env: {id: nope/Missing-v0}\n", "env.id: 'nope/Missing-v0': "),
        ("env: {kwargs: {bogus: 1}}\n", "env.kwargs: StyleShiftEnv.__init__() got an unexpected"),
        ("optim: {betas: [0.9]}\n", "optim.betas: expected 2 numbers, got 1"),
        ("seed: -1\n", "seed: must be in [0, 4.29497e+09], got -1"),
        ("seed: 123456789012345678901234567890\n", "seed: must be in [0, 4.29497e+09], got 1234"),
        ("experiment: ../escaped_exp\n", "experiment: '../escaped_exp' cannot name a folder"),
        # The second `model` would silently replace the first (warm_start: false dropped).
        ("model: {warm_start: true}\n", "c.yaml: line 3: duplicate key 'model' (first given at"),
    ],
)
def test_config_mistakes(capsys, tmp_path, text, expected):
    config = tmp_path / "c.yaml"
    config.write_text(
        TINY + text if text.startswith(("env", "optim", "seed", "exp", "model")) else text
    )
    line = one_line_error(capsys, ["run", str(config), "--out", str(tmp_path / "run")])
    assert line.startswith("sao-online run: error: ") and expected in line, line
    assert not (tmp_path / "run").exists()


def test_garbage_config_yaml_in_a_run_directory_on_resume(capsys, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(TINY)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("{{{ not yaml")
    line = one_line_error(capsys, ["run", str(config), "--out", str(run), "--resume"])
    assert f"{run / 'config.yaml'}: not valid YAML" in line and "damaged" in line


def test_a_corrupt_warm_start_cache_says_how_to_rebuild_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(tmp_path / "cache"))
    from sao_online.learning.warm_start import warm_start_path

    config = tmp_path / "c.yaml"
    config.write_text("model: {num_layers: 1, hidden_size: 32}\nruntime: {backend: sync}\n")
    cache = warm_start_path(load_config(config))
    cache.mkdir(parents=True)
    (cache / "warm_start.json").write_text(json.dumps({"steps": 1}))
    (cache / "config.json").write_text("{ truncated")
    (cache / "model.safetensors").write_bytes(b"\x00" * 10)
    line = one_line_error(capsys, ["run", str(config), "--out", str(tmp_path / "run")])
    assert f"warm start cache {cache} cannot be loaded" in line
    assert "sao-online pretrain CONFIG --force" in line


def test_config_warnings_print_as_one_line_each(capsys, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        "model: {warm_start: false}\nbudget: {episodes: 64}\nrollout: {batch_size: "
        "32}\nruntime: {backend: local, num_workers: 1000, max_staleness: 1000000}\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "sao-online run: warning: runtime.max_staleness=1000000 is more than the 2 update(s) the "
        "budget allows; using 2 (no trajectory can be staler, so the schedule is the same)",
        f"sao-online run: error: runtime.num_workers: 1000 worker processes on "
        f"{os.cpu_count()} CPU core(s) make no progress; use at most {os.cpu_count()}",
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--seeds", "1000000000"], "--seeds: must be an integer in [1, 10000], got 1000000000"),
        (["--seeds", "0"], "--seeds: must be an integer in [1, 10000], got 0"),
        (["--first-seed", "-3"], "--first-seed: must be an integer in [0, 4294967293], got -3"),
        (["--parallel", "1000000"], "--parallel: must be an integer in [1, "),
    ],
)
def test_compare_checks_its_numbers_before_any_work(capsys, tmp_path, args, expected):
    line = one_line_error(capsys, ["compare", "smoke", "--out", str(tmp_path / "runs"), *args])
    assert expected in line
    assert not (tmp_path / "runs").exists()


def test_a_typo_of_a_method_suggests_the_swapped_letters_first(capsys):
    line = one_line_error(capsys, ["run", "smoke", "--set", "algorithm.name=gpro", "--dry-run"])
    assert "unknown method 'gpro' (did you mean 'grpo'?)" in line
