"""Drift spaces: what values each drift parameter of an environment may take.

An environment declares ``drift_space = {"preferred": Choice(...), "failure": Range(...)}``;
plain Python works too: a list is a choice and a ``(low, high)`` tuple of numbers a range
(``{"preferred": ["cute", "classical"], "failure": (0.0, 0.5)}``; :func:`normalize_space`).
Schedules are validated against it before a run starts, and the environment validates the
``theta`` it receives in ``reset(options={"drift": theta})`` with :func:`validate_theta`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class DriftValueError(ValueError):
    """A drift parameter name or value that the environment does not accept."""


@dataclass(frozen=True)
class Choice:
    """A categorical drift parameter.

    Args:
        values: the allowed values, in a meaningful order (the first is the default).
        help: one line on what the parameter changes.
    """

    values: tuple[Any, ...]
    help: str = ""

    def __init__(self, values: Sequence[Any], help: str = "") -> None:
        if len(values) == 0:
            raise ValueError("Choice needs at least one value")
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "help", help)

    @property
    def default(self) -> Any:
        return self.values[0]

    def contains(self, value: Any) -> bool:
        return value in self.values

    def describe(self) -> str:
        return "one of " + ", ".join(str(v) for v in self.values)


@dataclass(frozen=True)
class Range:
    """A numeric drift parameter in the closed interval [low, high].

    Args:
        low: smallest allowed value.
        high: largest allowed value.
        default: the value used when no drift is given (``low`` when omitted).
        help: one line on what the parameter changes.
    """

    low: float
    high: float
    default: float | None = None
    help: str = ""

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"Range needs low <= high, got [{self.low}, {self.high}]")
        if self.default is None:
            object.__setattr__(self, "default", self.low)

    def contains(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return self.low <= float(value) <= self.high

    def describe(self) -> str:
        return f"a number in [{self.low}, {self.high}]"


DriftSpace = Mapping[str, Choice | Range]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_spec(name: str, value: Any) -> Choice | Range:
    """One drift parameter as a :class:`Choice` or :class:`Range`.

    A ``Choice`` or ``Range`` is returned as it is, a list becomes a ``Choice`` (its first value
    the default) and a ``(low, high)`` tuple of numbers a ``Range``.

    Raises:
        DriftValueError: naming ``drift_space.<name>`` when ``value`` is none of these.

    Example:
        >>> as_spec("failure", (0.0, 0.5))
        Range(low=0.0, high=0.5, default=0.0, help='')
    """
    where = f"drift_space.{name}"
    if isinstance(value, Choice | Range):
        return value
    if isinstance(value, list):
        if not value:
            raise DriftValueError(f"{where}: an empty list allows no value")
        return Choice(value)
    if isinstance(value, tuple):
        if len(value) != 2 or not all(_is_number(v) for v in value):
            raise DriftValueError(
                f"{where}: a tuple means a (low, high) range of two numbers, got "
                f"{value!r}; write choices as a list"
            )
        if not value[0] <= value[1]:
            raise DriftValueError(f"{where}: range needs low <= high, got {value!r}")
        return Range(float(value[0]), float(value[1]))
    raise DriftValueError(
        f"{where}: expected a list (choices), a (low, high) tuple, a Choice or "
        f"a Range, got {type(value).__name__} {value!r}"
    )


def normalize_space(space: Any) -> dict[str, Choice | Range]:
    """``space`` with every parameter as a :class:`Choice` or :class:`Range` (see :func:`as_spec`).

    Raises:
        DriftValueError: ``space`` is not a mapping, or names the parameter that is not valid.
    """
    if not isinstance(space, Mapping):
        raise DriftValueError(
            f"drift_space: expected a mapping of parameter name -> choices or "
            f"range, got {type(space).__name__}"
        )
    return {str(name): as_spec(str(name), value) for name, value in space.items()}


def default_theta(space: DriftSpace) -> dict[str, Any]:
    """The default value of every parameter of ``space``."""
    return {name: spec.default for name, spec in normalize_space(space).items()}


def complete_theta(
    space: DriftSpace, theta: Mapping[str, Any] | None, where: str = "drift"
) -> dict[str, Any]:
    """:func:`validate_theta` with defaults filled in and range values as floats.

    This is the ``theta`` an environment reports in ``info``: every parameter, ranges as floats
    so that logs do not mix 0 and 0.0.
    """
    space = normalize_space(space)
    resolved = validate_theta(space, theta or {}, where=where)
    return {
        name: float(value) if isinstance(space[name], Range) else value
        for name, value in resolved.items()
    }


def validate_theta(
    space: DriftSpace, theta: Mapping[str, Any], *, partial: bool = True, where: str = "drift"
) -> dict[str, Any]:
    """Check ``theta`` against ``space`` and return it completed with defaults.

    Args:
        space: the environment's drift space.
        theta: parameter name -> value.
        partial: when True, missing parameters take their defaults; otherwise they are errors.
        where: prefix used in error messages (e.g. ``"schedule.parameters"``).

    Raises:
        DriftValueError: naming the unknown parameter or the value out of its space.
    """
    if not isinstance(theta, Mapping):
        raise DriftValueError(
            f"{where}: expected a mapping of parameter -> value, got {type(theta).__name__}"
        )
    space = normalize_space(space)
    unknown = sorted(set(theta) - set(space))
    if unknown:
        raise DriftValueError(
            f"{where}.{unknown[0]}: unknown drift parameter; this environment has "
            f"{', '.join(sorted(space)) or 'none'}"
        )
    resolved = {}
    for name, spec in space.items():
        if name not in theta:
            if not partial:
                raise DriftValueError(f"{where}.{name}: missing drift parameter")
            resolved[name] = spec.default
            continue
        value = theta[name]
        if not spec.contains(value):
            raise DriftValueError(
                f"{where}.{name}: value {value!r} is not allowed; expected {spec.describe()}"
            )
        resolved[name] = value
    return resolved
