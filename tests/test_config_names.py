"""Method and environment names are checked when the config loads, not when the run starts."""

from __future__ import annotations

import sys

import pytest

from sao_online.algorithms.registry import METHODS
from sao_online.config import ConfigError, load_config
from sao_online.environments.registry import BUILTIN_ENVS


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_built_in_method_loads(name):
    assert load_config(None, [f"algorithm.name={name}"]).algorithm.name == name


def test_an_unknown_method_is_refused_on_load_listing_the_choices():
    with pytest.raises(ConfigError) as caught:
        load_config({"algorithm": {"name": "ppo"}})
    message = str(caught.value)
    assert message.startswith("algorithm.name: unknown method 'ppo'; choose from sao, ")
    assert all(name in message for name in METHODS) and "MODULE:FACTORY" in message


def test_the_built_in_names_are_the_registrys(monkeypatch):
    # One list of names: a method added to the registry loads with no change to the config.
    monkeypatch.setitem(METHODS, "my_variant", METHODS["sao"])
    assert load_config(None, ["algorithm.name=my_variant"]).algorithm.name == "my_variant"


@pytest.mark.parametrize("name", ["my_methods:make_method", "lab.methods:build", "m:Factory.make"])
def test_a_module_factory_name_is_checked_for_its_form_only(name):
    assert load_config(None, [f"algorithm.name={name}"]).algorithm.name == name
    assert name.split(":")[0] not in sys.modules  # the factory is loaded when the method is built


@pytest.mark.parametrize("name", [":make", "my_methods:", "my methods:make", "a:b:c", "1mod:make"])
def test_a_malformed_module_factory_name_is_refused(name):
    with pytest.raises(ConfigError, match="^algorithm.name: unknown method"):
        load_config(None, [f"algorithm.name='{name}'"])


@pytest.mark.parametrize("env_id", sorted(BUILTIN_ENVS))
def test_every_built_in_environment_loads(env_id):
    assert load_config(None, [f"env.id={env_id}"]).env.id == env_id


def test_an_unregistered_environment_is_refused_on_load_saying_how_to_register_it():
    with pytest.raises(ConfigError) as caught:
        load_config({"env": {"id": "my_tasks/GuessRange-v0"}})
    message = str(caught.value)
    # Other tests may register a my_tasks/ id in this process: a suggestion can sit between.
    assert message.startswith("env.id: 'my_tasks/GuessRange-v0': not a registered environment")
    assert "; name the module that registers it in the id, 'MODULE:my_tasks/GuessRange-v0'" in (
        message
    )
    assert "\n" not in message


def test_a_module_prefixed_environment_is_not_imported_on_load():
    # Importing it runs the user's code: that happens where the run starts (check_env_id).
    config = load_config(None, ["env.id=no_such_tasks_module:my_tasks/GuessRange-v0"])
    assert config.env.id == "no_such_tasks_module:my_tasks/GuessRange-v0"
    assert "no_such_tasks_module" not in sys.modules


@pytest.mark.parametrize(
    "env_id", ["", "two words/Name-v0", "bad module:ns/Name-v0", "ns/Name-v0 ", "x" * 10_000]
)
def test_a_malformed_environment_id_is_refused_in_one_short_line(env_id):
    with pytest.raises(ConfigError, match=r"^env.id: '.*' is not a Gymnasium id: expected ") as e:
        load_config({"env": {"id": env_id}})
    assert len(str(e.value)) < 200
