"""The seeded kinds: gradual, random_walk and change_points.

Every random draw is a pure function of (schedule seed, parameter name, t): the entropy words
come from :func:`parameter_entropy` (a BLAKE2 hash, stable across processes, unlike Python's
salted ``hash``), and any state these kinds keep is a cache of a sequence fixed by that entropy,
built in the same order whatever order the times are asked in. So ``at(t)`` gives the same
answer in every worker process, before and after a restart.
"""

from __future__ import annotations

import hashlib
import math
import struct
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from sao_online.drift_schedules.checks import check_number, check_scalar, check_scalar_list
from sao_online.drift_schedules.errors import ScheduleError
from sao_online.drift_schedules.kinds import (
    MAX_CHANGE_POINTS,
    ParameterSchedule,
    check_value_allowed,
    format_value,
    require_range,
    unique_in_order,
)
from sao_online.drift_schedules.space import Choice, Range


def parameter_entropy(seed: int, name: str) -> tuple[int, ...]:
    """Seed words for one parameter: the schedule seed and a stable hash of the name."""
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=16).digest()
    return (seed, *struct.unpack("<4I", digest))


def uniform_at(entropy: tuple[int, ...], t: float) -> float:
    """A uniform number in [0, 1) that depends only on ``entropy`` and ``t``."""
    # ``+ 0.0`` folds -0.0 into 0.0; ``hex`` is an exact, platform-independent spelling.
    key = f"{entropy}|{(float(t) + 0.0).hex()}".encode()
    word = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    return (word >> 11) / float(1 << 53)


def block_generator(entropy: tuple[int, ...], block: int) -> np.random.Generator:
    """A generator for the ``block``-th chunk of a lazily extended random sequence."""
    return np.random.default_rng(np.random.SeedSequence([*entropy, block]))


