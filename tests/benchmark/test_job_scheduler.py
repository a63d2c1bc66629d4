"""The benchmark's scheduler on a simulated clock: schedules computed by hand, dependencies,
cores held, failures, and the integral of the cores held (no wall clock anywhere)."""

from __future__ import annotations

import pytest

from sao_online.jobs.scheduler import CoreScheduler, Work, plan


def test_longest_first_fills_two_cores_where_the_given_order_leaves_one_idle():
    # Names in the given order (so neither it nor the names' order is the longest first).
    # LPT: 0-3 d, 0-2 b (ties by name); at 2 c (2-4); at 3 a (3-4): makespan 4, always busy.
    work = [Work("a", 1.0), Work("b", 2.0), Work("c", 2.0), Work("d", 3.0)]
    p = plan(work, cores=2)
    assert p.starts == {"d": 0.0, "b": 0.0, "c": 2.0, "a": 3.0}
    assert p.makespan == 4.0 and p.core_share == 1.0
    # In the given order (ranks force it): a 0-1, b 0-2, c 1-3, d 2-5: makespan 5, share 0.8.
    in_order = [Work(item.name, item.cost, rank=rank) for rank, item in enumerate(work)]
    fifo = plan(in_order, cores=2)
    assert fifo.starts == {"a": 0.0, "b": 0.0, "c": 1.0, "d": 2.0}
    assert fifo.makespan == 5.0 and fifo.core_share == pytest.approx(8 / 10)


def test_runs_start_as_soon_as_their_warm_start_is_built():
    # Warm start W1 (4 s) serves two runs, W2 (1 s) four, each run 1 s, on two cores.
    # Priorities (cost + what waits on it): W1 = 6, W2 = 5, runs 1. By hand:
    #   core 1: W1 0-4, then r1a 4-5, r2d 5-6
    #   core 2: W2 0-1, r2a 1-2, r2b 2-3, r2c 3-4, r1b 4-5
    # makespan 6 for 11 s of work: share 11/12. Warm starts first and runs after (the old
    # two phases) would idle a core from 1 to 4: makespan 4 + 6/2 = 7.
    work = [Work("W1", 4.0), Work("W2", 1.0)]
    work += [Work(f"r1{x}", 1.0, after="W1") for x in "ab"]
    work += [Work(f"r2{x}", 1.0, after="W2") for x in "abcd"]
    p = plan(work, cores=2)
    assert p.starts == {
        "W1": 0.0,
        "W2": 0.0,
        "r2a": 1.0,
        "r2b": 2.0,
        "r2c": 3.0,
        "r1a": 4.0,
        "r1b": 4.0,
        "r2d": 5.0,
    }
    assert p.makespan == 6.0 and p.core_share == pytest.approx(11 / 12)
    assert all(p.starts[f"r1{x}"] >= p.ends["W1"] for x in "ab")
    assert all(p.starts[f"r2{x}"] >= p.ends["W2"] for x in "abcd")


def test_the_priority_counts_the_work_a_job_unlocks():
    scheduler = CoreScheduler(
        [Work("W", 2.0), Work("r1", 3.0, after="W"), Work("r2", 4.0, after="r1"), Work("A", 8)],
        cores=1,
    )
    assert scheduler.priority == {"W": 9.0, "r1": 7.0, "r2": 4.0, "A": 8.0}
    assert scheduler.start_now() == ["W"]  # 9 > 8, though A alone costs more (and sorts first)
    assert scheduler.start_now() == []  # the one core is held


def test_revised_costs_reorder_the_jobs_still_waiting():
    scheduler = CoreScheduler([Work("x", 1.0), Work("y", 2.0), Work("z", 3.0)], cores=1)
    assert scheduler.start_now() == ["z"]
    # z turned out to cost 10 (ignored: it started), and x is now thought to cost 5.
    scheduler.revise({"z": 10.0, "x": 5.0})
    assert scheduler.priority == {"x": 5.0, "y": 2.0, "z": 3.0}
    scheduler.ended("z", succeeded=True)
    assert scheduler.start_now() == ["x"]  # before y, which the first estimates put first
    # A warm start's priority follows its runs' revised costs.
    chained = CoreScheduler([Work("W", 1.0), Work("r", 1.0, after="W"), Work("v", 3.0)], 1)
    assert chained.priority == {"W": 2.0, "r": 1.0, "v": 3.0}
    chained.revise({"r": 4.0})
    assert chained.priority["W"] == 5.0 and chained.start_now() == ["W"]
    with pytest.raises(ValueError, match="job 'v': cost must be >= 0"):
        chained.revise({"v": -1.0})


