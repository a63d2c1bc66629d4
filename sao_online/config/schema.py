"""The JSON Schema of an experiment config, generated from its pydantic models.

Editors with a YAML language server complete and check configs against it: put
``# yaml-language-server: $schema=<path to experiment.schema.json>`` at the top of a config, or
map the schema to your config files in the editor's settings. ``sao-online schema --out FILE``
writes it; ``configs/experiment.schema.json`` is the copy for this version of the package.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from sao_online.config.experiment import ExperimentConfig

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"


class _WithoutFieldTitles(GenerateJsonSchema):
    # pydantic titles each field after its name ("Dis Eps Low"); the description says more.
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an experiment config file.

    Unknown keys are rejected (``additionalProperties: false``), fixed-choice fields are enums,
    numeric fields carry their range, every field carries its help text as ``description`` and
    its default.

    Example:
        >>> schema = config_json_schema()
        >>> schema["$defs"]["RuntimeConfig"]["properties"]["backend"]["enum"]
        ['sync', 'local', 'ray']
    """
    schema = ExperimentConfig.model_json_schema(schema_generator=_WithoutFieldTitles)
    schema["title"] = "sao-online experiment config"
    return {"$schema": SCHEMA_URI, **schema}


def schema_text() -> str:
    """The schema as written to ``configs/experiment.schema.json`` (stable key order)."""
    return json.dumps(config_json_schema(), indent=2) + "\n"
