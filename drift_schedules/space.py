"""Drift spaces: what values each drift parameter of an environment may take.

An environment declares ``drift_space = {"preferred": Choice(...), "failure": Range(...)}``;
schedules are validated against it before a run starts, and the environment validates the
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


def default_theta(space: DriftSpace) -> dict[str, Any]:
    """The default value of every parameter of ``space``."""
    return {name: spec.default for name, spec in space.items()}


def validate_theta(space: DriftSpace, theta: Mapping[str, Any], *, partial: bool = True,
                   where: str = "drift") -> dict[str, Any]:
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
        raise DriftValueError(f"{where}: expected a mapping of parameter -> value, got {type(theta).__name__}")
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
            raise DriftValueError(f"{where}.{name}: value {value!r} is not allowed; expected {spec.describe()}")
        resolved[name] = value
    return resolved
