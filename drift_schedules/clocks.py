"""Clocks: what time means for a schedule (episodes, env steps, learner versions, seconds).

One clock per run, owned by the runtime and shared by whoever reads it: every clock is
thread-safe (reads and updates go through a lock) and can be checkpointed with
``state_dict()`` / ``load_state_dict()`` so a resumed run continues the same timeline.
A clock pickles as a copy of its state, which is how a reading travels to another process;
a worker there holds a :class:`ManualClock` set to the time it was handed.

Example:
    >>> clock = make_clock("episodes")
    >>> clock.advance()          # the first episode starts: it sees t = 0
    0.0
    >>> clock.advance()          # the second sees t = 1
    1.0
    >>> clock.now()              # the next episode would see t = 2
    2.0
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from sao_online.drift_schedules.errors import ScheduleError

#: The clock names a schedule's ``clock:`` field accepts, in the order of the design.
CLOCK_NAMES = ("episodes", "steps", "versions", "seconds")


def check_count(value: Any, what: str) -> int:
    """``value`` as a non-negative int; ``what`` names it in the error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{what} must be an integer >= 0, got {value!r}")
    return int(value)


def check_reading(value: Any, what: str) -> float:
    """``value`` as a finite float >= 0; ``what`` names it in the error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
    return value


class Clock(ABC):
    """A thread-safe source of the time a schedule is read at.

    Subclasses set ``name`` (the YAML clock name, or ``"manual"``) and implement ``now``,
    ``_state`` and ``_load_state``; they touch their fields only while holding ``self._lock``.
    """

    name: ClassVar[str]

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @abstractmethod
    def now(self) -> float:
        """The current reading."""

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """The fields to checkpoint (called with the lock held)."""

    @abstractmethod
    def _load_state(self, state: Mapping[str, Any]) -> None:
        """Restore fields from ``state`` (called with the lock held)."""

    def state_dict(self) -> dict[str, Any]:
        """A checkpoint of the clock: ``{"clock": name, ...fields}``."""
        with self._lock:
            return {"clock": self.name, **self._state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a checkpoint made by ``state_dict`` of the same kind of clock.

        Raises:
            ValueError: when ``state`` belongs to another kind of clock or is malformed.
        """
        if not isinstance(state, Mapping) or state.get("clock") != self.name:
            found = state.get("clock") if isinstance(state, Mapping) else state
            raise ValueError(
                f"state_dict.clock: expected a {self.name!r} clock state, got {found!r}"
            )
        with self._lock:
            self._load_state(state)

    def __getstate__(self) -> dict[str, Any]:
        return self.state_dict()

    def __setstate__(self, state: dict[str, Any]) -> None:
        Clock.__init__(self)
        self._load_state(state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(now={self.now():g})"


class _CountingClock(Clock):
    """A counter that goes up by whole units; the episode and step clocks."""

    def __init__(self) -> None:
        super().__init__()
        self._count = 0

    def now(self) -> float:
        with self._lock:
            return float(self._count)

    def advance(self, n: int = 1) -> float:
        """Count ``n`` more units and return the reading from before them.

        The read and the increment are one atomic step, so concurrent callers each get a
        distinct reading.
        """
        n = check_count(n, "n")
        with self._lock:
            before = self._count
            self._count += n
            return float(before)

    def _state(self) -> dict[str, Any]:
        return {"count": self._count}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._count = check_count(state.get("count"), "state_dict.count")


class EpisodeClock(_CountingClock):
    """Episodes started before the current one: the first episode sees t = 0.

    Call ``t = clock.advance()`` as an episode starts: ``t`` is the time that episode runs
    at, and ``now()`` then reads the time the next one will get. With a change point
    ``at: [0, 5]`` the sixth episode is the first of phase 1.
    """

    name = "episodes"


class StepClock(_CountingClock):
    """Environment steps taken so far; ``advance(n)`` after ``n`` steps."""

    name = "steps"


class VersionClock(Clock):
    """The learner's policy version; the learner calls ``set(version)`` after each update."""

    name = "versions"

    def __init__(self) -> None:
        super().__init__()
        self._version = 0

    def now(self) -> float:
        with self._lock:
            return float(self._version)

    def set(self, version: int) -> None:
        """Move to ``version``.

        Raises:
            ValueError: for a version that is not an integer >= the current one (versions
                never go back; a restored run uses ``load_state_dict``).
        """
        version = check_count(version, "version")
        with self._lock:
            if version < self._version:
                raise ValueError(
                    f"version must not go backwards: at {self._version}, got {version}"
                )
            self._version = version

    def _state(self) -> dict[str, Any]:
        return {"version": self._version}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._version = check_count(state.get("version"), "state_dict.version")


class WallClock(Clock):
    """Seconds since ``start()`` (or creation), from a monotonic timer.

    A checkpoint stores the seconds elapsed; after ``load_state_dict`` the clock counts on
    from there, so time spent while the run was down does not count.

    Args:
        timer: the monotonic seconds source (tests pass a fake one).
    """

    name = "seconds"

    def __init__(self, timer: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._timer = timer
        self._origin = timer()
        self._carried = 0.0

    def start(self) -> None:
        """Restart from zero now."""
        with self._lock:
            self._origin = self._timer()
            self._carried = 0.0

    def use_timer(self, timer: Callable[[], float]) -> None:
        """Count on from the current reading with another seconds source (a simulated run's
        virtual clock)."""
        with self._lock:
            self._carried += max(self._timer() - self._origin, 0.0)
            self._timer = timer
            self._origin = timer()

    def now(self) -> float:
        with self._lock:
            return self._carried + max(self._timer() - self._origin, 0.0)

    def _state(self) -> dict[str, Any]:
        return {"elapsed": self._carried + max(self._timer() - self._origin, 0.0)}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._carried = check_reading(state.get("elapsed"), "state_dict.elapsed")
        self._origin = self._timer()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A copy in another process counts on from the elapsed time with its own timer.
        self._timer = time.monotonic
        super().__setstate__(state)


class ManualClock(Clock):
    """A reading set from outside, e.g. by a rollout worker given ``t`` by the runtime.

    Any finite ``t >= 0`` may be set, in any order: episodes handed to a worker need not
    arrive in clock order.
    """

    name = "manual"

    def __init__(self, t: float = 0.0) -> None:
        super().__init__()
        self._t = check_reading(t, "t")

    def set(self, t: float) -> None:
        """Read ``t`` from now on."""
        t = check_reading(t, "t")
        with self._lock:
            self._t = t

    def now(self) -> float:
        with self._lock:
            return self._t

    def _state(self) -> dict[str, Any]:
        return {"t": self._t}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._t = check_reading(state.get("t"), "state_dict.t")


_CLOCKS_BY_NAME: dict[str, type[Clock]] = {
    "episodes": EpisodeClock,
    "steps": StepClock,
    "versions": VersionClock,
    "seconds": WallClock,
}


def make_clock(name: str = "episodes") -> Clock:
    """A fresh clock for a schedule's ``clock:`` name.

    Raises:
        ScheduleError: naming ``clock`` for a name other than episodes, steps, versions,
            seconds.
    """
    if not isinstance(name, str) or name not in _CLOCKS_BY_NAME:
        raise ScheduleError(
            "clock", f"unknown clock {name!r}; expected one of {', '.join(CLOCK_NAMES)}"
        )
    return _CLOCKS_BY_NAME[name]()
