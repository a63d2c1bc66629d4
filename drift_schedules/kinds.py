"""One scheduler per drift parameter: the deterministic kinds and their common interface.

Each kind reads its YAML form (``{kind: abrupt, values: [...], at: [...]}``), checks it, and
answers three questions: the value at time t, the change points (shift times), and whether the
values it can produce fit the environment's drift space. The seeded kinds (gradual,
random_walk, change_points) live in :mod:`sao_online.drift_schedules.random_kinds`.

A change at time 0 is the initial condition, not a shift: change points are always > 0.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Mapping
from typing import Any, ClassVar

from sao_online.drift_schedules.checks import (
    check_list,
    check_number,
    check_scalar,
    check_scalar_list,
    is_number,
)
from sao_online.drift_schedules.errors import ScheduleError
from sao_online.drift_schedules.space import Choice, DriftValueError, Range

#: More change points than this up to one time is almost surely a mistake (a rate or a period
#: in the wrong unit) and would exhaust memory, so listing them is refused with an error.
MAX_CHANGE_POINTS = 1_000_000


def format_value(value: Any) -> str:
    """A compact text form of a parameter value for labels and timelines."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def check_value_allowed(space_entry: Choice | Range, value: Any, where: str) -> None:
    """Raise :class:`DriftValueError` at ``where`` when ``value`` is outside ``space_entry``."""
    if not space_entry.contains(value):
        raise DriftValueError(
            f"{where}: value {value!r} is not allowed; expected {space_entry.describe()}"
        )


def require_range(space_entry: Choice | Range, kind: str, where: str) -> Range:
    """The numeric kinds produce values between their endpoints, so they need a ``Range``."""
    if not isinstance(space_entry, Range):
        raise DriftValueError(
            f"{where}: kind {kind} produces numbers in between its endpoints, but the "
            f"environment declares {space_entry.describe()}; use abrupt, cyclic or gradual"
        )
    return space_entry


class ParameterSchedule(ABC):
    """The schedule of one drift parameter.

    Subclasses set ``kind`` (the YAML name) and ``required_fields`` and parse them in
    ``__init__``, raising :class:`ScheduleError` with field names relative to the parameter.

    Args:
        spec: the parameter's mapping (already checked to hold exactly the required fields).
        entropy: seed words for this parameter (schedule seed + a stable hash of its name);
            only the seeded kinds use them.
    """

    kind: ClassVar[str]
    required_fields: ClassVar[tuple[str, ...]]
    #: True when the kind has infinitely many change points (``change_points`` needs ``until``).
    unbounded: ClassVar[bool] = False
    #: True when the value is constant between the kind's own change points.
    piecewise_constant: ClassVar[bool] = True

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        self.entropy = entropy

    @abstractmethod
    def value(self, t: float) -> Any:
        """The parameter's value at clock reading ``t`` (``t >= 0``)."""

    def change_points(self, until: float | None = None) -> list[float]:
        """Sorted shift times (all > 0), those ``<= until`` when ``until`` is given."""
        points = self._finite_change_points()
        if until is None:
            return points
        return points[: bisect_right(points, until)]

    def _finite_change_points(self) -> list[float]:
        return []

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The YAML form, ``kind`` first; loading it gives back the same schedule."""

    def possible_values(self) -> list[Any] | None:
        """Every value the kind can produce, in order, or None when they form a continuum."""
        return None

    @abstractmethod
    def validate(self, space_entry: Choice | Range, where: str) -> None:
        """Raise :class:`DriftValueError` naming ``where.<field>`` for a value outside the space."""

    def horizon_hint(self) -> float | None:
        """How far a timeline must reach to show this parameter's drift (None: anywhere)."""
        points = self._finite_change_points()
        return 1.5 * points[-1] if points else None

    def describe(self, start: float, end: float) -> str:
        """The value over ``[start, end)`` in a few characters, for timelines."""
        return format_value(self.value(start))

    def short_label(self, start: float) -> str | None:
        """The value that names a phase starting at ``start``, or None when none does.

        Only kinds whose value is constant over a phase (and that change at all) name phases.
        """
        return format_value(self.value(start)) if self.piecewise_constant else None


class Stationary(ParameterSchedule):
    """``{kind: stationary, value: v}``: the same value at every time."""

    kind = "stationary"
    required_fields = ("value",)

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        super().__init__(spec, entropy)
        self.constant = check_scalar(spec["value"], "value")

    def value(self, t: float) -> Any:
        return self.constant

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.constant}

    def possible_values(self) -> list[Any]:
        return [self.constant]

    def validate(self, space_entry: Choice | Range, where: str) -> None:
        check_value_allowed(space_entry, self.constant, f"{where}.value")

    def short_label(self, start: float) -> str | None:
        # A constant says nothing about which phase this is.
        return None


def check_change_times(at: list[Any], field: str) -> list[float]:
    """``at`` must start at 0 and increase strictly; returns the times as floats."""
    for index, time in enumerate(at):
        check_number(time, f"{field}[{index}]", minimum=0)
    if at[0] != 0:
        raise ScheduleError(f"{field}[0]", f"the first time must be 0 (the start), got {at[0]!r}")
    for earlier, later in zip(at, at[1:]):
        if not later > earlier:
            raise ScheduleError(field, f"change points must be strictly increasing, got {at}")
    return [float(time) for time in at]


