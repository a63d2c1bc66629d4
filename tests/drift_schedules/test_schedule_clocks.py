"""Clocks: readings, atomic advances under threads, checkpoints, and the episode convention."""

from __future__ import annotations

import math
import pickle
import threading

import pytest

from sao_online.drift_schedules import (
    EpisodeClock,
    ManualClock,
    Schedule,
    ScheduleError,
    StepClock,
    VersionClock,
    WallClock,
    make_clock,
)


class FakeTimer:
    """A monotonic timer the test moves by hand."""

    def __init__(self, start: float) -> None:
        self.seconds = start

    def __call__(self) -> float:
        return self.seconds


def test_episode_clock_returns_the_reading_before_each_advance():
    clock = EpisodeClock()
    assert clock.now() == 0.0
    assert clock.advance() == 0.0  # the first episode sees t = 0
    assert clock.advance() == 1.0
    assert clock.now() == 2.0
    assert clock.advance(3) == 2.0
    assert clock.now() == 5.0


def test_sixth_episode_is_the_first_of_phase_one():
    schedule = Schedule({"preferred": {"kind": "abrupt", "values": ["a", "b"], "at": [0, 5]}})
    clock = schedule.make_clock()
    phases = [schedule.at(clock.advance()).phase for _ in range(7)]
    assert phases == [0, 0, 0, 0, 0, 1, 1]


@pytest.mark.parametrize("clock_class", [EpisodeClock, StepClock])
@pytest.mark.parametrize("bad_count", [-1, 1.5, True, "2", None])
def test_advance_rejects_bad_counts(clock_class, bad_count):
    with pytest.raises(ValueError, match="^n must be an integer >= 0"):
        clock_class().advance(bad_count)


@pytest.mark.parametrize(("clock_class", "amount"), [(EpisodeClock, 1), (StepClock, 3)])
def test_threads_hammering_advance_each_get_distinct_readings(clock_class, amount):
    clock = clock_class()
    threads_count, advances_per_thread = 8, 2000
    readings: list[list[float]] = [[] for _ in range(threads_count)]
    barrier = threading.Barrier(threads_count)

    def hammer(index: int) -> None:
        barrier.wait()
        for _ in range(advances_per_thread):
            readings[index].append(clock.advance(amount))

    workers = [threading.Thread(target=hammer, args=(index,)) for index in range(threads_count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    total = threads_count * advances_per_thread
    assert clock.now() == float(total * amount)
    seen = sorted(reading for per_thread in readings for reading in per_thread)
    assert seen == [float(index * amount) for index in range(total)]


def test_version_clock_moves_forward_only():
    clock = VersionClock()
    clock.set(3)
    assert clock.now() == 3.0
    clock.set(3)
    with pytest.raises(ValueError, match="^version must not go backwards: at 3, got 2"):
        clock.set(2)
    with pytest.raises(ValueError, match="^version must be an integer >= 0"):
        clock.set(4.5)


def test_wall_clock_counts_seconds_since_start_and_resumes_from_a_checkpoint():
    timer = FakeTimer(100.0)
    clock = WallClock(timer=timer)
    timer.seconds = 103.5
    assert clock.now() == 3.5
    clock.start()
    timer.seconds = 104.0
    assert clock.now() == 0.5
    state = clock.state_dict()
    assert state == {"clock": "seconds", "elapsed": 0.5}
    # Restored in a new process whose timer reads something unrelated: it counts on from 0.5.
    other_timer = FakeTimer(7.0)
    resumed = WallClock(timer=other_timer)
    resumed.load_state_dict(state)
    other_timer.seconds = 9.0
    assert resumed.now() == 2.5


def test_wall_clock_on_the_real_timer_does_not_go_back():
    clock = WallClock()
    readings = [clock.now() for _ in range(100)]
    assert readings[0] >= 0 and readings == sorted(readings)


def test_manual_clock_takes_any_valid_reading_in_any_order():
    clock = ManualClock()
    assert clock.now() == 0.0
    clock.set(7.5)
    clock.set(2)
    assert clock.now() == 2.0
    for bad in (-1, math.nan, math.inf, "3"):
        with pytest.raises(ValueError, match="^t must be a finite number >= 0"):
            clock.set(bad)


@pytest.mark.parametrize(
    ("clock", "move", "state"),
    [
        (EpisodeClock(), lambda clock: clock.advance(4), {"clock": "episodes", "count": 4}),
        (StepClock(), lambda clock: clock.advance(9), {"clock": "steps", "count": 9}),
        (VersionClock(), lambda clock: clock.set(2), {"clock": "versions", "version": 2}),
        (ManualClock(), lambda clock: clock.set(1.25), {"clock": "manual", "t": 1.25}),
    ],
)
def test_state_dict_round_trips_and_pickles(clock, move, state):
    move(clock)
    assert clock.state_dict() == state
    fresh = type(clock)()
    fresh.load_state_dict(state)
    assert fresh.now() == clock.now()
    copied = pickle.loads(pickle.dumps(clock))
    assert copied.state_dict() == state
    # The copy has a working lock of its own.
    if hasattr(copied, "advance"):
        copied.advance()
        assert copied.now() == clock.now() + 1


def test_load_state_dict_rejects_another_clock_or_a_bad_field():
    with pytest.raises(
        ValueError, match="^state_dict.clock: expected a 'episodes' clock state, got 'steps'"
    ):
        EpisodeClock().load_state_dict({"clock": "steps", "count": 3})
    with pytest.raises(ValueError, match="^state_dict.count must be an integer >= 0"):
        EpisodeClock().load_state_dict({"clock": "episodes", "count": -3})


def test_make_clock_knows_the_four_yaml_names():
    made = {name: type(make_clock(name)) for name in ("episodes", "steps", "versions", "seconds")}
    assert made == {
        "episodes": EpisodeClock,
        "steps": StepClock,
        "versions": VersionClock,
        "seconds": WallClock,
    }
    assert isinstance(make_clock(), EpisodeClock)
    with pytest.raises(ScheduleError, match="^clock: unknown clock 'manual'"):
        make_clock("manual")
    assert isinstance(Schedule({}, clock="versions").make_clock(), VersionClock)
