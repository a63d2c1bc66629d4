"""The experiment config: its sections, and the checks that read more than one field."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from sao_online.config.errors import ConfigError, ConfigWarning, one_line
from sao_online.config.model_presets import apply_model_preset
from sao_online.config.names import SAFE_NAME, check_folder_name
from sao_online.config.sections import (
    SEED,
    AlgorithmConfig,
    BudgetConfig,
    EnvConfig,
    EvalConfig,
    LoggingConfig,
    ModelConfig,
    OptimConfig,
    RegularizerConfig,
    RolloutConfig,
    RuntimeConfig,
    Section,
)


def _path_as_text(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


class ExperimentConfig(Section):
    """An experiment: one method, one seed, one environment and schedule, one budget.

    Example:
        >>> config = ExperimentConfig.model_validate({"algorithm": {"name": "grpo"}})
        >>> config.algorithm.name, config.budget.episodes
        ('grpo', 4500)
    """

    experiment: Annotated[StrictStr, AfterValidator(check_folder_name)] = Field(
        "default",
        description="Experiment name (a folder of the run directory).",
        json_schema_extra={"pattern": SAFE_NAME.pattern},
    )
    seed: StrictInt = Field(0, **SEED, description="Seed of everything in the run.")
    schedule: Annotated[dict[str, Any] | StrictStr | None, BeforeValidator(_path_as_text)] = Field(
        None, description="Drift schedule: a dict in the YAML form, or a path to one."
    )
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="Policy model.")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig, description="Method.")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="Optimiser.")
    regularizers: RegularizerConfig = Field(
        default_factory=RegularizerConfig, description="KL and entropy terms."
    )
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Sampling.")
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig, description="Runtime.")
    budget: BudgetConfig = Field(default_factory=BudgetConfig, description="Budget.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Evaluation.")
    logging: LoggingConfig = Field(default_factory=LoggingConfig, description="Run directory.")

    @model_validator(mode="before")
    @classmethod
    def _empty_sections_are_defaults(cls, data: Any) -> Any:
        # `algorithm:` with nothing under it reads as null in YAML: the section's defaults.
        if isinstance(data, dict):
            return {
                key: value
                for key, value in data.items()
                if not (value is None and _is_section(key))
            }
        return data

    @model_validator(mode="after")
    def _check_across_sections(self) -> ExperimentConfig:
        group_size = self.algorithm.group_size
        if group_size is not None and self.rollout.batch_size % group_size:
            raise ConfigError(
                f"algorithm.group_size: must divide rollout.batch_size "
                f"({self.rollout.batch_size}), got {group_size}"
            )
        # At most: under match 'prompts' a group (at most a batch) takes one of the budget.
        episodes = self.budget.episodes * (
            self.rollout.batch_size if self.budget.match == "prompts" else 1
        )
        updates = -(-episodes // self.rollout.batch_size)
        if self.runtime.max_staleness > updates:
            if self.runtime.backend != "sync":  # sync never reads it
                warnings.warn(
                    ConfigWarning(
                        f"runtime.max_staleness={self.runtime.max_staleness} is more than the "
                        f"{updates} update(s) the budget allows; using {updates} (no trajectory "
                        "can be staler, so the schedule is the same)"
                    ),
                    stacklevel=2,
                )
            self.runtime.max_staleness = updates
        return self

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (what ``load_config`` reads back to an equal config).

        ``runtime.sim`` is left out unless the backend is ``simulated``, the only one that
        reads it: a run's recorded config (and its hash) says only what the run depends on.
        """
        data = self.model_dump()
        if self.runtime.backend != "simulated":
            del data["runtime"]["sim"]
        return data

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def validate(self) -> ExperimentConfig:  # type: ignore[override]
        """This config checked again, as loading checks it (after changes made in code).

        Raises:
            ConfigError: naming the field at fault.
        """
        return validated(self.to_dict())


def validated(data: dict[str, Any]) -> ExperimentConfig:
    """``data`` (a config's sections, overrides applied) as a checked ``ExperimentConfig``: the
    model's preset fills what ``data`` leaves unset, then every field and cross-field check runs.

    Raises:
        ConfigError: one line naming the offending field and what it allows.
    """
    data = apply_model_preset(data)  # the model's settings beyond the defaults, where unset
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as error:
        raise one_line(error, ExperimentConfig) from None


def _is_section(key: str) -> bool:
    spec = ExperimentConfig.model_fields.get(key)
    return (
        spec is not None
        and isinstance(spec.annotation, type)
        and issubclass(spec.annotation, Section)
    )


def with_added_fields(
    recorded: Mapping[str, Any],
    current: Mapping[str, Any],
    model: type[Section] = ExperimentConfig,
) -> dict[str, Any]:
    """``recorded``, a config an earlier version wrote, with the fields it lacks that ``current``
    holds at their default taken from ``current``.

    A field added to the config after ``recorded`` was written then does not set the two apart
    while it is left at its default, which reproduces what ran before the field existed; set to
    anything else, it remains a difference. Sections are filled field by field; ``model`` is
    the section both mappings are (``AlgorithmConfig`` for an ``algorithm`` section alone).

    Example:
        >>> old = {"name": "sao", "dis_eps_low": 0.3}
        >>> new = AlgorithmConfig(name="sao").model_dump()
        >>> sorted(set(with_added_fields(old, new, AlgorithmConfig)) ^ set(new))
        []
        >>> "tis_cap" in with_added_fields(old, {**new, "tis_cap": 3.0}, AlgorithmConfig)
        False
    """
    defaults = model().model_dump()
    filled = dict(recorded)
    for name, field in model.model_fields.items():
        if name not in current:
            continue
        section = field.annotation
        if isinstance(section, type) and issubclass(section, Section):
            theirs = filled.get(name, {})  # a whole section added since: each field as above
            if isinstance(theirs, Mapping) and isinstance(current[name], Mapping):
                inner = with_added_fields(theirs, current[name], section)
                if inner or name in filled:
                    filled[name] = inner
        elif name not in filled and current[name] == defaults[name]:
            filled[name] = current[name]
    return filled
