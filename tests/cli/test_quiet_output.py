"""Quiet output: other libraries' progress bars and warnings only with ``--verbose``; sao-online's
own warnings always, as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from sao_online import cli
from sao_online.commands import envs
from sao_online.config import ConfigWarning
from sao_online.util.quiet import QUIET_ENVIRONMENT, quiet_other_libraries

SAO_ONLINE = Path(sys.executable).parent / "sao-online"


def run_cli(args, cwd, cache):
    env = {**os.environ, "SAO_ONLINE_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    for name in QUIET_ENVIRONMENT:
        env.pop(name, None)  # as a user's shell has them: unset
    return subprocess.run(
        [str(SAO_ONLINE), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.e2e
def test_transformers_progress_bars_show_only_with_verbose(tmp_path):
    args = ["run", "smoke", "--threads", "1", "--set", "budget.episodes=16"]
    args += ["--set", "model.warm_start_steps=4"]  # a warm start: loading it is a bar
    quiet = run_cli([*args, "--out", "quiet"], tmp_path, tmp_path / "cache")
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "Loading weights" not in quiet.stderr and "Writing model shards" not in quiet.stderr
    assert json.loads(quiet.stdout)["episodes"] == 16  # stdout: the summary and nothing else
    # sao-online's own warning (no shift inside 16 episodes) still shows, as one line.
    assert "sao-online run: warning: budget.episodes: no change point" in quiet.stderr
    verbose = run_cli([*args, "--out", "verbose", "--verbose"], tmp_path, tmp_path / "cache")
    assert verbose.returncode == 0, verbose.stderr[-2000:]
    assert "Loading weights" in verbose.stderr  # the same run, with --verbose


@pytest.mark.parametrize("verbose", [False, True])
def test_other_libraries_warnings_need_verbose_and_own_warnings_always_show(
    monkeypatch, capsys, verbose
):
    def command(args):
        warnings.warn("a library's notice", UserWarning, stacklevel=1)
        warnings.warn(ConfigWarning("runtime.max_staleness lowered"), stacklevel=1)
        return 0

    monkeypatch.setattr(envs, "_envs_command", command)
    with warnings.catch_warnings(record=True) as shown_by_default:  # the default display
        warnings.simplefilter("always")
        assert cli.main(["envs", *(["--verbose"] if verbose else [])]) == 0
    err = capsys.readouterr().err
    assert "sao-online envs: warning: runtime.max_staleness lowered" in err
    passed_on = [str(warning.message) for warning in shown_by_default]
    assert passed_on == (["a library's notice"] if verbose else [])


def test_quiet_sets_the_variables_children_read_and_restores_them(monkeypatch):
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")  # the user's own choice is kept
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    with quiet_other_libraries():
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"
    with quiet_other_libraries(verbose=True):
        assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ


def test_progress_bars_are_drawn_on_a_terminal_only(monkeypatch):
    from sao_online.util.quiet import progress_bars

    class Terminal:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.setattr(sys, "stderr", Terminal(False))  # a log file: lines, no redrawn bar
    assert progress_bars(True) is False
    monkeypatch.setattr(sys, "stderr", Terminal(True))
    assert progress_bars(True) is True and progress_bars(False) is False
