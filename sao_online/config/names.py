"""Names a config gives: folders, devices, methods and environments, checked on load.

Each check returns the name or raises ``ValueError`` with what is allowed (the loader puts the
field's dotted path in front).
"""

from __future__ import annotations

import re

from sao_online.config.errors import ConfigError, short_repr
from sao_online.config.method_names import METHOD_NAMES
from sao_online.util.suggestions import did_you_mean

# Experiment and method names become folders of a run's path: no separators, no "..".
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
# ``dotted.module:attribute``: where a user's method factory lives.
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
METHOD_FACTORY = re.compile(rf"{_DOTTED}:{_DOTTED}")
# A Gymnasium id, ``[namespace/]Name[-vN]`` (as gymnasium.envs.registration parses it).
_ENV_ID = re.compile(r"(?:[\w-]+/)?[\w.-]+")
_MODULE = re.compile(_DOTTED)


def check_folder_name(name: str) -> str:
    """``name`` if it can name a folder of a run's path (see ``SAFE_NAME``)."""
    if not SAFE_NAME.match(name):
        raise ValueError(
            f"{short_repr(name)} cannot name a folder (letters, digits, '_', '-' and '.', "
            "starting with a letter or digit; at most 128 characters)"
        )
    return name


def check_device(device: str) -> str:
    """``device`` if it is auto, cpu, cuda or cuda:N."""
    if not DEVICE.fullmatch(device):
        raise ValueError(f"must be auto, cpu, cuda or cuda:N, got {short_repr(device)}")
    return device


def builtin_methods() -> tuple[str, ...]:
    """The names of the built-in methods (``sao_online.config.method_names``: no torch import)."""
    return METHOD_NAMES


def check_method_name(name: str) -> str:
    """``name`` if it is a built-in method or names a factory as ``MODULE:FACTORY``.

    Only the form of ``MODULE:FACTORY`` is checked here; the factory is loaded when the method
    is built.
    """
    if METHOD_FACTORY.fullmatch(name):
        return name
    methods = builtin_methods()
    if name not in methods:
        raise ValueError(
            f"unknown method {short_repr(name)}{did_you_mean(name, methods)}; choose from "
            f"{', '.join(methods)}, or name your own as MODULE:FACTORY"
        )
    return name


def check_env_name(env_id: str) -> str:
    """``env_id`` if it is a registered Gymnasium id or has the form ``MODULE:namespace/Name-vN``.

    An id without a module must be registered already (the built-in ``sao_online/`` ids are
    registered by importing ``sao_online.environments``). With a module, only the form is
    checked here: importing the module runs the user's code, which happens where the run
    starts (``check_env_id``), in the processes that make the environment.
    """
    module, has_module, name = env_id.rpartition(":")
    if (
        len(env_id) > 200
        or not _ENV_ID.fullmatch(name)
        or (has_module and not _MODULE.fullmatch(module))
    ):
        raise ValueError(
            f"{short_repr(env_id)} is not a Gymnasium id: expected namespace/Name-vN, or "
            "MODULE:namespace/Name-vN to import the module that registers it"
        )
    if has_module:
        return env_id
    from sao_online.environments import EnvNotFoundError, check_env_id

    try:
        check_env_id(env_id, field="env.id")
    except EnvNotFoundError as error:
        raise ConfigError(str(error)) from None  # names the field and how to register the id
    return env_id
