"""Each schedule kind at hand-picked times, exact boundaries, phases and seeded randomness."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

from sao_online.drift_schedules import DriftState, Schedule, ScheduleError, kinds, random_kinds


def one(spec: dict, *, name: str = "x", seed: int = 0) -> Schedule:
    return Schedule({name: spec}, seed=seed)


def values(schedule: Schedule, times, name: str = "x") -> list:
    return [schedule.at(t).theta[name] for t in times]


def just_before(t: float) -> float:
    return float(np.nextafter(t, -math.inf))


# --- deterministic kinds -------------------------------------------------------------------


def test_stationary_holds_its_value_in_a_single_phase():
    schedule = one({"kind": "stationary", "value": "tags"})
    assert [schedule.at(t) for t in (0, 7.5, 1e9)] == [DriftState(0, {"x": "tags"})] * 3
    assert schedule.change_points() == []


def test_abrupt_values_hold_on_half_open_intervals():
    schedule = one({"kind": "abrupt", "values": ["a", "b", "c"], "at": [0, 5, 10]})
    times = [0, 4, just_before(5), 5, 9.99, 10, 1e6]
    assert values(schedule, times) == ["a", "a", "a", "b", "b", "c", "c"]
    assert [schedule.at(t).phase for t in times] == [0, 0, 0, 1, 1, 2, 2]
    # The 0 is the start, not a change.
    assert schedule.change_points() == [5.0, 10.0]
    assert schedule.change_points(until=9) == [5.0]


def test_abrupt_with_a_repeated_value_still_counts_its_change_point():
    schedule = one({"kind": "abrupt", "values": ["a", "a", "b"], "at": [0, 3, 6]})
    assert [schedule.at(t) for t in (2, 3, 6)] == [
        DriftState(0, {"x": "a"}),
        DriftState(1, {"x": "a"}),
        DriftState(2, {"x": "b"}),
    ]


def test_linear_interpolates_between_start_and_end_and_is_constant_outside():
    schedule = one({"kind": "linear", "from": 0.0, "to": 0.3, "start": 100, "end": 200})
    got = values(schedule, [0, 100, 125, 150, 200, 250])
    assert got == pytest.approx([0.0, 0.0, 0.075, 0.15, 0.3, 0.3])
    assert schedule.change_points() == [100.0]
    assert [schedule.at(t).phase for t in (just_before(100), 100)] == [0, 1]


def test_linear_starting_at_zero_has_no_change_point_and_incremental_is_its_alias():
    schedule = one({"kind": "incremental", "from": 1, "to": 3, "start": 0, "end": 4})
    assert values(schedule, [0, 1, 4]) == [1.0, 1.5, 3.0]
    assert schedule.change_points() == []
    assert schedule.at(3).phase == 0
    assert schedule.to_dict()["parameters"]["x"]["kind"] == "linear"


def test_cyclic_wraps_around_after_every_value():
    schedule = one({"kind": "cyclic", "values": ["a", "b", "c"], "period": 10})
    times = [0, just_before(10), 10, 29.9, 30, 65]
    assert values(schedule, times) == ["a", "a", "b", "c", "a", "a"]
    assert [schedule.at(t).phase for t in times] == [0, 0, 1, 2, 3, 6]
    assert schedule.change_points(until=35) == [10.0, 20.0, 30.0]
    assert schedule.at(1000).phase == 100


def test_cyclic_needs_until_to_list_its_infinitely_many_change_points():
    schedule = one({"kind": "cyclic", "values": ["a", "b"], "period": 10}, name="goal")
    with pytest.raises(ScheduleError, match=r"^until: parameter 'goal' \(cyclic\) has infinitely"):
        schedule.change_points()


def test_cyclic_with_a_fractional_period_keeps_value_phase_and_listed_times_consistent():
    # 3 * 0.1 is 0.30000000000000004 > 0.3: the value and the phase must agree on that.
    schedule = one({"kind": "cyclic", "values": ["a", "b", "c"], "period": 0.1})
    listed = schedule.change_points(until=10)
    assert len(listed) == 100
    for t in [index / 10 for index in range(1, 100)] + listed:
        state = schedule.at(t)
        changes = sum(point <= t for point in listed)
        assert state.phase == changes
        assert state.theta["x"] == ["a", "b", "c"][changes % 3]


# --- phases of composed schedules ------------------------------------------------------------


def test_phase_counts_the_union_of_change_points_once_per_time():
    schedule = Schedule(
        {
            "style": {"kind": "abrupt", "values": ["a", "b"], "at": [0, 150]},
            "slip": {"kind": "linear", "from": 0, "to": 1, "start": 150, "end": 300},
            "tool": {"kind": "gradual", "from": "u", "to": "v", "start": 200, "width": 100},
        }
    )
    # 150 is shared by style and slip; gradual's change point is its midpoint 250.
    assert schedule.change_points() == [150.0, 250.0]
    times = [0, just_before(150), 150, just_before(250), 250, 1e5]
    assert [schedule.at(t).phase for t in times] == [0, 0, 1, 1, 2, 2]


def test_phase_with_unbounded_kinds_matches_the_listed_change_points_in_any_order():
    schedule = Schedule(
        {
            "style": {"kind": "abrupt", "values": ["a", "b"], "at": [0, 100]},
            "goal": {"kind": "cyclic", "values": ["n", "s"], "period": 100},
            "mix": {"kind": "change_points", "values": ["e", "h"], "rate": 0.01},
        },
        seed=3,
    )
    # Read far first, then near: the cached union must serve both.
    far_phase = schedule.at(3000).phase
    listed = schedule.change_points(until=3000)
    assert far_phase == len(listed)
    assert listed == sorted(set(listed))
    assert {100.0, 200.0, 3000.0} <= set(listed)  # shared 100 is counted once
    for t in [0, 99, 100, 101, 250, 999.5, 2000, 2999]:
        assert schedule.at(t).phase == sum(point <= t for point in listed)


def test_paper_protocol_has_three_phases():
    schedule = Schedule(
        {
            "preferred": {
                "kind": "abrupt",
                "values": ["cute", "chuunibyou", "classical"],
                "at": [0, 1500, 3000],
            },
            "pool": {
                "kind": "abrupt",
                "values": ["academic_cute_chuunibyou"] * 2 + ["classical_cute_chuunibyou"],
                "at": [0, 1500, 3000],
            },
        }
    )
    assert schedule.change_points() == [1500.0, 3000.0]
    assert [schedule.at(t).phase for t in (0, 1499, 1500, 2999, 3000, 4000)] == [0, 0, 1, 1, 2, 2]
    assert schedule.at(1500).theta == {
        "preferred": "chuunibyou",
        "pool": "academic_cute_chuunibyou",
    }


@pytest.mark.parametrize("bad_time", [-1, math.nan, math.inf, "5", True, None])
def test_reading_at_a_bad_time_names_t(bad_time):
    schedule = one({"kind": "stationary", "value": 1})
    with pytest.raises(ScheduleError, match="^t: expected a finite clock reading >= 0"):
        schedule.at(bad_time)


def test_numpy_times_are_accepted():
    schedule = one({"kind": "abrupt", "values": ["a", "b"], "at": [0, 5]})
    assert schedule.at(np.int64(5)) == schedule.at(5.0) == DriftState(1, {"x": "b"})


# --- gradual -------------------------------------------------------------------------------


def test_gradual_probability_follows_the_sigmoid_and_the_change_point_is_the_midpoint():
    schedule = one(
        {"kind": "gradual", "from": "calc", "to": "compute", "start": 1000, "width": 200}
    )
    gradual = schedule.parameters["x"]
    assert gradual.probability_to(1000) == pytest.approx(1 / (1 + math.exp(4)))  # 0.018
    assert gradual.probability_to(1100) == 0.5
    assert gradual.probability_to(1200) == pytest.approx(1 / (1 + math.exp(-4)))  # 0.982
    assert schedule.change_points() == [1100.0]
    assert [schedule.at(t).phase for t in (1099, 1100)] == [0, 1]
    # Far from the window the mixture is pure (p < 2e-9 before 600, > 1 - 2e-9 after 1600).
    assert set(values(schedule, range(0, 600))) == {"calc"}
    assert set(values(schedule, range(1600, 2200))) == {"compute"}


@pytest.mark.parametrize("centre", [2000, 4000, 6000])
def test_gradual_mixture_fraction_in_a_window_is_close_to_p(centre):
    schedule = one({"kind": "gradual", "from": 0, "to": 1, "start": 0, "width": 8000}, seed=11)
    gradual = schedule.parameters["x"]
    window = range(centre - 1000, centre + 1000)
    fraction = np.mean(values(schedule, window))
    expected = np.mean([gradual.probability_to(t) for t in window])  # ~0.12, 0.5, 0.88
    # 2000 draws: binomial standard error <= 0.011.
    assert abs(fraction - expected) < 0.04


def test_gradual_draws_are_pure_and_seeded():
    spec = {"kind": "gradual", "from": "a", "to": "b", "start": 0, "width": 400}
    times = range(0, 400)
    first = values(one(spec, seed=5), times)
    assert values(one(spec, seed=5), reversed(times))[::-1] == first
    assert values(one(spec, seed=6), times) != first
    assert values(one(spec, seed=5, name="y"), times, name="y") != first
    assert 100 < first.count("b") < 300


# --- random walk ---------------------------------------------------------------------------


def test_random_walk_starts_at_start_and_is_constant_between_integers():
    schedule = one({"kind": "random_walk", "start": 0.1, "step": 0.02, "low": 0.0, "high": 0.5})
    assert schedule.at(0).theta["x"] == 0.1
    assert schedule.at(0.99).theta["x"] == 0.1
    assert schedule.at(3.7).theta["x"] == schedule.at(3).theta["x"]
    assert schedule.change_points() == []
    assert schedule.at(5000).phase == 0


def test_random_walk_steps_are_gaussian_with_scale_step_when_unclipped():
    schedule = one(
        {"kind": "random_walk", "start": 0, "step": 0.5, "low": -1e9, "high": 1e9}, seed=2
    )
    path = np.array(values(schedule, range(5001)))
    increments = np.diff(path)
    assert np.std(increments) == pytest.approx(0.5, rel=0.1)
    assert abs(np.mean(increments)) < 0.05
    # The walk is generated in blocks of 1024 steps: each block must draw fresh increments.
    first_block, second_block = increments[:1000], increments[1024:2024]
    assert abs(np.corrcoef(first_block, second_block)[0, 1]) < 0.15


def test_random_walk_is_clipped_and_independent_of_access_order():
    spec = {"kind": "random_walk", "start": 0.0, "step": 1.0, "low": 0.0, "high": 0.05}
    in_order = values(one(spec, seed=4), range(3000))  # crosses two cache blocks
    backwards = one(spec, seed=4)
    assert values(backwards, reversed(range(3000)))[::-1] == in_order
    assert all(0.0 <= value <= 0.05 for value in in_order)
    assert {0.0, 0.05} <= set(in_order)  # a step of 1 hits both bounds
    assert values(one(spec, seed=5), range(3000)) != in_order


# --- random change points ------------------------------------------------------------------


def test_change_points_move_to_the_next_value_cyclically_at_each_change():
    schedule = one({"kind": "change_points", "values": ["a", "b", "c"], "rate": 0.01}, seed=1)
    points = schedule.change_points(until=5000)
    assert 25 < len(points) < 80  # Poisson with mean 50
    assert points == sorted(points) and points[0] > 0
    assert schedule.at(just_before(points[0])).theta["x"] == "a"
    for index, point in enumerate(points):
        assert schedule.at(point) == DriftState(index + 1, {"x": "abc"[(index + 1) % 3]})
        assert schedule.at(just_before(point)).phase == index


def test_change_point_gaps_average_one_over_the_rate():
    schedule = one({"kind": "change_points", "values": [0, 1], "rate": 0.01}, seed=7)
    gaps = np.diff([0.0, *schedule.change_points(until=200_000)])
    assert len(gaps) > 1500
    assert np.mean(gaps) == pytest.approx(100, rel=0.1)


def test_change_points_are_seeded_and_independent_of_access_order():
    spec = {"kind": "change_points", "values": ["a", "b"], "rate": 0.05}
    reference = one(spec, seed=9).change_points(until=2000)
    late_first = one(spec, seed=9)
    late_first.at(100_000)
    assert late_first.change_points(until=2000) == reference
    assert one(spec, seed=10).change_points(until=2000) != reference
    with pytest.raises(ScheduleError, match=r"^until: parameter 'x' \(change_points\)"):
        one(spec).change_points()


# --- purity across threads and processes ---------------------------------------------------

SEEDED = {
    "tool": {"kind": "gradual", "from": "calc", "to": "compute", "start": 0, "width": 400},
    "failure": {"kind": "random_walk", "start": 0.1, "step": 0.05, "low": 0.0, "high": 0.5},
    "mix": {"kind": "change_points", "values": ["easy", "hard"], "rate": 0.02},
}


def test_threads_reading_a_fresh_schedule_see_what_one_thread_sees():
    times = [(index * 7919) % 5000 for index in range(400)]  # scattered, out of order
    expected = [Schedule(SEEDED, seed=1).at(t) for t in times]
    shared = Schedule(SEEDED, seed=1)
    results: dict[int, list[DriftState]] = {}

    def read(worker: int) -> None:
        results[worker] = [shared.at(t) for t in times[worker::4]]

    workers = [threading.Thread(target=read, args=(worker,)) for worker in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for worker in range(4):
        assert results[worker] == expected[worker::4]


def test_draws_do_not_depend_on_the_process_hash_seed():
    # Python salts str hashes per process; the draws must come from a stable hash instead.
    times = [0, 150, 200, 250, 1234, 4999]
    program = (
        "import json, sys; from sao_online.drift_schedules import Schedule; "
        "schedule = Schedule(json.loads(sys.argv[1]), seed=1); "
        "print(json.dumps([schedule.at(t).theta for t in json.loads(sys.argv[2])]))"
    )
    other_process = subprocess.run(
        [sys.executable, "-c", program, json.dumps(SEEDED), json.dumps(times)],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    here = [Schedule(SEEDED, seed=1).at(t).theta for t in times]
    assert json.loads(other_process.stdout) == here


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"kind": "cyclic", "values": ["a", "b"], "period": 0.5},
            "parameters.x.period: 20000 change points up to t=10000",
        ),
        (
            {"kind": "change_points", "values": ["a", "b"], "rate": 10},
            "parameters.x.rate: more than 1000 change points",
        ),
    ],
)
def test_a_rate_or_period_in_the_wrong_unit_is_refused_not_run_out_of_memory(
    spec, message, monkeypatch
):
    # The real limit (a million) would make this test slow; the check is the same.
    monkeypatch.setattr(kinds, "MAX_CHANGE_POINTS", 1000)
    monkeypatch.setattr(random_kinds, "MAX_CHANGE_POINTS", 1000)
    with pytest.raises(ScheduleError, match="^" + re.escape(message)):
        one(spec).at(10_000)
