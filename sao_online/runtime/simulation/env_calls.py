"""Environment calls answered on a simulated worker's virtual clock.

The rollout engine hands every ``env.reset`` and ``env.step`` to its env-call strategy. Here the
call runs at once (the real environment, with the real ``env.step_timeout`` as a guard against a
hung one), and its answer reaches the engine when the virtual clock has moved past the call's
virtual duration: ``CostModel.env_call`` of the latency the env's ``LatencyWrapper`` drew (which
never sleeps in a simulated run) and reported in ``info["latency"]``. A call that takes no
virtual time is answered inline, as ``EnvCalls`` answers calls without workers; so with free
environments a simulated worker steps exactly like the synchronous runtime's engine.

A call whose virtual duration passes ``env.step_timeout`` is what a real call past its deadline
is: it ends its episode after ``env.step_timeout`` virtual seconds (``env.on_step_timeout:
end``), or stops the run with an ``EnvError`` (``stop``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sao_online.rollout import EnvCalls, EnvError
from sao_online.rollout.env_results import reported_latency
from sao_online.runtime.simulation.costs import CostModel


@dataclass
class _Answer:
    ready_at: float
    seconds: float
    apply: Callable[[list], None]


class VirtualEnvCalls:
    """The engine's env calls, answered on a virtual clock (an ``EnvCallStrategy``).

    Args:
        now: the worker's virtual time (read when a call is made and when answers are applied).
        costs: the run's cost model.
        timeout: ``env.step_timeout`` (real seconds for the call itself, virtual seconds for
            its simulated duration); None: no limit.
    """

    def __init__(self, now: Callable[[], float], costs: CostModel, timeout: float | None) -> None:
        self.now = now
        self.costs = costs
        self.timeout = timeout
        self._real = EnvCalls(0, timeout=timeout)
        self._answers: dict[int, _Answer] = {}

    def call(
        self,
        slot: int,
        fn: Callable[[], Any],
        on_done: Callable[[Any, float, list], None],
        finished: list,
        what: str = "an environment call",
        on_timeout: Callable[[float, list], None] | None = None,
    ) -> None:
        outcome: list[Any] = []
        self._real.call(
            slot,
            fn,
            lambda result, _seconds, _finished: outcome.append(result),
            finished,
            what,
            None if on_timeout is None else lambda seconds, found: on_timeout(seconds, found),
        )
        if not outcome:  # ran past the real deadline, already handed to on_timeout
            return
        result = outcome[0]
        info = result[-1] if isinstance(result, tuple) and result else None
        seconds = self.costs.env_call(reported_latency(info))
        if self.timeout is not None and seconds > self.timeout:
            if on_timeout is None:
                raise EnvError(
                    f"{what} took {seconds:.3g} virtual s, past env.step_timeout="
                    f"{self.timeout:g} s; raise the timeout, lower the simulated latency, or set "
                    "env.on_step_timeout: end to end such episodes instead"
                )
            limit = self.timeout
            self._answers[slot] = _Answer(
                self.now() + limit, limit, lambda found: on_timeout(limit, found)
            )
            return
        if seconds == 0.0:
            on_done(result, 0.0, finished)
            return
        self._answers[slot] = _Answer(
            self.now() + seconds, seconds, lambda found: on_done(result, seconds, found)
        )

    def apply_ready(self, finished: list) -> None:
        """Apply every answer due by now, in slot order."""
        now = self.now()
        for slot in sorted(self._answers):
            if self._answers[slot].ready_at <= now:
                self._answers.pop(slot).apply(finished)

    def next_ready(self) -> float | None:
        """When the next answer is due (None: no call is out)."""
        return min((answer.ready_at for answer in self._answers.values()), default=None)

    def wait(self, timeout: float | None) -> None:
        """Never blocks: the simulation moves its clock to ``next_ready`` itself."""

    def forget(self, slot: int) -> None:
        self._answers.pop(slot, None)

    def abandon(self) -> None:
        self._answers = {}

    def close(self) -> None:
        self.abandon()
        self._real.close()
