"""Type checks for schedule fields, each raising :class:`ScheduleError` naming the field.

Values are returned as given (an ``int`` stays an ``int``) so that a schedule written back with
``to_dict()`` reads exactly like the one that was loaded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sao_online.drift_schedules.errors import ScheduleError


def type_name(value: Any) -> str:
    """A short name of ``value``'s type for error messages."""
    return "null" if value is None else type(value).__name__


def is_number(value: Any) -> bool:
    """True for a finite int or float; booleans are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def check_number(
    value: Any, field: str, *, minimum: float | None = None, positive: bool = False
) -> int | float:
    """Check that ``value`` is a finite number, optionally ``>= minimum`` or ``> 0``."""
    if not is_number(value):
        raise ScheduleError(field, f"expected a finite number, got {value!r} ({type_name(value)})")
    if positive and not value > 0:
        raise ScheduleError(field, f"must be > 0, got {value!r}")
    if minimum is not None and not value >= minimum:
        raise ScheduleError(field, f"must be >= {minimum:g}, got {value!r}")
    return value


def check_scalar(value: Any, field: str) -> str | int | float | bool:
    """Check that ``value`` is a string, a finite number or a boolean."""
    if isinstance(value, str | bool) or is_number(value):
        return value
    raise ScheduleError(
        field, f"expected a string, number or boolean, got {value!r} ({type_name(value)})"
    )


def check_list(value: Any, field: str, *, min_length: int = 1) -> list[Any]:
    """Check that ``value`` is a list (or tuple) of at least ``min_length`` items."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ScheduleError(field, f"expected a list, got {value!r} ({type_name(value)})")
    if len(value) < min_length:
        raise ScheduleError(field, f"needs at least {min_length} item(s), got {len(value)}")
    return list(value)


def check_scalar_list(value: Any, field: str, *, min_length: int = 1) -> list[Any]:
    """A list of scalars (see :func:`check_scalar`); item errors name ``field[i]``."""
    items = check_list(value, field, min_length=min_length)
    for index, item in enumerate(items):
        check_scalar(item, f"{field}[{index}]")
    return items


def check_fields(spec: Any, kind: str, required: Sequence[str]) -> Mapping[str, Any]:
    """Check that ``spec`` is a mapping with exactly ``kind`` plus the ``required`` fields.

    Raises:
        ScheduleError: for a missing field (named by the field) or an unknown one.
    """
    if not isinstance(spec, Mapping):
        raise ScheduleError("", f"expected a mapping with 'kind', got {spec!r} ({type_name(spec)})")
    expected = ", ".join(["kind", *required])
    for name in required:
        if name not in spec:
            raise ScheduleError(name, f"missing field; kind {kind} needs {expected}")
    for name in spec:
        if name != "kind" and name not in required:
            raise ScheduleError(str(name), f"unknown field for kind {kind}; expected {expected}")
    return spec
