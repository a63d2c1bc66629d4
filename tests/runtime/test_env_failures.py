"""A user environment that hangs, raises, or returns the wrong thing: the rollout engine names it
(env id, the call, the field, where it raised) in one ``EnvError`` line, a step past
``env_step_timeout`` ends its episode or stops the run as asked, and through the command line
(``sync`` and ``local``) each of these exits with code 2 and one line on stderr."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import gymnasium as gym
import pandas as pd
import pytest
import yaml
from tiny_model import model_section

from sao_online.models import build_tiny_policy
from sao_online.rollout import TRUNCATED_BY_KEY, EnvError, EpisodeRequest, RolloutEngine

#: Set when the module's tests end: releases the threads of every env left hanging.
RELEASE = threading.Event()


@pytest.fixture(scope="module", autouse=True)
def _release_hung_envs():
    RELEASE.clear()  # armed again where the module's tests resume after another module's
    yield
    RELEASE.set()


class ToyEnv(gym.Env[str, str]):
    """One or two turns; ``fault`` makes step (or reset) hang, raise or return a bad field."""

    metadata = {}
    observation_space = gym.spaces.Text(max_length=512)
    action_space = gym.spaces.Text(max_length=4096)

    def __init__(self, fault: str = "", turns: int = 1):
        self.fault, self.turns = fault, turns

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        if self.fault == "reset_hangs":
            RELEASE.wait()
        if self.fault == "reset_raises":
            raise KeyError("missing task table")
        return "Say something.", {"phase": 0, "theta": {}}

    def step(self, action):
        self.turn += 1
        if self.fault == "hangs":
            RELEASE.wait()
        if self.fault == "raises":
            raise ZeroDivisionError("the simulator divided by zero")
        done = self.turn >= self.turns
        result = ["ok", 1.0, done, False, {"behavior": "spoke"} if done else {}]
        field, _, value = self.fault.partition("=")
        if field:
            index = ["observation", "reward", "terminated", "truncated", "info"].index(field)
            result[index] = eval(value)  # noqa: S307  (the test's own literals)
        return tuple(result)


def engine(**kwargs) -> RolloutEngine:
    model, tokenizer = build_tiny_policy(num_layers=1, hidden_size=32, seed=0)
    settings = dict(num_slots=2, max_turns=2, max_action_tokens=4, max_episode_tokens=200)
    return RolloutEngine(model, tokenizer, on_action_cap="submit", **settings, **kwargs)


def run(engine: RolloutEngine, envs: list) -> list:
    requests = iter([EpisodeRequest(env, seed=index) for index, env in enumerate(envs)])
    with engine:
        return list(engine.run(lambda: next(requests, None)))


@pytest.mark.parametrize("env_workers", [0, 2])
def test_a_step_past_the_timeout_stops_the_run_naming_the_env_and_the_step(env_workers):
    with pytest.raises(
        EnvError,
        match=r"^env ToyEnv \(test_env_failures.py\): step 1 of the episode with seed 1 did "
        r"not return within env.step_timeout=0.3 s",
    ):
        run(engine(env_step_timeout=0.3, env_workers=env_workers), [ToyEnv(), ToyEnv("hangs")])


@pytest.mark.parametrize("env_workers", [0, 2])
def test_a_step_past_the_timeout_can_end_just_its_episode(env_workers):
    slow = engine(env_step_timeout=0.3, on_env_step_timeout="end", env_workers=env_workers)
    trajectories = run(slow, [ToyEnv(turns=2), ToyEnv("hangs"), ToyEnv(turns=2)])
    by_seed = {t.seed: t for t in trajectories}
    assert sorted(by_seed) == [0, 1, 2]
    hung = by_seed[1]
    assert hung.truncated and hung.info[TRUNCATED_BY_KEY] == "step_timeout"
    assert hung.behavior == "step_timeout" and hung.total_reward == 0.0 and hung.env_steps == 1
    for seed in (0, 2):  # the others ran to their end
        assert by_seed[seed].behavior == "spoke" and by_seed[seed].total_reward == 2.0


def test_a_reset_past_the_timeout_always_stops_the_run():
    slow = engine(env_step_timeout=0.3, on_env_step_timeout="end")
    with pytest.raises(EnvError, match=r"env ToyEnv .*: reset \(seed 0\) did not return within"):
        run(slow, [ToyEnv("reset_hangs")])


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            "raises",
            r"step 1 of the episode with seed 0 raised ZeroDivisionError: the simulator divided "
            r"by zero \(at test_env_failures.py:\d+\)",
        ),
        ("reset_raises", r"reset \(seed 0\) raised KeyError: 'missing task table' \(at test_env"),
        ("observation={'text': 'ok'}", r"step 1: observation is a dict; expected a str"),
        ("reward=float('nan')", r"step 1: reward is nan; rewards must be finite numbers"),
        ("reward=float('inf')", r"step 1: reward is inf; rewards must be finite numbers"),
        ("reward='1.0'", r"step 1: reward is a str; expected a number"),
        ("terminated='yes'", r"step 1: terminated is a str; expected a bool"),
        ("info=None", r"step 1: info is a NoneType; expected a dict"),
    ],
)
def test_a_broken_env_is_named_with_the_call_and_the_field(fault, message):
    for timeout in (None, 30.0):  # the plain inline call and the one with a deadline
        with pytest.raises(EnvError, match=r"^env ToyEnv \(test_env_failures.py\): " + message):
            run(engine(env_step_timeout=timeout), [ToyEnv(fault)])


#: A user's task module for the command line: the fault comes from the env kwargs.
TASK_MODULE = textwrap.dedent("""
    import math, threading, gymnasium
    from sao_online.environments import DriftingTextEnv, TurnResult

    EPISODES = [0]  # in this process (every episode gets a new env instance)

    class Faulty(DriftingTextEnv):
        description = "Say anything; the answer may hang, raise or be malformed."
        drift_space = {"side": ["left", "right"]}

        def __init__(self, fault="", every=1):
            super().__init__()
            self.fault, self.every = fault, every

        def _begin_episode(self):
            EPISODES[0] += 1
            self.episode = EPISODES[0]
            return "say something", {}

        def _respond(self, action):
            faulty = self.episode % self.every == 0
            if faulty and self.fault == "hang":
                threading.Event().wait()
            if faulty and self.fault == "raise":
                raise RuntimeError("the tool server is down")
            reward = math.nan if faulty and self.fault == "nan" else 1.0
            observation = {"text": "ok"} if faulty and self.fault == "dict" else "ok"
            return TurnResult(observation, reward, terminated=True, behavior="spoke")

        def oracle_action(self, observation, info):
            return "x"

        def oracle_reward(self, theta):
            return 1.0

    gymnasium.register("faulty_tasks/Faulty-v0", entry_point=Faulty)