def test_a_lower_rank_starts_first_whatever_the_priority():
    # Seed 0's runs (rank 1) before seed 1's (rank 2); within a rank, the longest first.
    work = [Work("s1-long", 9.0, rank=2), Work("s0-short", 1.0, rank=1), Work("s0-long", 5, rank=1)]
    assert plan(work, cores=1).starts == {"s0-long": 0.0, "s0-short": 5.0, "s1-long": 6.0}


def test_a_job_holds_its_cores_and_a_narrower_one_fills_a_gap():
    # 3 cores: A (1 core, 6 s) first; B needs 3 cores (its learner and two rollout workers)
    # and does not fit beside A; C (1 core) fits and starts at once. B waits for all three.
    work = [Work("A", 6.0), Work("B", 4.5, cores=3), Work("C", 2.0)]
    scheduler = CoreScheduler(work, cores=3, clock=lambda: 0.0)
    assert scheduler.priority["A"] > scheduler.priority["B"] > scheduler.priority["C"]
    assert scheduler.start_now() == ["A", "C"]
    p = plan(work, cores=3)
    # A 0-6, C 0-2, B 6-7.5 (4.5 CPU seconds on 3 cores).
    assert p.starts == {"A": 0.0, "C": 0.0, "B": 6.0} and p.ends["B"] == 7.5
    assert p.core_share == pytest.approx(12.5 / (7.5 * 3))


def test_a_job_wider_than_the_machine_runs_alone_on_all_of_it():
    scheduler = CoreScheduler([Work("wide", 6.0, cores=5), Work("x", 1.0)], cores=2)
    assert scheduler.width("wide") == 2
    assert scheduler.start_now() == ["wide"]
    assert scheduler.start_now() == []
    assert plan([Work("wide", 6.0, cores=5)], cores=2).makespan == 3.0


def test_a_failed_job_drops_what_waits_on_it_and_the_rest_goes_on():
    work = [
        Work("W1", 3.0),
        Work("W2", 2.0),
        Work("r1", 1.0, after="W1"),
        Work("r1-next", 1.0, after="r1"),
        Work("r2", 1.0, after="W2"),
    ]
    scheduler = CoreScheduler(work, cores=2, clock=lambda: 0.0)
    assert scheduler.start_now() == ["W1", "W2"]
    assert scheduler.ended("W1", succeeded=False) == ["r1", "r1-next"]
    assert scheduler.start_now() == []  # r2 still waits for W2
    assert scheduler.waiting
    assert scheduler.ended("W2", succeeded=True) == []
    assert scheduler.start_now() == ["r2"]
    assert scheduler.ended("r2", succeeded=True) == [] and not scheduler.waiting


def test_allotted_core_seconds_integrate_the_cores_held_over_the_clock():
    now = [0.0]
    work = [Work("wide", 2.0, cores=2), Work("a", 1.0), Work("b", 1.0)]
    scheduler = CoreScheduler(work, cores=3, clock=lambda: now[0])
    assert scheduler.start_now() == ["wide", "a"]  # priorities 2, 1, 1 (ties by name)
    now[0] = 2.0
    scheduler.ended("a", succeeded=True)  # 3 cores x 2 s
    assert scheduler.start_now() == ["b"]
    now[0] = 5.0
    scheduler.ended("wide", succeeded=True)  # + 3 cores x 3 s
    now[0] = 6.0
    scheduler.ended("b", succeeded=True)  # + 1 core x 1 s
    now[0] = 9.0
    assert scheduler.start_now() == []  # nothing held from 6 to 9
    assert scheduler.allotted_core_seconds == 6.0 + 9.0 + 1.0


@pytest.mark.parametrize(
    ("work", "message"),
    [
        ([Work("a", 1.0), Work("a", 2.0)], "two jobs are named 'a'"),
        ([Work("a", 1.0, after="b")], "after 'b', which is no job"),
        ([Work("a", 1.0, after="b"), Work("b", 1.0, after="a")], "loops back"),
        ([Work("a", -1.0)], "cost must be >= 0"),
        ([Work("a", 1.0, cores=0)], "cores >= 1"),
    ],
)
def test_bad_work_is_refused_with_the_job_named(work, message):
    with pytest.raises(ValueError, match=message):
        CoreScheduler(work, cores=2)


def test_ending_a_job_that_is_not_running_is_an_error():
    scheduler = CoreScheduler([Work("a", 1.0)], cores=1)
    with pytest.raises(ValueError, match="'a' is not running"):
        scheduler.ended("a", succeeded=True)
