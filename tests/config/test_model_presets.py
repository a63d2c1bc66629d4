"""The tiny model's preset fills in what a config leaves unset, and nothing else."""

from __future__ import annotations

import pytest

from sao_online.config import ConfigError, load_config
from sao_online.config.model_presets import MODEL_PRESETS, apply_model_preset


def test_the_tiny_preset_applies_where_the_config_sets_nothing():
    assert MODEL_PRESETS["tiny"] == {"regularizers.kl_coef": 0.6}
    assert load_config({}).regularizers.kl_coef == 0.6  # the default model is tiny
    assert load_config({"model": {"name": "tiny"}}).regularizers.kl_coef == 0.6
    config = load_config({"regularizers": {"entropy_coef": 0.01}})  # a section, not the field
    assert (config.regularizers.kl_coef, config.regularizers.entropy_coef) == (0.6, 0.01)


@pytest.mark.parametrize("value", [0.0, 0.3, 2.0])
def test_a_value_the_config_or_an_override_sets_is_kept(value):
    assert load_config({"regularizers": {"kl_coef": value}}).regularizers.kl_coef == value
    assert load_config(None, [f"regularizers.kl_coef={value}"]).regularizers.kl_coef == value


def test_other_models_get_the_defaults_and_bad_sections_are_named_by_the_loader():
    assert load_config({"model": {"name": "smollm2-135m"}}).regularizers.kl_coef == 0.0
    assert apply_model_preset({"model": {"name": "/some/folder"}}) == {
        "model": {"name": "/some/folder"}
    }
    with pytest.raises(ConfigError, match="regularizers: expected a mapping"):
        load_config({"regularizers": "strong"})
    data = {"model": {"num_layers": 2}}
    assert apply_model_preset(data) is not data and data == {"model": {"num_layers": 2}}
