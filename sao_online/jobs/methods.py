"""Which folder a method's runs go in and the overrides that make a run of it, as ``compare``
and the benchmark both build their runs."""

from __future__ import annotations

import warnings

from sao_online.algorithms import build_method
from sao_online.config import ConfigError, ConfigWarning, ExperimentConfig, load_config
from sao_online.config.method_names import SINGLE_ROLLOUT_METHODS


def method_folders(base: ExperimentConfig, methods: list[str]) -> dict[str, str]:
    """Method spec -> the folder its runs go in: the name of the Method it builds.

    Each method is built here, in the parent, from ``base`` (the config with its overrides): a
    built-in name is its own folder; ``MODULE:FACTORY`` is imported and called, and its runs go
    in the folder of the ``Method.name`` it returns (checked to name a folder and to be no
    built-in's name), so a factory that is missing, raises or returns something else fails
    before any run starts (one line naming the method), and two specs that build methods of one
    name are refused.

    Raises:
        ConfigError: an unknown method, a setting it refuses, a failing factory, or two
            methods of one name.
    """
    folders: dict[str, str] = {}
    for method in methods:
        with warnings.catch_warnings():  # what loading the base config warned, said once
            warnings.simplefilter("ignore", ConfigWarning)
            config = load_config(base.to_dict(), method_overrides(method))
        folders[method] = build_method(config).name
    for method, name in folders.items():
        clash = [spec for spec, other in folders.items() if other == name and spec != method]
        if clash:
            raise ConfigError(
                f"--methods: {method!r} and {clash[0]!r} both make a method named {name!r}"
            )
    return folders


def method_overrides(method: str) -> list[str]:
    """The overrides that make a run of ``method`` (one rollout per prompt: group size unset)."""
    run_overrides = [f"algorithm.name={method}"]
    if method in SINGLE_ROLLOUT_METHODS:
        run_overrides.append("algorithm.group_size=null")
    return run_overrides
