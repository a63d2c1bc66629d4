"""Method and environment names are checked when the config loads, not when the run starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sao_online.algorithms import SINGLE_ROLLOUT_METHODS, build_method
from sao_online.algorithms.registry import METHODS
from sao_online.config import ConfigError, load_config
from sao_online.config.names import builtin_methods
from sao_online.environments.registry import BUILTIN_ENVS
from sao_online.jobs.methods import method_overrides


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_built_in_method_loads(name):
    assert load_config(None, [f"algorithm.name={name}"]).algorithm.name == name


def test_an_unknown_method_is_refused_on_load_listing_the_choices():
    with pytest.raises(ConfigError) as caught:
        load_config({"algorithm": {"name": "ppo"}})
    message = str(caught.value)
    assert message.startswith("algorithm.name: unknown method 'ppo'; choose from sao, ")
    assert all(name in message for name in METHODS) and "MODULE:FACTORY" in message


def test_the_built_in_names_are_the_registrys():
    # One list of names (sao_online.config.method_names): the config accepts exactly the registry's,
    # in its order, and each name's factory builds the method of that name.
    assert builtin_methods() == tuple(METHODS)
    assert set(METHODS) > SINGLE_ROLLOUT_METHODS
    for name in METHODS:
        method = build_method(load_config(None, method_overrides(name)))
        assert method.name == name
        assert (method.group_size == 1) == (name in SINGLE_ROLLOUT_METHODS)


@pytest.mark.parametrize("name", ["grpo", "sao", "my_methods:make_method", "sao_lamda1"])
def test_loading_a_config_that_names_a_method_leaves_torch_unimported(tmp_path, name):
    # The config (and so `sao-online run`, before it starts its worker server) checks the name
    # from a torch-free table; torch takes seconds to import.
    config = tmp_path / "experiment.yaml"
    config.write_text(f"algorithm: {{name: {name}}}\n")
    code = (
        "import sys\n"
        "from sao_online.config import ConfigError, load_config\n"
        "try:\n"
        "    print(load_config(sys.argv[1]).algorithm.name)\n"
        "except ConfigError as error:\n"
        "    print(error)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'"
        " or m.startswith('sao_online.algorithms')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(config)], capture_output=True, text=True, check=True
    )
    loaded, imported = done.stdout.strip().splitlines()
    if name == "sao_lamda1":  # a typo: refused with a suggestion, from the same table
        assert "unknown method 'sao_lamda1'" in loaded and "sao_lambda1" in loaded
    else:
        assert loaded == name
    assert imported == "[]"


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
