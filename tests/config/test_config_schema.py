"""The config's fixed-choice fields and its JSON Schema (what editors complete YAML from)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from sao_online.cli import main
from sao_online.config import ConfigError, load_config
from sao_online.config.schema import config_json_schema, schema_text

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "runtime.backend=cluster",
            "runtime.backend: must be one of sync, local, ray, simulated, got 'cluster'",
        ),
        ("regularizers.kl_estimator=k2", "regularizers.kl_estimator: must be one of exact, k3"),
        (
            "algorithm.advantage_level=turn",
            "algorithm.advantage_level: must be one of token, last_token, average",
        ),
        ("rollout.on_action_cap=drop", "rollout.on_action_cap: must be one of truncate, submit"),
        ("env.on_step_timeout=skip", "env.on_step_timeout: must be one of stop, end"),
        ("env.step_timeout=0", r"env.step_timeout: must be in \(0, 86400\], got 0"),
    ],
)
def test_fixed_choice_fields_name_the_field_and_the_choices(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_the_shipped_schema_is_the_one_the_code_generates():
    # Regenerate with: sao-online schema --out configs/experiment.schema.json
    assert (CONFIGS / "experiment.schema.json").read_text() == schema_text()


@pytest.mark.parametrize(
    "name", ["demo.yaml", "smoke.yaml", "reason_shift.yaml", "grid_shift.yaml"]
)
def test_shipped_configs_validate_against_the_schema(name):
    data = yaml.safe_load((CONFIGS / name).read_text())
    jsonschema.validate(data, config_json_schema())


@pytest.mark.parametrize(
    "data",
    [
        {"runtime": {"backend": "cluster"}},  # not one of the choices
        {"algorithm": {"dis_eps_lo": 0.2}},  # unknown key
        {"budget": {"episodes": "many"}},  # wrong type
        {"algorithm": {"name": "ppo"}},  # not a built-in method nor MODULE:FACTORY
        {"experiment": "../escaped"},  # cannot name a folder
        {"model": {"device": "gpu"}},
    ],
)
def test_the_schema_rejects_what_load_config_rejects(data):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, config_json_schema())
    with pytest.raises(ConfigError):
        load_config(data)


def test_schema_command_writes_the_schema(tmp_path, capsys):
    out = tmp_path / "schema.json"
    assert main(["schema", "--out", str(out)]) == 0
    assert out.read_text() == schema_text()
    assert main(["schema"]) == 0
    assert '"additionalProperties": false' in capsys.readouterr().out


@pytest.mark.parametrize(
    "data",
    [
        {"algorithm": {"name": "grpo"}},
        {"algorithm": {"name": "my_methods:make_method"}},
        {"algorithm": {"dis_eps_high": 1e300}},  # no upper bound
        {"runtime": {"torch_threads": 3}},
        {"model": {"device": "cuda:1"}},
    ],
)
def test_the_schema_accepts_what_load_config_accepts(data):
    jsonschema.validate(data, config_json_schema())
    load_config(data)
