"""``sao-online benchmark``'s input errors: one line each, before any run starts."""

from __future__ import annotations

import pytest

from sao_online.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--methods", "sao,nope"], "--methods: unknown method 'nope'; choose from sao, "),
        (["--methods", "grpo_dsi"], "unknown method 'grpo_dsi' (did you mean 'grpo_dis'?)"),
        (["--methods", "sao,grpo:"], "--methods: unknown method 'grpo:'"),
        (["--methods", "no_such_module:make"], "cannot import module 'no_such_module'"),
        (["--seeds", "0"], "--seeds: must be >= 1, got 0"),
        (["--address", "auto"], "--address: applies to --backend ray only"),
        (["--parallel", "0"], "--parallel: must be >= 1, got 0"),
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