def sigmoid(x: float) -> float:
    """The logistic function, without overflow for large ``|x|``."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    exp_x = math.exp(x)
    return exp_x / (1.0 + exp_x)


class Gradual(ParameterSchedule):
    """``{kind: gradual, from: a, to: b, start: s, width: w}``: a mixture of two regimes.

    At time t the value is ``b`` with probability
    ``p(t) = sigmoid((t - (s + w/2)) / (w/8))`` (about 0.018 at ``s``, 0.5 at ``s + w/2``,
    0.982 at ``s + w``) and ``a`` otherwise; the draw at each t is fixed by the seed.
    The change point is the midpoint ``s + w/2``.
    """

    kind = "gradual"
    required_fields = ("from", "to", "start", "width")
    piecewise_constant = False

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        super().__init__(spec, entropy)
        self.from_value = check_scalar(spec["from"], "from")
        self.to_value = check_scalar(spec["to"], "to")
        self.start = check_number(spec["start"], "start", minimum=0)
        self.width = check_number(spec["width"], "width", positive=True)

    @property
    def midpoint(self) -> float:
        return self.start + self.width / 2

    def probability_to(self, t: float) -> float:
        """p(t): the probability that the value at ``t`` is ``to``."""
        return sigmoid((t - self.midpoint) / (self.width / 8))

    def value(self, t: float) -> Any:
        if uniform_at(self.entropy, t) < self.probability_to(t):
            return self.to_value
        return self.from_value

    def _finite_change_points(self) -> list[float]:
        return [float(self.midpoint)]

    def horizon_hint(self) -> float | None:
        return 1.5 * (self.start + self.width)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "from": self.from_value,
            "to": self.to_value,
            "start": self.start,
            "width": self.width,
        }

    def possible_values(self) -> list[Any]:
        return unique_in_order([self.from_value, self.to_value])

    def validate(self, space_entry: Choice | Range, where: str) -> None:
        check_value_allowed(space_entry, self.from_value, f"{where}.from")
        check_value_allowed(space_entry, self.to_value, f"{where}.to")

    def describe(self, start: float, end: float) -> str:
        first, last = self.probability_to(start), self.probability_to(end)
        if last < 0.01:
            return format_value(self.from_value)
        if first > 0.99:
            return format_value(self.to_value)
        return (
            f"{format_value(self.from_value)}|{format_value(self.to_value)} "
            f"(p({format_value(self.to_value)}) {first:.2f}->{last:.2f})"
        )

    def short_label(self, start: float) -> str | None:
        # The regime more likely at the phase's start; the phase boundary is where p = 0.5.
        return format_value(self.to_value if self.probability_to(start) >= 0.5 else self.from_value)


class RandomWalk(ParameterSchedule):
    """``{kind: random_walk, start: x0, step: s, low: l, high: h}``: a clipped Gaussian walk.

    The value at time t is ``x[floor(t)]`` with ``x[0] = x0`` and
    ``x[k+1] = clip(x[k] + s * z[k], l, h)``, ``z[k]`` standard normal. No change points.
    """

    kind = "random_walk"
    required_fields = ("start", "step", "low", "high")
    piecewise_constant = False
    #: The walk is cached as one value per block boundary plus a few recent blocks, so memory
    #: stays small however far the clock runs.
    block_size = 1024
    cached_blocks = 8

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        super().__init__(spec, entropy)
        self.start = check_number(spec["start"], "start")
        self.step = check_number(spec["step"], "step", minimum=0)
        self.low = check_number(spec["low"], "low")
        self.high = check_number(spec["high"], "high")
        if not self.low <= self.high:
            raise ScheduleError("high", f"must be >= low ({self.low!r}), got {self.high!r}")
        if not self.low <= self.start <= self.high:
            raise ScheduleError(
                "start",
                f"must lie in [low, high] = [{self.low!r}, {self.high!r}], got {self.start!r}",
            )
        self._lock = threading.Lock()
        self._block_starts: list[float] = [float(self.start)]
        self._blocks: OrderedDict[int, list[float]] = OrderedDict()

    def _walk_block(self, block: int) -> tuple[list[float], float]:
        """The walk over one block from its first value, and the first value of the next."""
        increments = block_generator(self.entropy, block).normal(0.0, 1.0, self.block_size)
        low, high = float(self.low), float(self.high)
        position = self._block_starts[block]
        path = []
        for increment in (self.step * increments).tolist():
            path.append(position)
            position = min(max(position + increment, low), high)
        return path, position

    def _block(self, block: int) -> list[float]:
        with self._lock:
            if block in self._blocks:
                self._blocks.move_to_end(block)
                return self._blocks[block]
            if block * self.block_size > MAX_CHANGE_POINTS * 10:
                raise ScheduleError(
                    "",
                    f"random walk asked for step {block * self.block_size}, "
                    "too far to compute; is the clock in the right unit?",
                )
            # Block starts are only known sequentially: walk forward to the one asked for.
            while len(self._block_starts) <= block:
                _, next_start = self._walk_block(len(self._block_starts) - 1)
                self._block_starts.append(next_start)
            path, _ = self._walk_block(block)
            self._blocks[block] = path
            if len(self._blocks) > self.cached_blocks:
                self._blocks.popitem(last=False)
            return path

    def value(self, t: float) -> float:
        index = math.floor(t)
        return self._block(index // self.block_size)[index % self.block_size]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "start": self.start,
            "step": self.step,
            "low": self.low,
            "high": self.high,
        }

    def validate(self, space_entry: Choice | Range, where: str) -> None:
        require_range(space_entry, self.kind, where)
        for field in ("low", "high", "start"):
            check_value_allowed(space_entry, getattr(self, field), f"{where}.{field}")

    def describe(self, start: float, end: float) -> str:
        return f"{format_value(self.value(start))}->{format_value(self.value(end))} (walk)"


class ChangePoints(ParameterSchedule):
    """``{kind: change_points, values: [...], rate: r}``: changes at random times.

    The change points are a Poisson process with ``r`` changes per clock unit on average
    (exponential gaps of mean ``1/r``). The value starts at ``values[0]`` and, at each change,
    moves to the next value, wrapping around after the last. Several changes can fall between
    two consecutive readings of a discrete clock; the value then moves once per change.
    """

    kind = "change_points"
    required_fields = ("values", "rate")
    unbounded = True
    gaps_per_block = 64

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        super().__init__(spec, entropy)
        self.values = check_scalar_list(spec["values"], "values", min_length=2)
        self.rate = check_number(spec["rate"], "rate", positive=True)
        self._lock = threading.Lock()
        self._times: list[float] = []
        self._generated_blocks = 0

    def _times_until(self, until: float) -> list[float]:
        """The cached change times, extended past ``until`` first when needed."""
        with self._lock:
            while not self._times or self._times[-1] <= until:
                if len(self._times) > MAX_CHANGE_POINTS:
                    raise ScheduleError(
                        "rate",
                        f"more than {MAX_CHANGE_POINTS} change points up to t={until:g} "
                        f"at rate {self.rate!r}; is the rate in the clock's unit?",
                    )
                gaps = block_generator(self.entropy, self._generated_blocks).exponential(
                    1.0 / self.rate, self.gaps_per_block
                )
                last = self._times[-1] if self._times else 0.0
                for gap in gaps.tolist():
                    last += gap
                    self._times.append(last)
                self._generated_blocks += 1
            return self._times

    def changes_until(self, t: float) -> int:
        """The number of change points ``<= t``."""
        return bisect_right(self._times_until(t), t)

    def value(self, t: float) -> Any:
        return self.values[self.changes_until(t) % len(self.values)]

    def change_points(self, until: float | None = None) -> list[float]:
        if until is None:
            raise ScheduleError(
                "", "kind change_points has infinitely many change points; pass until"
            )
        times = self._times_until(until)
        return times[: bisect_right(times, until)]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "values": list(self.values), "rate": self.rate}

    def horizon_hint(self) -> float | None:
        # About five changes on average.
        return 5.0 / self.rate

    def possible_values(self) -> list[Any]:
        return unique_in_order(self.values)

    def validate(self, space_entry: Choice | Range, where: str) -> None:
        for index, item in enumerate(self.values):
            check_value_allowed(space_entry, item, f"{where}.values[{index}]")
