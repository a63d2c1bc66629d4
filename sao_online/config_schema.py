"""A JSON Schema of the experiment config, generated from its dataclasses.

Editors with a YAML language server complete and check configs against it: put
``# yaml-language-server: $schema=<path to experiment.schema.json>`` at the top of a config, or
map the schema to your config files in the editor's settings. ``sao-online schema --out FILE``
writes it; ``configs/experiment.schema.json`` is the copy for this version of the package.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Literal

from sao_online.config import ExperimentConfig
from sao_online.config_ranges import LIST_RANGES, RANGES, Range

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"


def _type_schema(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(option) for option in typing.get_args(annotation)]}
    if origin is Literal:
        return {"enum": list(typing.get_args(annotation))}
    if annotation is type(None):
        return {"type": "null"}
    simple = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        dict: "object",
        list: "array",
    }
    if annotation in simple:
        return {"type": simple[annotation]}
    if origin in simple:
        return {"type": simple[origin]}
    if dataclasses.is_dataclass(annotation):
        return _section_schema(annotation)
    return {}  # Any


def _range_schema(allowed: Range) -> dict[str, Any]:
    """JSON Schema bounds of a numeric range (JSON has no infinity: such a bound is left out)."""
    bounds = {"exclusiveMinimum" if allowed.open_low else "minimum": allowed.low}
    if not allowed.infinite:
        bounds["exclusiveMaximum" if allowed.open_high else "maximum"] = allowed.high
    return bounds


def _section_schema(cls: type, prefix: str = "") -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties = {}
    for spec in dataclasses.fields(cls):
        dotted = prefix + spec.name
        schema = (
            _section_schema(hints[spec.name], dotted + ".")
            if dataclasses.is_dataclass(hints[spec.name])
            else _type_schema(hints[spec.name])
        )
        if dotted in RANGES:
            schema.update(_range_schema(RANGES[dotted]))
        if dotted in LIST_RANGES:
            allowed, length = LIST_RANGES[dotted]
            schema.update(
                {
                    "items": {"type": "number", **_range_schema(allowed)},
                    "minItems": length,
                    "maxItems": length,
                }
            )
        help_text = spec.metadata.get("help")
        if help_text:
            schema["description"] = help_text
        if spec.default is not dataclasses.MISSING:
            schema["default"] = spec.default
        elif spec.default_factory is not dataclasses.MISSING and not dataclasses.is_dataclass(
            hints[spec.name]
        ):
            schema["default"] = spec.default_factory()
        properties[spec.name] = schema
    return {"type": "object", "properties": properties, "additionalProperties": False}


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an experiment config file.

    Unknown keys are rejected (``additionalProperties: false``), fixed-choice fields are enums,
    numeric fields carry their range (``config_ranges.RANGES``), every field carries its help
    text as ``description`` and its default.

    Example:
        >>> schema = config_json_schema()
        >>> schema["properties"]["runtime"]["properties"]["backend"]["enum"]
        ['sync', 'local', 'ray']
    """
    schema = _section_schema(ExperimentConfig)
    schedule = schema["properties"]["schedule"]
    schedule.update({"type": ["object", "string", "null"]})
    return {"$schema": SCHEMA_URI, "title": "sao-online experiment config", **schema}


def schema_text() -> str:
    """The schema as written to ``configs/experiment.schema.json`` (stable key order)."""
    return json.dumps(config_json_schema(), indent=2) + "\n"
