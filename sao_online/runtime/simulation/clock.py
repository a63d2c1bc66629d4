"""The clocks of a run's seconds: the machine's (``MachineClock``) or a simulation's virtual one
(``VirtualClock``), which moves only when the simulation says so."""

from __future__ import annotations

import time


class MachineClock:
    """The machine's seconds (``time.time()``)."""

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """Virtual seconds since the run started; never runs backwards.

    Example:
        >>> clock = VirtualClock()
        >>> clock.advance_to(1.5); clock.now()
        1.5
        >>> clock.advance_to(1.0)
        Traceback (most recent call last):
        ...
        ValueError: virtual time cannot run backwards: 1.5 -> 1.0
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        """Move the clock to ``t`` (>= the current reading)."""
        if t < self._now:
            raise ValueError(f"virtual time cannot run backwards: {self._now:g} -> {t:g}")
        self._now = float(t)
