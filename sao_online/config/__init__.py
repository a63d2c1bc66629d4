"""Experiment configuration: pydantic models with help on every field, validated on load.

A config is YAML (or the same dict). Unknown keys are rejected and every error is one line that
names the field by its dotted path and what it allows, e.g. ``algorithm.dis_eps_low: must be in
(0, 1], got 2``. Command-line overrides use the same paths: ``--set algorithm.dis_eps_low=0.2``.

Example:
    >>> cfg = load_config({"algorithm": {"name": "grpo"}, "budget": {"episodes": 64}})
    >>> cfg.algorithm.name, cfg.budget.episodes
    ('grpo', 64)
"""

from sao_online.config.errors import ConfigError, ConfigWarning, short_repr
from sao_online.config.experiment import ExperimentConfig, with_added_fields
from sao_online.config.loading import apply_overrides, describe_fields, load_config, parse_override
from sao_online.config.names import SAFE_NAME
from sao_online.config.sections import (
    ActionCapPolicy,
    AdvantageLevel,
    AlgorithmConfig,
    Backend,
    BudgetConfig,
    BudgetMatch,
    EnvConfig,
    EvalConfig,
    KLEstimator,
    LoggingConfig,
    ModelConfig,
    ModelDtype,
    ObservationRole,
    OptimConfig,
    RegularizerConfig,
    RolloutConfig,
    RuntimeConfig,
    SimCostConfig,
    SimPreset,
    WarmStartRegimes,
)

__all__ = [
    "SAFE_NAME",
    "ActionCapPolicy",
    "AdvantageLevel",
    "AlgorithmConfig",
    "Backend",
    "BudgetConfig",
    "BudgetMatch",
    "ConfigError",
    "ConfigWarning",
    "EnvConfig",
    "EvalConfig",
    "ExperimentConfig",
    "KLEstimator",
    "LoggingConfig",
    "ModelConfig",
    "ModelDtype",
    "ObservationRole",
    "OptimConfig",
    "RegularizerConfig",
    "RolloutConfig",
    "RuntimeConfig",
    "SimCostConfig",
    "SimPreset",
    "WarmStartRegimes",
    "apply_overrides",
    "describe_fields",
    "load_config",
    "parse_override",
    "short_repr",
    "with_added_fields",
]
