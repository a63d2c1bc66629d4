"""A run that raises keeps its evidence (``error.txt``: the traceback, its last records) and
what it logged, and running it again continues it from its checkpoint or starts it again,
saying which: with a method and with a task of one's own that raise mid-run."""

from __future__ import annotations

import sys
import textwrap

import pytest

from sao_online.config import load_config
from sao_online.rundir.failure import ERROR_FILE, PREVIOUS_ERROR_FILE, failed_run, with_tracebacks
from sao_online.runtime.launch import run_experiment

METHOD = textwrap.dedent("""
    import os

    from sao_online.algorithms import Method, PPOClip, RunningMeanAdvantage


    class Clipped(PPOClip):
        calls = 0

        def __call__(self, logprobs, batch, advantages):
            Clipped.calls += 1
            if os.environ.get("CRASH_AT") == str(Clipped.calls):
                return logprobs.stats  # a bug, at an update mid-run
            return super().__call__(logprobs, batch, advantages)


    def make(cfg, max_action_tokens):
        return Method(name="mine", group_size=1, estimator=RunningMeanAdvantage(window=16),
                      objective=Clipped(eps_low=0.2, eps_high=0.2))
""")

TASK = textwrap.dedent("""
    import gymnasium

    from sao_online.environments import DriftingTextEnv, TurnResult


    class Coins(DriftingTextEnv):
        description = "Call heads or tails."
        drift_space = {"side": ["heads", "tails"]}
        steps = 0

        def _begin_episode(self):
            return "Heads or tails?", {}

        def _respond(self, action):
            Coins.steps += 1
            if Coins.steps == 10:
                raise KeyError("side")  # a bug, in the tenth episode
            return TurnResult("ok", 0.0, terminated=True, behavior="called")

        def oracle_action(self, observation, info):
            return info["theta"]["side"]

        def oracle_reward(self, theta):
            return 1.0


    gymnasium.register("crashing_coins/Coins-v0", entry_point=Coins)
""")


def _config(**overrides):
    config = {
        "experiment": "failing",
        "schedule": {
            "parameters": {"side": {"kind": "abrupt", "values": ["heads", "tails"], "at": [0, 8]}}
        },
        "env": {"id": "crashing_coins:crashing_coins/Coins-v0"},
        "model": {"num_layers": 1, "hidden_size": 32, "warm_start": False},
        "algorithm": {"name": "failing_methods:make"},
        "rollout": {
            "batch_size": 4,
            "num_slots": 4,
            "max_turns": 1,
            "max_action_tokens": 4,
            "max_episode_tokens": 64,
            "on_action_cap": "submit",
        },
        "runtime": {"backend": "sync", "torch_threads": 1},
        "budget": {"episodes": 24},
        "logging": {"checkpoint_every": 1, "transcripts_every": 0},
    }
    for key, value in overrides.items():
        section, _, field = key.partition(".")
        config[section] = {**config[section], field: value}
    return load_config(config)


def _method_config():
    """The user's method on a built-in task (its own schedule)."""
    return load_config(
        {**_config().to_dict(), "schedule": None, "env": {"id": "sao_online/StyleShift-v0"}}
    )


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    (tmp_path / "failing_methods.py").write_text(METHOD)
    (tmp_path / "crashing_coins.py").write_text(TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("failing_methods", "crashing_coins"):
        sys.modules.pop(name, None)


def test_a_method_that_raises_mid_run_keeps_its_evidence_and_is_continued(
    plugins, monkeypatch, capsys
):
    run_dir = plugins / "run"
    config = _method_config()
    monkeypatch.setenv("CRASH_AT", "3")
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'stats'"):
        run_experiment(config, out=run_dir)
    assert failed_run(run_dir)
    evidence = (run_dir / ERROR_FILE).read_text()
    assert evidence.startswith("The run mine seed 0 of failing failed at ")
    assert "Traceback (most recent call last):" in evidence and "logprobs.stats" in evidence
    assert "updates (the last 2 of 2):" in evidence  # two updates went through
    assert "episodes (the last 5 of 12):" in evidence  # the third batch's episodes too
    assert (run_dir / "config.yaml").is_file() and (run_dir / "checkpoints").is_dir()
    # The same code, run again: continued from its last checkpoint, said so; no --overwrite.
    monkeypatch.setenv("CRASH_AT", "never")
    summary = run_experiment(config, out=run_dir)
    assert summary["episodes"] == 24 and summary["episodes_this_session"] == 16
    assert "failed before: continuing it from its last checkpoint" in capsys.readouterr().err
    assert not failed_run(run_dir) and (run_dir / PREVIOUS_ERROR_FILE).read_text() == evidence


def test_fixed_code_restarts_the_failed_run(plugins, monkeypatch, capsys):
    run_dir = plugins / "run"
    config = _method_config()
    monkeypatch.setenv("CRASH_AT", "2")
    with pytest.raises(AttributeError):
        run_experiment(config, out=run_dir)
    module = plugins / "failing_methods.py"
    module.write_text(METHOD.replace("window=16", "window=32"))  # the fix: other code
    run_experiment(config, out=run_dir)
    said = capsys.readouterr().err
    assert "failed before: starting it again (its code changed: module failing_methods" in said


def test_a_task_that_raises_mid_run_keeps_its_evidence(plugins):
    run_dir = plugins / "run"
    config = _config(**{"algorithm.name": "sao_running_mean"})
    with pytest.raises(ValueError, match=r"step 1 of the episode .* raised KeyError: 'side'"):
        run_experiment(config, out=run_dir)
    evidence = (run_dir / ERROR_FILE).read_text()
    assert "EnvError" in evidence and 'raise KeyError("side")' in evidence
    line = f"mine/seed-0: EnvError: boom (traceback: {run_dir / ERROR_FILE})"
    shown = with_tracebacks([line])  # what --verbose prints under a failed run's line
    assert shown[0] == line and any("Traceback (most recent call last)" in row for row in shown)
