"""Drift spaces written in plain Python (lists and (low, high) tuples), plain Gymnasium envs
under DriftWrapper, and the registry's errors and listings for a user's own tasks."""

from __future__ import annotations

import gymnasium
import pytest

from sao_online.drift_schedules import Choice, DriftValueError, Range, load_schedule
from sao_online.environments import (
    DriftingTextEnv,
    DriftWrapper,
    EnvNotFoundError,
    TurnResult,
    check_env_id,
    list_envs,
)


class PlainEnv(gymnasium.Env):
    """A plain Gymnasium env (not a DriftingTextEnv) that reports no phase or theta."""

    drift_space = {"side": ["heads", "tails"], "noise": (0.0, 0.5)}

    def __init__(self):
        self.observation_space = gymnasium.spaces.Text(64)
        self.action_space = gymnasium.spaces.Text(64)
        self.side = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.side = (options or {}).get("drift", {}).get("side", "heads")
        return "Heads or tails?", {"own": 1}

    def step(self, action):
        return "done", float(action == self.side), True, False, {"own": 2}


class ListTask(DriftingTextEnv):
    description = "Pick a side."
    drift_space = {"side": ["heads", "tails"], "noise": (0, 1)}

    def _begin_episode(self):
        return "Pick.", {}

    def _respond(self, action):
        return TurnResult(
            "ok",
            float(action == self.theta["side"]),
            terminated=True,
            behavior=action[:8] or "empty",
        )

    def oracle_action(self, observation, info):
        return info["theta"]["side"]

    def oracle_reward(self, theta):
        return 1.0


def side_schedule(at):
    return load_schedule(
        {"parameters": {"side": {"kind": "abrupt", "values": ["heads", "tails"], "at": at}}}
    )


def test_a_subclass_with_a_plain_list_and_tuple_gets_choice_and_range():
    assert ListTask.drift_space == {"side": Choice(["heads", "tails"]), "noise": Range(0.0, 1.0)}
    env = ListTask()
    _, info = env.reset(seed=0)
    assert info["theta"] == {"side": "heads", "noise": 0.0}  # defaults: first value, low end
    _, info = env.reset(seed=0, options={"drift": {"side": "tails", "noise": 1}})
    assert info["theta"] == {"side": "tails", "noise": 1.0}
    with pytest.raises(DriftValueError, match=r"drift\.side: value 'edge' is not allowed"):
        env.reset(options={"drift": {"side": "edge"}})


@pytest.mark.parametrize(
    "space, message",
    [
        ({"side": "heads"}, r"drift_space\.side: expected a list \(choices\)"),
        ({"side": ("heads", "tails")}, r"drift_space\.side: a tuple means a \(low, high\) range"),
        ({"noise": (1.0, 0.0)}, r"drift_space\.noise: range needs low <= high"),
        ({"side": []}, r"drift_space\.side: an empty list"),
    ],
)
def test_a_bad_plain_space_is_refused_when_the_class_is_made(space, message):
    with pytest.raises(DriftValueError, match=message):
        type("Bad", (ListTask,), {"drift_space": space})


def test_a_plain_gymnasium_env_under_the_wrapper_reports_the_schedules_phase_and_theta():
    env = DriftWrapper(PlainEnv(), side_schedule([0, 2]))
    seen = []
    for episode in range(4):
        _, reset_info = env.reset(seed=episode)
        _, reward, _, _, info = env.step("heads")
        assert reset_info["phase"] == info["phase"] and reset_info["theta"] == info["theta"]
        assert info["own"] == 2  # the env's own entries stay
        seen.append((info["phase"], info["theta"], reward))
    heads, tails = {"side": "heads", "noise": 0.0}, {"side": "tails", "noise": 0.0}
    assert seen == [(0, heads, 1.0), (0, heads, 1.0), (1, tails, 0.0), (1, tails, 0.0)]


def test_the_wrapper_refuses_a_schedule_value_outside_a_plain_space():
    schedule = load_schedule(
        {"parameters": {"side": {"kind": "abrupt", "values": ["heads", "edge"], "at": [0, 2]}}}
    )
    with pytest.raises(DriftValueError, match="parameters.side"):
        DriftWrapper(PlainEnv(), schedule)


def test_an_unregistered_id_gets_one_line_saying_how_to_register_or_import_it():
    with pytest.raises(EnvNotFoundError) as caught:
        check_env_id("my_tasks/GuessRange-v0")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("env.id: 'my_tasks/GuessRange-v0': not a registered environment")
    assert "'MODULE:my_tasks/GuessRange-v0'" in message and "gymnasium.register" in message
    with pytest.raises(EnvNotFoundError, match=r"cannot import module 'no_such_tasks_module'"):
        check_env_id("no_such_tasks_module:my_tasks/GuessRange-v0")


def test_a_module_prefixed_id_imports_the_module_that_registers_it(tmp_path, monkeypatch):
    (tmp_path / "plain_space_tasks.py").write_text(
        "import gymnasium\n"
        "from sao_online.environments import DriftingTextEnv\n"
        "class ListTask(DriftingTextEnv):\n"
        "    description = 'Pick a side.'\n"
        "    drift_space = {'side': ['heads', 'tails'], 'noise': (0, 1)}\n"
        "gymnasium.register('plain_space_tasks/Pick-v0', entry_point=ListTask)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    check_env_id("plain_space_tasks:plain_space_tasks/Pick-v0")
    [(env_id, description, space)] = list_envs(ids=["plain_space_tasks/Pick-v0", "CartPole-v1"])
    assert (env_id, description) == ("plain_space_tasks/Pick-v0", "Pick a side.")
    assert space == {"side": Choice(["heads", "tails"]), "noise": Range(0.0, 1.0)}
    assert list_envs("plain_space_tasks") == [(env_id, description, space)]


def test_envs_import_lists_a_users_tasks_and_refuses_a_module_without_any(
    tmp_path, monkeypatch, capsys
):
    from sao_online.cli import main

    (tmp_path / "listed_user_tasks.py").write_text(
        "import gymnasium\n"
        "class PlainEnv(gymnasium.Env):\n"
        "    'A plain Gymnasium env (not a DriftingTextEnv).'\n"
        "    drift_space = {'side': ['heads', 'tails'], 'noise': (0.0, 0.5)}\n"
        "gymnasium.register('listed_user_tasks/Coin-v0', entry_point=PlainEnv)\n"
    )
    (tmp_path / "empty_user_module.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["envs", "--import", "listed_user_tasks"]) == 0
    out = capsys.readouterr().out
    assert "sao_online/ToolShift-v0" in out
    assert "listed_user_tasks/Coin-v0\n    A plain Gymnasium env" in out
    assert "drift side: one of heads, tails" in out and "drift noise: a number in [0.0, 0.5]" in out
    assert main(["envs", "--import", "empty_user_module"]) == 2
    assert "registered no drifting task" in capsys.readouterr().err
