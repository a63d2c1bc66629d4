"""Config errors as one line that names the field by its dotted path and says what it allows.

pydantic reports every problem of a config as a list of records (a location, an error type, the
input); :func:`one_line` turns the first of them into ``optim.max_grad_norm: must be in (0,
1e+09], got -1``, reading the allowed range, choices and type from the field's own definition.
"""

from __future__ import annotations

import difflib
import math
import reprlib
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, ValidationError

from sao_online.util.safe_yaml import key_text


class ConfigError(ValueError):
    """A configuration value that is missing, unknown or of the wrong type; names the field."""


class ConfigWarning(UserWarning):
    """A setting that was adjusted on load (the message says what and why)."""


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, never building much more of a huge value."""
    bounded = reprlib.Repr()
    bounded.maxlevel, bounded.maxstring, bounded.maxother, bounded.maxlong = 3, limit, limit, limit
    bounded.maxlist = bounded.maxdict = bounded.maxtuple = bounded.maxset = 6
    text = bounded.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(error: BaseException, limit: int = 160) -> str:
    """The first line of ``str(error)``, at most ``limit`` characters (the type if empty)."""
    text = str(error).strip().splitlines()
    return text[0][:limit] if text else type(error).__name__


def _number_text(value: Any) -> str:
    """A short rendering of a number (a 400-digit integer is cut, not printed whole)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return short_repr(value)
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 24 else text[:20] + f"... ({len(text)} digits)"


def _bounds(metadata: list[Any]) -> tuple[Any, Any]:
    """The lower and upper bound constraints (``annotated_types`` Ge/Gt, Le/Lt) in ``metadata``."""
    low = next(
        (m for m in metadata if isinstance(m, annotated_types.Ge | annotated_types.Gt)), None
    )
    high = next(
        (m for m in metadata if isinstance(m, annotated_types.Le | annotated_types.Lt)), None
    )
    return low, high


def _finite(metadata: list[Any]) -> bool:
    return any(getattr(m, "allow_inf_nan", True) is False for m in metadata)


def _range_text(metadata: list[Any]) -> str:
    """``[0, 3600]``, ``(0, inf]`` (infinity allowed), ``[0, 1)`` from a field's constraints."""
    low, high = _bounds(metadata)
    if low is None and high is None:
        return ""
    left = "(" if isinstance(low, annotated_types.Gt) else "["
    right = (
        ")" if isinstance(high, annotated_types.Lt) or (high is None and _finite(metadata)) else "]"
    )
    low_value = "-inf" if low is None else f"{getattr(low, 'ge', getattr(low, 'gt', 0)):g}"
    high_value = "inf" if high is None else f"{getattr(high, 'le', getattr(high, 'lt', 0)):g}"
    return f"{left}{low_value}, {high_value}{right}"


def _split_annotated(annotation: Any) -> tuple[Any, list[Any]]:
    """(type, constraints) of ``Annotated[type, ...]``; Field(...) inside it contributes too."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation, []
    inner, *extras = typing.get_args(annotation)
    metadata: list[Any] = []
    for extra in extras:
        metadata.extend(getattr(extra, "metadata", None) or [extra])
    inner, more = _split_annotated(inner)
    return inner, metadata + more


def _union_members(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def describe_type(annotation: Any, metadata: list[Any] = ()) -> str:
    """What a value of ``annotation`` looks like, for "expected ..." (with its range if any)."""
    annotation, more = _split_annotated(annotation)
    metadata = [*metadata, *more]
    members = _union_members(annotation)
    if len(members) > 1:
        return " or ".join(describe_type(member, metadata) for member in members)
    if typing.get_origin(annotation) is Literal:
        choices = typing.get_args(annotation)
        return repr(choices[0]) if len(choices) == 1 else "one of " + ", ".join(map(str, choices))
    if annotation is type(None):
        return "null"
    if annotation is bool:
        return "true or false"
    if annotation in (int, float):
        noun = "an integer" if annotation is int else "a number"
        where = _range_text(metadata)
        return f"{noun} in {where}" if where else noun
    if annotation is str:
        return "a string"
    origin = typing.get_origin(annotation) or annotation
    if origin is list:
        return "a list"
    if origin is dict or (isinstance(origin, type) and issubclass(origin, BaseModel)):
        return "a mapping"
    return "a value"


@dataclass
class _Spot:
    """Where a problem is: the field's dotted path, type and constraints, and its section."""

    path: str = ""
    annotation: Any = None
    metadata: list[Any] = field(default_factory=list)
    section: type[BaseModel] | None = None
    is_key: bool = False  # the problem is a mapping's key, not its value


