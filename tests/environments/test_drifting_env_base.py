"""The base class contract: reset options, info keys, seeding, action handling."""

from __future__ import annotations

import gymnasium
import pytest

from sao_online.drift_schedules import Choice, DriftValueError, Range
from sao_online.environments import (
    TEXT_CHARSET,
    ActionTypeError,
    DriftingTextEnv,
    TurnResult,
    printable,
)


class EchoEnv(DriftingTextEnv):
    """Two-turn env that echoes the action back and draws a number with np_random."""

    description = "echo"
    drift_space = {
        "mode": Choice(["loud", "quiet"]),
        "level": Range(0.0, 2.0, default=1.0),
    }

    def _begin_episode(self):
        self.secret = int(self.np_random.integers(1_000_000))
        return f"say something ({self.secret})", {"secret": self.secret}

    def _respond(self, action):
        done = self.turn == 2
        return TurnResult(
            "echo: " + action,
            reward=len(action),
            terminated=done,
            behavior=self.theta["mode"] if done else None,
        )

    def oracle_action(self, observation, info):
        return "hi"

    def oracle_reward(self, theta):
        return 2.0


class NoLabelEnv(EchoEnv):
    def _respond(self, action):
        return TurnResult("done", 0.0, terminated=True)


def test_missing_drift_takes_defaults_and_ranges_become_floats():
    env = EchoEnv()
    _, info = env.reset(seed=0)
    assert info["theta"] == {"mode": "loud", "level": 1.0}
    assert info["phase"] == 0
    _, info = env.reset(options={"drift": {"level": 2}, "phase": 3})
    assert info["theta"] == {"mode": "loud", "level": 2.0}
    assert isinstance(info["theta"]["level"], float)
    assert info["phase"] == 3


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"drift": {"volume": 1}}, "drift.volume"),
        ({"drift": {"mode": "shouting"}}, "drift.mode"),
        ({"drift": {"level": 2.5}}, "drift.level"),
        ({"drift": {"level": "high"}}, "drift.level"),
    ],
)
def test_bad_drift_names_the_parameter(options, named):
    with pytest.raises(DriftValueError, match=named):
        EchoEnv().reset(options=options)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"phase": -1}, "options.phase"),
        ({"phase": 1.0}, "options.phase"),
        ({"phase": True}, "options.phase"),
        ({"drfit": {}}, "options.drfit"),
        ("drift", "options"),
    ],
)
def test_bad_options_are_value_errors_naming_the_key(options, named):
    with pytest.raises(ValueError, match=named):
        EchoEnv().reset(options=options)


def test_phase_and_theta_on_every_step_behavior_only_at_the_end():
    env = EchoEnv()
    env.reset(seed=0, options={"drift": {"mode": "quiet"}, "phase": 2})
    _, reward, terminated, truncated, info = env.step("abc")
    assert (reward, terminated, truncated) == (3.0, False, False)
    assert info["phase"] == 2 and info["theta"]["mode"] == "quiet"
    assert "behavior" not in info
    _, _, terminated, _, info = env.step("x")
    assert terminated and info["behavior"] == "quiet"


def test_infos_never_share_the_theta_dict():
    env = EchoEnv()
    _, reset_info = env.reset(seed=0)
    _, _, _, _, step_info = env.step("a")
    step_info["theta"]["mode"] = "quiet"
    assert reset_info["theta"]["mode"] == "loud"
    assert env.theta["mode"] == "loud"


def test_seeding_goes_through_np_random():
    env = EchoEnv()
    first = env.reset(seed=7)[1]["secret"]
    second = env.reset()[1]["secret"]
    assert env.reset(seed=7)[1]["secret"] == first
    assert env.reset()[1]["secret"] == second
    assert first != second


def test_step_without_a_running_episode_asks_for_reset():
    env = EchoEnv()
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step("a")
    env.reset(seed=0)
    env.step("a")
    env.step("b")
    with pytest.raises(gymnasium.error.ResetNeeded, match="reset"):
        env.step("c")


def test_bytes_are_decoded_and_non_text_actions_raise_a_value_error():
    env = EchoEnv()
    env.reset(seed=0)
    observation, *_ = env.step("héllo".encode())
    assert observation == "echo: h?llo"
    env.reset(seed=0)
    with pytest.raises(ActionTypeError, match="int") as caught:
        env.step(5)
    assert isinstance(caught.value, ValueError)


def test_observations_are_kept_inside_the_text_space():
    env = EchoEnv()
    env.reset(seed=0)
    observation, *_ = env.step("\u2603\t\x00" + "z" * 5000)
    assert observation.startswith("echo: ???z")
    assert len(observation) == env.max_observation_length
    assert observation in env.observation_space


def test_ending_an_episode_without_a_behavior_label_is_a_bug_reported_by_name():
    env = NoLabelEnv()
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match="NoLabelEnv._respond"):
        env.step("a")


def test_printable_and_charset():
    assert len(TEXT_CHARSET) == 96 and "\n" in TEXT_CHARSET and "\t" not in TEXT_CHARSET
    assert printable("ok\n~", limit=None) == "ok\n~"
    assert printable("a\u00e9b\r", limit=3) == "a?b"