""")


def cli_run(tmp_path: Path, backend: str, **env: object) -> subprocess.CompletedProcess:
    (tmp_path / "faulty_tasks.py").write_text(TASK_MODULE)
    config = tmp_path / "c.yaml"
    settings = {
        "env": {"id": "faulty_tasks:faulty_tasks/Faulty-v0", "step_timeout": 2, **env},
        "model": model_section(),
        "rollout": {
            "batch_size": 4,
            "max_turns": 1,
            "max_action_tokens": 4,
            "max_episode_tokens": 96,
            "on_action_cap": "submit",  # every episode reaches the env
        },
        "runtime": {"backend": backend, "num_workers": 1, "torch_threads": 1},
        "budget": {"episodes": 8},
        "logging": {"transcripts_every": 0},
    }
    config.write_text(yaml.safe_dump(settings))
    command = Path(sys.executable).parent / "sao-online"
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "SAO_ONLINE_CACHE": str(tmp_path)}
    environment.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(command), "run", str(config), "--out", str(tmp_path / "run")],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,  # not a speed bound: the defect was a run that never ended
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("backend", "fault", "message"),
    [
        ("sync", "hang", r"step 1 of the episode with seed \d+ did not return within "),
        ("local", "hang", r"step 1 of the episode with seed \d+ did not return within "),
        ("local", "raise", r"raised RuntimeError: the tool server is down \(at faulty_tasks.py:"),
        ("sync", "nan", r"raised ValueError: Faulty._respond: TurnResult.reward is nan; rewards "),
        ("sync", "dict", r"raised TypeError: Faulty._respond: TurnResult.observation is a dict"),
    ],
)
def test_the_command_line_stops_with_one_line_naming_the_env(tmp_path, backend, fault, message):
    result = cli_run(tmp_path, backend, kwargs={"fault": fault, "every": 3})
    # Split at carriage returns too: the progress bar's redraws share a line with the error.
    lines = [line for line in re.split(r"[\r\n]", result.stderr) if line.strip()]
    errors = [line for line in lines if line.startswith("sao-online run: error: ")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert errors[0].startswith(
        "sao-online run: error: env faulty_tasks/Faulty-v0 (faulty_tasks.py): "
    )
    assert re.search(message, errors[0]), errors[0]


@pytest.mark.e2e
def test_a_run_can_end_the_episodes_whose_step_hangs_and_count_them(tmp_path):
    result = cli_run(tmp_path, "sync", kwargs={"fault": "hang", "every": 3}, on_step_timeout="end")
    assert result.returncode == 0, result.stderr[-3000:]
    episodes = pd.concat(
        pd.read_parquet(part) for part in sorted((tmp_path / "run" / "episodes.parquet").iterdir())
    )
    updates = pd.concat(
        pd.read_parquet(part) for part in sorted((tmp_path / "run" / "updates.parquet").iterdir())
    )
    timed_out = episodes["behavior"] == "step_timeout"
    assert len(episodes) == 8 and timed_out.sum() >= 1
    assert (episodes.loc[timed_out, "reward"] == 0.0).all() and episodes["truncated"][
        timed_out
    ].all()
    assert not math.isnan(episodes["reward"].sum())
    assert updates["charts/env_step_timeouts"].sum() == timed_out.sum()