def _locate(model: type[BaseModel], loc: tuple[Any, ...]) -> _Spot:
    """The field an error's ``loc`` points at.

    Union member tags in ``loc`` (``int``, ``literal['auto']``) are skipped: the field is the
    whole union.
    """
    spot = _Spot(annotation=model)
    for index, part in enumerate(loc):
        inner = _split_annotated(spot.annotation)[0]
        members = [m for m in _union_members(inner) if m is not type(None)]
        inner = members[0] if len(members) == 1 else inner
        origin = typing.get_origin(inner)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            spec = inner.model_fields.get(part) if isinstance(part, str) else None
            name = key_text(part)
            spot.path = f"{spot.path}.{name}" if spot.path else name
            spot.section = inner
            if spec is None:  # an unknown key
                return _Spot(spot.path, None, [], inner)
            spot.annotation, spot.metadata = spec.annotation, list(spec.metadata)
            present = [m for m in _union_members(spec.annotation) if m is not type(None)]
            if len(present) == 1:  # X | None: X's own range
                spot.metadata += _split_annotated(present[0])[1]
        elif origin is dict and loc[index + 1 : index + 2] == ("[key]",):
            key_type = _split_annotated(typing.get_args(inner)[0])
            return _Spot(spot.path, key_type[0], key_type[1], spot.section, is_key=True)
        elif origin in (list, dict):
            spot.path += f"[{part}]" if isinstance(part, int) else f"[{short_repr(part)}]"
            spot.annotation, spot.metadata = _split_annotated(typing.get_args(inner)[-1])
        # else: a union member's tag
    return spot


_RANGE_ERRORS = {
    "finite_number",
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
}


def _range_message(value: Any, metadata: list[Any]) -> str:
    where = _range_text(metadata)
    if isinstance(value, float) and math.isnan(value):
        return f"must be a number in {where}, got nan"
    if isinstance(value, float) and math.isinf(value) and _finite(metadata):
        return f"must be finite, in {where}, got {value}"
    return f"must be in {where}, got {_number_text(value)}"


def _length_message(kind: str, context: dict[str, Any], annotation: Any, meta: list) -> str:
    least = next((m.min_length for m in meta if isinstance(m, annotated_types.MinLen)), None)
    most = next((m.max_length for m in meta if isinstance(m, annotated_types.MaxLen)), None)
    actual = context.get("actual_length")
    if least == 1 and most is None:
        return "must not be empty"
    item = typing.get_args(_split_annotated(annotation)[0])
    noun = "numbers" if item and _split_annotated(item[0])[0] in (int, float) else "items"
    if least is not None and least == most:
        return f"expected {least} {noun}, got {actual}"
    if kind == "too_short":
        return f"expected at least {least} {noun}, got {actual}"
    return f"expected at most {most} {noun}, got {actual}"


def _message(kind: str, value: Any, context: dict[str, Any], annotation: Any, meta: list) -> str:
    if kind in ("literal_error", "enum"):
        return f"must be {describe_type(annotation, meta)}, got {short_repr(value)}"
    if kind in _RANGE_ERRORS:
        return _range_message(value, meta)
    if kind in ("too_short", "too_long"):
        return _length_message(kind, context, annotation, meta)
    if kind == "string_too_short":
        return "must not be empty"
    return f"expected {describe_type(annotation, meta)}, got {short_repr(value)}"


def _unknown_key(parent: type[BaseModel] | None, key: Any) -> str:
    known = list(parent.model_fields) if parent else []
    close = difflib.get_close_matches(str(key), known, n=1)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; known keys: {', '.join(sorted(known))}"


def one_line(error: ValidationError, model: type[BaseModel]) -> ConfigError:
    """The first problem of ``error`` (from validating ``model``) as a one-line ConfigError.

    A ConfigError raised inside a validator is already such a line and is kept as it is; any
    other ValueError a validator raises gets the field's dotted path in front.
    """
    problems = error.errors(include_url=False)
    first = problems[0]
    spot = _locate(model, first["loc"])
    value = first.get("input")
    context = first.get("ctx") or {}
    cause = context.get("error")
    if isinstance(cause, ConfigError):
        return ConfigError(str(cause))
    if first["type"] == "extra_forbidden":
        text = _unknown_key(spot.section, first["loc"][-1])
    elif isinstance(cause, BaseException):
        text = str(cause)
    elif spot.is_key:
        text = f"expected {describe_type(spot.annotation)} as each key, got {short_repr(value)}"
    elif sum(_locate(model, problem["loc"]).path == spot.path for problem in problems) > 1:
        # One problem per member of a union (runtime.torch_threads: an integer or 'auto').
        text = f"expected {describe_type(spot.annotation, spot.metadata)}, got {short_repr(value)}"
    else:
        text = _message(first["type"], value, context, spot.annotation, spot.metadata)
    return ConfigError(f"{spot.path or 'config'}: {text}")