class Abrupt(ParameterSchedule):
    """``{kind: abrupt, values: [...], at: [0, t1, ...]}``: piecewise constant.

    ``values[i]`` holds on ``[at[i], at[i+1])``; the change points are ``at[1:]``.
    """

    kind = "abrupt"
    required_fields = ("values", "at")

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        super().__init__(spec, entropy)
        self.values = check_scalar_list(spec["values"], "values")
        self.at = check_list(spec["at"], "at")
        self.times = check_change_times(self.at, "at")
        if len(self.values) != len(self.at):
            raise ScheduleError(
                "at", f"needs one time per value: {len(self.values)} values, {len(self.at)} times"
            )

    def value(self, t: float) -> Any:
        return self.values[bisect_right(self.times, t) - 1]

    def _finite_change_points(self) -> list[float]:
        return self.times[1:]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "values": list(self.values), "at": list(self.at)}

    def possible_values(self) -> list[Any]:
        return unique_in_order(self.values)

    def validate(self, space_entry: Choice | Range, where: str) -> None:
        for index, item in enumerate(self.values):
            check_value_allowed(space_entry, item, f"{where}.values[{index}]")


class Linear(ParameterSchedule):
    """``{kind: linear, from: a, to: b, start: s, end: e}`` (alias ``incremental``).

    ``a`` up to ``s``, a straight line from ``a`` to ``b`` over ``[s, e]``, ``b`` afterwards.
    The change point is ``s`` (none when ``s == 0``: the drift then starts with the run).
    """

    kind = "linear"
    required_fields = ("from", "to", "start", "end")
    piecewise_constant = False

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        super().__init__(spec, entropy)
        self.from_value = check_number(spec["from"], "from")
        self.to_value = check_number(spec["to"], "to")
        self.start = check_number(spec["start"], "start", minimum=0)
        self.end = check_number(spec["end"], "end")
        if not self.end > self.start:
            raise ScheduleError("end", f"must be > start ({self.start!r}), got {self.end!r}")

    def value(self, t: float) -> float:
        if t <= self.start:
            return float(self.from_value)
        if t >= self.end:
            return float(self.to_value)
        fraction = (t - self.start) / (self.end - self.start)
        return float(self.from_value + (self.to_value - self.from_value) * fraction)

    def _finite_change_points(self) -> list[float]:
        return [float(self.start)] if self.start > 0 else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "from": self.from_value,
            "to": self.to_value,
            "start": self.start,
            "end": self.end,
        }

    def validate(self, space_entry: Choice | Range, where: str) -> None:
        require_range(space_entry, self.kind, where)
        check_value_allowed(space_entry, self.from_value, f"{where}.from")
        check_value_allowed(space_entry, self.to_value, f"{where}.to")

    def horizon_hint(self) -> float | None:
        return 1.5 * self.end

    def describe(self, start: float, end: float) -> str:
        first, last = self.value(start), self.value(end)
        if first == last:
            return format_value(first)
        return f"{format_value(first)}->{format_value(last)}"


class Cyclic(ParameterSchedule):
    """``{kind: cyclic, values: [...], period: p}``: each value for ``p`` clock units, wrapping.

    A full cycle lasts ``len(values) * p``; the change points are ``p, 2p, 3p, ...`` (unbounded).
    """

    kind = "cyclic"
    required_fields = ("values", "period")
    unbounded = True

    def __init__(self, spec: Mapping[str, Any], entropy: tuple[int, ...]) -> None:
        super().__init__(spec, entropy)
        self.values = check_scalar_list(spec["values"], "values", min_length=2)
        self.period = check_number(spec["period"], "period", positive=True)

    def changes_until(self, t: float) -> int:
        """The number of change points ``k * period <= t``.

        Counted against the same products ``change_points`` lists, so the value, the phase and
        the listed times agree even where ``t / period`` rounds the other way.
        """
        count = max(math.floor(t / self.period), 0)
        while (count + 1) * float(self.period) <= t:
            count += 1
        while count > 0 and count * float(self.period) > t:
            count -= 1
        return count

    def value(self, t: float) -> Any:
        return self.values[self.changes_until(t) % len(self.values)]

    def change_points(self, until: float | None = None) -> list[float]:
        if until is None:
            raise ScheduleError("", "kind cyclic has infinitely many change points; pass until")
        count = self.changes_until(until)
        if count > MAX_CHANGE_POINTS:
            raise ScheduleError(
                "period",
                f"{count} change points up to t={until:g} with period "
                f"{self.period!r}; is the period in the clock's unit?",
            )
        return [index * float(self.period) for index in range(1, count + 1)]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "values": list(self.values), "period": self.period}

    def horizon_hint(self) -> float | None:
        # Two full cycles show that it recurs.
        return 2.0 * len(self.values) * self.period

    def possible_values(self) -> list[Any]:
        return unique_in_order(self.values)

    def validate(self, space_entry: Choice | Range, where: str) -> None:
        for index, item in enumerate(self.values):
            check_value_allowed(space_entry, item, f"{where}.values[{index}]")


def unique_in_order(values: list[Any]) -> list[Any]:
    """``values`` without repeats, first occurrences kept in order (``1`` and ``True`` differ)."""
    seen: list[Any] = []
    for item in values:
        if not any(item == known and type(item) is type(known) for known in seen):
            seen.append(item)
    return seen


def numeric_values(values: list[Any]) -> bool:
    """True when every value is a number (so a plot may draw them on a numeric axis)."""
    return all(is_number(item) for item in values)
