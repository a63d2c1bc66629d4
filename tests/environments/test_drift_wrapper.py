"""DriftWrapper: the schedule decides theta and phase at each reset, read on the right clock."""

from __future__ import annotations

import gymnasium
import pytest

from sao_online.drift_schedules import DriftState, DriftValueError, load_schedule, validate_theta
from sao_online.environments import DriftWrapper, StyleShiftEnv, ToolShiftEnv


class StepSchedule:
    """A minimal schedule: ``preferred`` is cute before t=2, chuunibyou from t=2 on."""

    def __init__(self, values=("cute", "chuunibyou"), switch_at=2.0):
        self.values = values
        self.switch_at = switch_at
        self.asked = []
        self.validated_against = None

    def at(self, t):
        self.asked.append(t)
        phase = int(t >= self.switch_at)
        return DriftState(phase, {"preferred": self.values[phase]})

    def validate(self, drift_space):
        self.validated_against = drift_space
        for value in self.values:
            validate_theta(drift_space, {"preferred": value}, where="parameters")
        return self


class FixedClock:
    def __init__(self, t):
        self.t = t

    def now(self):
        return self.t


def test_episode_clock_first_reset_sees_zero_and_theta_follows_the_schedule():
    schedule = StepSchedule()
    env = DriftWrapper(StyleShiftEnv(), schedule)
    seen = []
    for episode in range(4):
        _, info = env.reset(seed=episode)
        seen.append((info["world_time"], info["phase"], info["theta"]["preferred"]))
        env.step("Nya~ something")
    assert seen == [
        (0.0, 0, "cute"),
        (1.0, 0, "cute"),
        (2.0, 1, "chuunibyou"),
        (3.0, 1, "chuunibyou"),
    ]
    assert schedule.asked == [0.0, 1.0, 2.0, 3.0]
    assert env.episodes_started == 4


def test_a_given_clock_is_read_at_each_reset_and_world_time_is_on_every_step():
    clock = FixedClock(7.5)
    env = DriftWrapper(StyleShiftEnv(), StepSchedule(), clock=clock)
    _, info = env.reset(seed=0)
    assert (info["world_time"], info["phase"]) == (7.5, 1)
    clock.t = 1.0
    *_, step_info = env.step("Kukuku, x")
    assert step_info["world_time"] == 7.5  # the episode's start time, not the current reading
    _, info = env.reset(seed=0)
    assert (info["world_time"], info["theta"]["preferred"]) == (1.0, "cute")


def test_schedule_is_validated_against_the_drift_space_at_construction():
    schedule = StepSchedule()
    DriftWrapper(gymnasium.make("sao_online/StyleShift-v0"), schedule)
    assert schedule.validated_against == StyleShiftEnv.drift_space
    with pytest.raises(DriftValueError, match="parameters.preferred"):
        DriftWrapper(StyleShiftEnv(), StepSchedule(values=("cute", "poetic")))
    with pytest.raises(DriftValueError, match="parameters.preferred"):
        DriftWrapper(ToolShiftEnv(), StepSchedule())


@pytest.mark.parametrize("key", ["drift", "phase"])
def test_the_schedule_owns_drift_so_a_callers_drift_or_phase_is_an_error(key):
    env = DriftWrapper(StyleShiftEnv(), StepSchedule())
    with pytest.raises(ValueError, match=f"options.{key}: DriftWrapper takes"):
        env.reset(options={key: {"preferred": "classical"} if key == "drift" else 3})
    assert env.episodes_started == 0  # a refused reset does not advance the episode clock


def test_other_options_pass_through_to_the_environment():
    env = DriftWrapper(StyleShiftEnv(), StepSchedule())
    with pytest.raises(ValueError, match="options.verbose"):
        env.reset(options={"verbose": True})


@pytest.mark.parametrize(
    ("make_args", "named"),
    [
        (lambda: (gymnasium.make("CartPole-v1"), StepSchedule(), None), "drift_space"),
        (lambda: (StyleShiftEnv(), object(), None), "schedule"),
        (lambda: (StyleShiftEnv(), StepSchedule(), object()), "clock"),
    ],
)
def test_construction_errors_name_the_argument(make_args, named):
    with pytest.raises(ValueError, match=named):
        DriftWrapper(*make_args())


def test_with_a_real_schedule_the_paper_protocol_plays_out():
    schedule = load_schedule(
        {
            "clock": "episodes",
            "seed": 0,
            "parameters": {
                "preferred": {
                    "kind": "abrupt",
                    "values": ["cute", "chuunibyou", "classical"],
                    "at": [0, 2, 4],
                },
                "pool": {
                    "kind": "abrupt",
                    "values": ["academic_cute_chuunibyou", "classical_cute_chuunibyou"],
                    "at": [0, 4],
                },
            },
        }
    )
    env = DriftWrapper(gymnasium.make("sao_online/StyleShift-v0"), schedule)
    rows = []
    for episode in range(6):
        observation, info = env.reset(seed=episode)
        action = env.unwrapped.oracle_action(observation, info)
        _, reward, _, _, info = env.step(action)
        rows.append((info["phase"], info["behavior"], reward, "classical" in observation))
    assert (
        rows
        == [(0, "cute", 1.0, False)] * 2
        + [(1, "chuunibyou", 1.0, False)] * 2
        + [(2, "classical", 1.0, True)] * 2
    )


def test_a_real_schedule_on_another_clock_needs_that_clock():
    schedule = load_schedule(
        {
            "clock": "steps",
            "seed": 0,
            "parameters": {
                "failure": {"kind": "linear", "from": 0.0, "to": 0.5, "start": 0, "end": 100}
            },
        }
    )
    with pytest.raises(ValueError, match="clock: the schedule counts steps"):
        DriftWrapper(ToolShiftEnv(), schedule)
    env = DriftWrapper(ToolShiftEnv(), schedule, clock=FixedClock(50.0))
    _, info = env.reset(seed=0)
    assert info["theta"]["failure"] == pytest.approx(0.25)
