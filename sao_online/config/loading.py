"""Loading a config: a YAML file (bounded, no aliases) or a dict, then ``--set`` overrides."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sao_online.config.errors import ConfigError, short_repr
from sao_online.config.experiment import ExperimentConfig, validated
from sao_online.util.safe_yaml import YamlInputError, load_yaml_file, load_yaml_text


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``a.b.c=value`` (value read as YAML) into (["a", "b", "c"], value)."""
    if "=" not in text:
        raise ConfigError(
            f"--set {short_repr(text)}: expected key=value, e.g. algorithm.dis_eps_low=0.2"
        )
    key, raw = text.split("=", 1)
    if not key.strip():
        raise ConfigError(f"--set {short_repr(text)}: empty key")
    try:
        return key.strip().split("."), load_yaml_text(raw, f"--set {key.strip()}")
    except YamlInputError as error:
        raise ConfigError(str(error)) from None


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``key.path=value`` override applied."""
    data = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for key in keys[:-1]:
            if not isinstance(node.get(key, {}), dict):
                raise ConfigError(f"--set {short_repr(text)}: {key} is not a section")
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return data


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = load_yaml_file(path, "config file")
    except YamlInputError as error:
        raise ConfigError(str(error)) from None
    if data is None or data == {}:
        # All defaults would start the default experiment (a warm start, 4,500 episodes) from
        # what is most likely a file saved empty by mistake.
        raise ConfigError(
            f"{path}: empty config (no section set); `sao-online configs copy demo` gives one to "
            "edit"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of config sections, got a {type(data).__name__}"
        )
    if isinstance(data.get("schedule"), str):  # relative to the config file when not found here
        schedule_path = Path(data["schedule"])
        if not schedule_path.is_absolute() and not schedule_path.exists():
            schedule_path = path.parent / schedule_path
        data = {**data, "schedule": str(schedule_path)}
    return data


def load_config(
    source: str | Path | dict[str, Any] | None = None, overrides: list[str] | None = None
) -> ExperimentConfig:
    """Load, override and validate an experiment config.

    Args:
        source: a YAML file path, a dict, or None for all defaults.
        overrides: ``key.path=value`` strings applied after loading.

    Raises:
        ConfigError: one line naming the offending field and what it allows.

    Example:
        >>> config = load_config({"algorithm": {"name": "grpo"}}, ["budget.episodes=64"])
        >>> config.algorithm.name, config.budget.episodes
        ('grpo', 64)
    """
    if source is None:
        data: dict[str, Any] = {}
    elif isinstance(source, dict):
        data = source
    elif isinstance(source, str | Path):
        data = _read_file(Path(source))
    else:
        raise ConfigError(f"config: expected a mapping or a file path, got {type(source).__name__}")
    if overrides:
        data = apply_overrides(data, overrides)
    return validated(data)


def describe_fields(
    cls: type[BaseModel] = ExperimentConfig, prefix: str = ""
) -> list[tuple[str, Any, str]]:
    """(dotted name, default, help) for every field, for ``--help``-style listings."""
    rows = []
    for name, spec in cls.model_fields.items():
        if isinstance(spec.annotation, type) and issubclass(spec.annotation, BaseModel):
            rows.extend(describe_fields(spec.annotation, f"{prefix}{name}."))
        else:
            default = spec.get_default(call_default_factory=True)
            rows.append((prefix + name, default, spec.description or ""))
    return rows
