"""The config as pydantic models: help on every field, round trips, and one-line errors."""

from __future__ import annotations

import pydantic
import pytest
import yaml

from sao_online.config import (
    AlgorithmConfig,
    ConfigError,
    ExperimentConfig,
    describe_fields,
    load_config,
)


def test_every_field_has_help_and_every_section_refuses_unknown_keys():
    rows = describe_fields()
    assert len(rows) > 60 and all(help_text.strip() for _, _, help_text in rows)
    assert ("optim.lr", 5e-4, "Policy learning rate (Adam).") in rows
    sections = {name.split(".")[0] for name, _, _ in rows if "." in name}
    for section in sections:
        with pytest.raises(ConfigError, match=rf"^{section}.not_a_field: unknown key"):
            load_config({section: {"not_a_field": 1}})


def test_a_config_is_a_pydantic_model_that_round_trips_through_yaml(tmp_path):
    config = load_config(None, ["algorithm.name=grpo", "optim.betas=[0.8, 0.9]"])
    assert isinstance(config, pydantic.BaseModel)
    assert isinstance(config.algorithm, AlgorithmConfig) and config.algorithm.name == "grpo"
    path = tmp_path / "config.yaml"
    path.write_text(config.to_yaml())
    assert load_config(path) == config
    assert load_config(config.to_dict()) == config
    assert yaml.safe_load(config.to_yaml()) == config.to_dict()


def test_validate_checks_a_config_changed_in_code_again():
    config = ExperimentConfig()
    config.optim.lr = -1.0  # no check on assignment: validate() is where it is caught
    with pytest.raises(ConfigError, match=r"^optim.lr: must be in \(0, 10\], got -1"):
        config.validate()
    config.optim.lr = 1e-3
    assert config.validate() == config


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"algorithm": None}, None),  # `algorithm:` with nothing under it: the defaults
        ({"algorithm": 5}, "algorithm: expected a mapping, got 5"),
        ({"optim": {"lr": True}}, "optim.lr: expected a number in (0, 10], got True"),
        ({"optim": {"lr": "5e-4"}}, None),  # YAML 1.1 reads 5e-4 as a string
        ({"model": {"num_layers": 2.0}}, "model.num_layers: expected an integer in [1, 1024]"),
        ({"model": {"warm_start": 1}}, "model.warm_start: expected true or false, got 1"),
        ({"env": {"kwargs": {1: 2}}}, "env.kwargs: expected a string as each key, got 1"),
        ({"algorithm": {"baseline_keys": [""]}}, "algorithm.baseline_keys[0]: must not be empty"),
        (
            {"runtime": {"torch_threads": "many"}},
            "runtime.torch_threads: expected an integer in [1, 4096] or 'auto', got 'many'",
        ),
        (
            {"runtime": {"ray_worker_resources": {"gpu_node": 0}}},
            "runtime.ray_worker_resources['gpu_node']: must be in (0, inf), got 0",
        ),
        (
            {"algorithm": {"clip_eps_low": 2}},
            "algorithm.clip_eps_low: must be in (0, 1], got 2",
        ),
        (
            {"algorithm": {"group_size": 3}},
            "algorithm.group_size: must divide rollout.batch_size (32), got 3",
        ),
        ({"model": {"device": "gpu"}}, "model.device: must be auto, cpu, cuda or cuda:N, got"),
    ],
)
def test_types_and_cross_field_rules_give_one_line_naming_the_field(data, message):
    if message is None:
        load_config(data)
        return
    with pytest.raises(ConfigError) as caught:
        load_config(data)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)
