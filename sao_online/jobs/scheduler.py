"""Which benchmark job starts next: the most work first, on counted cores, after what it needs.

A benchmark is a few warm starts (one per distinct warm start its tasks use, built once and
shared by every method and seed) and many runs, each of which needs its task's warm start. Run
in a fixed order (every warm start, then every run), the machine idles twice: while the longest
warm start finishes alone, and at the end, behind whichever long run started last. This module
is list scheduling with estimated costs instead:

- a job is *ready* once the job it needs (``after``) has succeeded; a job whose need failed
  never runs (it is dropped, and said so);
- whenever cores are free, ready jobs start in order of ``rank`` (lower first: the benchmark
  ranks warm starts before runs, and runs seed by seed, so a benchmark stopped midway holds
  whole seeds), then of *priority*, highest first: a job's estimated cost plus the cost of the
  jobs that wait for it (a warm start unlocks all of its runs), so long work starts early and
  short runs fill the end; ties go by name. Estimates of jobs not started yet may be revised
  at any time (the benchmark revises them from each job it measures);
- a job holds ``cores`` cores while it runs (a run's learner plus its rollout workers, each one
  torch thread), never more than the machine has; a ready job that does not fit lets a later
  one that does start first, so no core waits while some ready job would fit on it.

``plan`` runs the same scheduler on a simulated clock, each job taking its cost spread over its
cores, which gives the schedule's makespan and core share as estimated before anything runs;
the tests use it to check schedules computed by hand.

Example:
    >>> jobs = [Work("warm", 4.0), Work("a", 1.0, after="warm"), Work("b", 3.0)]
    >>> p = plan(jobs, cores=2)
    >>> p.starts == {"warm": 0.0, "b": 0.0, "a": 4.0}, p.makespan
    (True, 5.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    """One job as the scheduler sees it.

    Attributes:
        name: unique among the jobs.
        cost: estimated CPU seconds (all of its processes together).
        cores: cores it keeps busy while it runs (clamped to the machine's).
        after: the name of the job that must succeed before this one starts.
        rank: lower ranks start first when both are ready (before priority counts).
    """

    name: str
    cost: float
    cores: int = 1
    after: str | None = None
    rank: int = 0


class CoreScheduler:
    """Starts ready jobs onto free cores in order of rank, then priority (see the module).

    The caller asks ``start_now()`` which jobs to start, starts them, and tells ``ended(name,
    succeeded)`` when each one is over; ``waiting`` says whether jobs are still to start;
    ``revise`` takes better estimates of the waiting jobs' costs as they come. The
    clock (``time.monotonic`` unless given) measures ``allotted_core_seconds``: the integral of
    the cores held by running jobs over time.

    Raises:
        ValueError: duplicate names, an ``after`` naming no job (or a cycle), a negative cost
            or fewer than one core.
    """

    def __init__(
        self,
        work: Sequence[Work],
        cores: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if cores < 1:
            raise ValueError(f"cores: must be >= 1, got {cores}")
        self.cores = cores
        self._work = {item.name: item for item in work}
        if len(self._work) != len(work):
            names = [item.name for item in work]
            duplicate = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"two jobs are named {duplicate!r}")
        for item in work:
            if item.cost < 0 or item.cores < 1:
                raise ValueError(f"job {item.name!r}: cost must be >= 0 and cores >= 1")
            if item.after is not None and item.after not in self._work:
                raise ValueError(f"job {item.name!r}: after {item.after!r}, which is no job")
        self._dependents: dict[str, list[str]] = {name: [] for name in self._work}
        for item in work:
            if item.after is not None:
                self._dependents[item.after].append(item.name)
        self._cost = {item.name: item.cost for item in work}
        self._prioritize()
        self._waiting = {item.name for item in work}
        self._running: dict[str, int] = {}  # name -> cores held
        self._succeeded: set[str] = set()
        self._clock = clock
        self._last = clock()
        self.allotted_core_seconds = 0.0

    def _prioritize(self) -> None:
        self.priority = {name: self._unlocked_cost(name) for name in self._work}
        self._order = sorted(
            self._work.values(),
            key=lambda item: (item.rank, -self.priority[item.name], item.name),
        )

    def _unlocked_cost(self, name: str, seen: frozenset[str] = frozenset()) -> float:
        """The job's cost plus that of every job waiting on it, directly or not."""
        if name in seen:
            raise ValueError(f"job {name!r}: its 'after' chain loops back to it")
        return self._cost[name] + sum(
            self._unlocked_cost(dependent, seen | {name}) for dependent in self._dependents[name]
        )

    def revise(self, costs: dict[str, float]) -> None:
        """New estimated costs of jobs not started yet (others are ignored): the priorities,
        and so the order of what starts next, follow them."""
        for name, cost in costs.items():
            if name in self._waiting:
                if cost < 0:
                    raise ValueError(f"job {name!r}: cost must be >= 0")
                self._cost[name] = cost
        self._prioritize()

    def width(self, name: str) -> int:
        """Cores the job holds while it runs: its own, at most the machine's."""
        return min(self._work[name].cores, self.cores)

    @property
    def waiting(self) -> bool:
        """Whether some job has not started yet (and was not dropped)."""
        return bool(self._waiting)

    @property
    def running(self) -> list[str]:
        return list(self._running)

    def _tick(self) -> None:
        now = self._clock()
        self.allotted_core_seconds += sum(self._running.values()) * (now - self._last)
        self._last = now

    def start_now(self) -> list[str]:
        """The jobs to start now (each marked as running), in the order to start them."""
        self._tick()
        free = self.cores - sum(self._running.values())
        started = []
        for item in self._order:
            if free == 0:
                break
            if item.name not in self._waiting:
                continue
            if item.after is not None and item.after not in self._succeeded:
                continue
            width = self.width(item.name)
            if width <= free:
                self._waiting.discard(item.name)
                self._running[item.name] = width
                free -= width
                started.append(item.name)
        return started

    def ended(self, name: str, succeeded: bool) -> list[str]:
        """Record that ``name`` is over; return the jobs dropped because it failed (those
        that waited on it, directly or not), which will never start."""
        self._tick()
        if self._running.pop(name, None) is None:
            raise ValueError(f"job {name!r} is not running")
        if succeeded:
            self._succeeded.add(name)
            return []
        dropped, frontier = [], [name]
        while frontier:
            for dependent in self._dependents[frontier.pop()]:
                if dependent in self._waiting:
                    self._waiting.discard(dependent)
                    dropped.append(dependent)
                    frontier.append(dependent)
        return dropped


@dataclass(frozen=True)
class Plan:
    """A schedule simulated with estimated costs: when each job starts and ends (seconds from
    the start), the makespan, and the share of the cores' time the jobs' costs fill."""

    starts: dict[str, float]
    ends: dict[str, float]
    makespan: float
    core_share: float


def plan(work: Sequence[Work], cores: int) -> Plan:
    """Simulate ``CoreScheduler`` on ``work``: each job takes ``cost / cores held`` seconds
    and succeeds. Jobs that end at the same time are ended in name order."""
    now = 0.0
    scheduler = CoreScheduler(work, cores, clock=lambda: now)
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    costs = {item.name: item.cost for item in work}
    while scheduler.waiting or scheduler.running:
        for name in scheduler.start_now():
            starts[name] = now
            ends[name] = now + costs[name] / scheduler.width(name)
        running = scheduler.running
        if not running:  # nothing can start: only jobs whose need can never succeed
            break
        now = min(ends[name] for name in running)
        for name in sorted(name for name in running if ends[name] == now):
            scheduler.ended(name, succeeded=True)
    makespan = max(ends.values(), default=0.0)
    total = sum(costs[name] for name in ends)
    share = total / (makespan * cores) if makespan > 0 else 1.0
    return Plan(starts, ends, makespan, share)
