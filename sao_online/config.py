"""Experiment configuration: dataclasses with help on every field, validated on load.

A config is YAML (or the same dict). Unknown keys are rejected and every error names the field
by its dotted path, e.g. ``algorithm.dis_eps_low: expected a number, got 'high'``. Command-line
overrides use the same paths: ``--set algorithm.dis_eps_low=0.2``.

Example:
    >>> cfg = load_config({"algorithm": {"name": "grpo"}, "budget": {"episodes": 64}})
    >>> cfg.algorithm.name, cfg.budget.episodes
    ('grpo', 64)
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A configuration value that is missing, unknown or of the wrong type; names the field."""


def _f(default: Any, help: str, **kwargs: Any) -> Any:
    if isinstance(default, list | dict):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help}, **kwargs)
    return field(default=default, metadata={"help": help}, **kwargs)


@dataclass
class EnvConfig:
    id: str = _f("sao_online/StyleShift-v0", "Gymnasium id of the environment.")
    kwargs: dict = _f({}, "Keyword arguments for gymnasium.make.")
    latency_mean: float = _f(0.0, "Mean simulated env latency per step in seconds (0 = none).")
    latency_sigma: float = _f(1.0, "Lognormal sigma of the simulated latency (long tail).")


@dataclass
class ModelConfig:
    name: str = _f("tiny", "'tiny' for the embedded byte-level Llama, or a local HF model path.")
    gguf_file: str | None = _f(None, "GGUF file inside `name` to load (transformers gguf_file=).")
    num_layers: int = _f(4, "Tiny model: transformer layers.")
    hidden_size: int = _f(128, "Tiny model: hidden size.")
    warm_start: bool = _f(True, "Start from the cached SFT warm start on oracle demonstrations.")
    warm_start_steps: int = _f(300, "SFT steps for the warm start (part of its cache key).")
    warm_start_seed: int = _f(0, "Seed of the warm start; shared by every method and run seed.")
    warm_start_lr: float = _f(5e-3, "SFT learning rate for the warm start.")
    warm_start_batch_size: int = _f(64, "SFT batch size (demonstrations) for the warm start.")


@dataclass
class AlgorithmConfig:
    name: str = _f("sao", "Method: sao, sao_running_mean, sao_prompt_mean, sao_lambda1, "
                   "sao_no_skip_obs, grpo, grpo_dis, dr_grpo, dapo, gspo, rloo.")
    group_size: int | None = _f(None, "Rollouts per prompt (1 for SAO; default 8 for group methods).")
    dis_eps_low: float = _f(0.3, "DIS band: tokens with ratio <= 1 - dis_eps_low get no gradient.")
    dis_eps_high: float = _f(5.0, "DIS band: tokens with ratio >= 1 + dis_eps_high get no gradient "
                                  "(coding tasks in the paper: 0.8 / 3.0).")
    clip_eps_low: float | None = _f(None, "PPO/GSPO lower clip (default 0.2; GSPO 3e-4).")
    clip_eps_high: float | None = _f(None, "PPO/GSPO upper clip (default 0.2; DAPO 0.28; GSPO 4e-4).")
    dual_clip: float | None = _f(None, "Dual-clip constant c for negative advantages (PPO objectives).")
    critic_updates: int = _f(2, "SAO: critic updates per policy update (K).")
    critic_lr_multiple: float = _f(5.0, "SAO: critic LR as a multiple of the policy LR.")
    critic_warmup_steps: int = _f(10, "SAO: critic-only learner steps before the policy trains.")
    freeze_critic_attention: bool = _f(True, "SAO: freeze the critic's attention parameters.")
    lambda_alpha: float = _f(1.5, "SAO: policy lambda = 1 - 1/(alpha * action tokens).")
    critic_lambda: float = _f(1.0, "SAO: GAE lambda for critic targets.")
    gamma: float = _f(1.0, "Discount over action tokens.")
    advantage_level: str = _f("token", "SAO: token, last_token or average (step-level ablations).")
    baseline_window: int = _f(128, "sao_running_mean: rewards in the running-mean baseline.")
    policy_lambda: float | None = _f(None, "SAO: fixed policy GAE lambda in [0, 1] (sao_lambda1: 1); "
                                     "null = length adaptive, 1 - 1/(lambda_alpha * l).")
    skip_observations: bool = _f(True, "SAO: GAE skips observation tokens (sao_no_skip_obs: false, "
                                 "observation tokens are ordinary steps).")
    baseline_keys: list = _f(["difficulty"], "sao_prompt_mean: env info keys whose values name an "
                             "episode's prompt class (e.g. [task, difficulty]).")
    prompt_baseline_window: int = _f(32, "sao_prompt_mean: rewards kept per prompt class.")


@dataclass
class OptimConfig:
    lr: float = _f(5e-4, "Policy learning rate (Adam).")
    betas: list = _f([0.9, 0.99], "Adam betas.")
    weight_decay: float = _f(0.0, "AdamW weight decay.")
    max_grad_norm: float = _f(1.0, "Gradient-norm clip for policy and critic.")


@dataclass
class RegularizerConfig:
    kl_coef: float = _f(0.0, "Per-token KL penalty to the warm-start policy (0 = off).")
    kl_estimator: str = _f("exact", "exact (over the vocabulary) or k3 (sampled tokens).")
    entropy_coef: float = _f(0.0, "Entropy bonus coefficient (0 = off).")


@dataclass
class RolloutConfig:
    batch_size: int = _f(32, "Trajectories per learner update (B).")
    num_slots: int = _f(64, "Episodes decoded concurrently per worker.")
    temperature: float = _f(1.0, "Sampling temperature (the learner uses the same).")
    top_p: float = _f(1.0, "Nucleus sampling threshold.")
    max_turns: int = _f(4, "Turn cap per episode (truncates).")
    max_action_tokens: int = _f(64, "Token cap per action (turn).")
    on_action_cap: str = _f("truncate", "An action reaching max_action_tokens: truncate (ends the "
                            "episode, no env step) or submit (the env gets the cut action).")
    max_episode_tokens: int = _f(384, "Token cap per episode (truncates).")


@dataclass
class RuntimeConfig:
    backend: str = _f("local", "sync, local (rollout-worker processes) or ray (Ray actors).")
    num_workers: int = _f(2, "Rollout workers (processes or Ray actors) of the asynchronous backends.")
    max_staleness: int = _f(4, "Bound on learner version minus a trajectory's oldest token version.")
    in_flight_updates: bool = _f(True, "Workers take new weights between decoding steps.")
    ray_address: str | None = _f(None, "Ray cluster to join ('auto', 'ray://host:port'); unset starts a "
                                 "private local Ray with num_workers CPUs.")


@dataclass
class BudgetConfig:
    episodes: int = _f(4500, "Episodes per run (matched across methods).")


@dataclass
class EvalConfig:
    every_updates: int = _f(0, "Evaluate every N updates (0 = off).")
    episodes_per_phase: int = _f(32, "Episodes per evaluated phase.")


@dataclass
class LoggingConfig:
    out: str = _f("runs", "Root of run directories: <out>/<experiment>/<method>/seed-<k>/.")
    flush_every: int = _f(256, "Episode records buffered before a parquet chunk is written.")
    checkpoint_every: int = _f(50, "Checkpoint every N updates (0 = only at the end).")


@dataclass
class ExperimentConfig:
    experiment: str = _f("default", "Experiment name (a folder of the run directory).")
    seed: int = _f(0, "Seed of everything in the run.")
    schedule: Any = _f(None, "Drift schedule: a dict in the YAML form, or a path to one.")
    env: EnvConfig = field(default_factory=EnvConfig, metadata={"help": "Environment."})
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "Policy model."})
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig, metadata={"help": "Method."})
    optim: OptimConfig = field(default_factory=OptimConfig, metadata={"help": "Optimiser."})
    regularizers: RegularizerConfig = field(default_factory=RegularizerConfig,
                                            metadata={"help": "KL and entropy terms."})
    rollout: RolloutConfig = field(default_factory=RolloutConfig, metadata={"help": "Sampling."})
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig, metadata={"help": "Runtime."})
    budget: BudgetConfig = field(default_factory=BudgetConfig, metadata={"help": "Budget."})
    eval: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "Evaluation."})
    logging: LoggingConfig = field(default_factory=LoggingConfig, metadata={"help": "Run directory."})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def validate(self) -> ExperimentConfig:
        """Check value ranges that types alone cannot; raises ConfigError naming the field."""
        checks = [
            ("budget.episodes", self.budget.episodes >= 1, "must be >= 1"),
            ("rollout.batch_size", self.rollout.batch_size >= 1, "must be >= 1"),
            ("rollout.num_slots", self.rollout.num_slots >= 1, "must be >= 1"),
            ("rollout.temperature", self.rollout.temperature > 0, "must be > 0"),
            ("rollout.top_p", 0 < self.rollout.top_p <= 1, "must be in (0, 1]"),
            ("rollout.max_turns", self.rollout.max_turns >= 1, "must be >= 1"),
            ("rollout.max_action_tokens", self.rollout.max_action_tokens >= 1, "must be >= 1"),
            ("rollout.on_action_cap", self.rollout.on_action_cap in ("truncate", "submit"),
             "must be truncate or submit"),
            ("runtime.backend", self.runtime.backend in ("sync", "local", "ray"),
             "must be sync, local or ray"),
            ("algorithm.dis_eps_low", 0 < self.algorithm.dis_eps_low <= 1, "must be in (0, 1]"),
            ("algorithm.dis_eps_high", self.algorithm.dis_eps_high > 0, "must be > 0"),
            ("runtime.max_staleness", self.runtime.max_staleness >= 0, "must be >= 0"),
            ("runtime.num_workers", self.runtime.num_workers >= 1, "must be >= 1"),
            ("optim.lr", self.optim.lr > 0, "must be > 0"),
            ("algorithm.critic_updates", self.algorithm.critic_updates >= 1, "must be >= 1"),
            ("algorithm.critic_warmup_steps", self.algorithm.critic_warmup_steps >= 0, "must be >= 0"),
            ("algorithm.policy_lambda", self.algorithm.policy_lambda is None
             or 0 <= self.algorithm.policy_lambda <= 1, "must be null or in [0, 1]"),
            ("algorithm.prompt_baseline_window", self.algorithm.prompt_baseline_window >= 1,
             "must be >= 1"),
            ("algorithm.baseline_keys", len(self.algorithm.baseline_keys) >= 1 and all(
                isinstance(key, str) and key for key in self.algorithm.baseline_keys),
             "must be a non-empty list of info key names"),
            ("algorithm.advantage_level", self.algorithm.advantage_level in
             ("token", "last_token", "average"), "must be token, last_token or average"),
            ("regularizers.kl_estimator", self.regularizers.kl_estimator in ("exact", "k3"),
             "must be exact or k3"),
            ("regularizers.kl_coef", self.regularizers.kl_coef >= 0, "must be >= 0"),
        ]
        for name, ok, why in checks:
            if not ok:
                raise ConfigError(f"{name}: {why}, got {_get_path(self, name)!r}")
        group_size = self.algorithm.group_size
        if group_size is not None and (group_size < 1 or self.rollout.batch_size % group_size):
            raise ConfigError(
                f"algorithm.group_size: must be >= 1 and divide rollout.batch_size "
                f"({self.rollout.batch_size}), got {group_size}")
        return self


def _get_path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _check_type(path: str, value: Any, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _check_type(path, value, option)
            except ConfigError:
                continue
        names = " or ".join(getattr(o, "__name__", str(o)) for o in options)
        raise ConfigError(f"{path}: expected {names}, got {value!r}")
    if annotation is Any:
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, str):
            try:  # YAML reads 5e-4 as a string; accept numeric strings.
                value = float(value)
            except ValueError:
                raise ConfigError(f"{path}: expected a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    if annotation in (dict, list) or origin in (dict, list):
        expected = origin or annotation
        if not isinstance(value, expected):
            raise ConfigError(f"{path}: expected a {expected.__name__}, got {value!r}")
        return value
    if dataclasses.is_dataclass(annotation):
        return _build(annotation, value, path)
    return value


def _build(cls: type, data: Any, path: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"
            raise ConfigError(f"{path + '.' if path else ''}{key}: unknown key{hint}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _check_type(f"{path + '.' if path else ''}{f.name}", data[f.name], hints[f.name])
    return cls(**kwargs)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``a.b.c=value`` (value read as YAML) into (["a", "b", "c"], value)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. algorithm.dis_eps_low=0.2")
    key, raw = text.split("=", 1)
    if not key.strip():
        raise ConfigError(f"--set {text!r}: empty key")
    return key.strip().split("."), yaml.safe_load(raw)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``key.path=value`` override applied."""
    import copy

    data = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for key in keys[:-1]:
            if not isinstance(node.get(key, {}), dict):
                raise ConfigError(f"--set {text!r}: {key} is not a section")
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return data


def load_config(source: str | Path | dict[str, Any] | None = None,
                overrides: list[str] | None = None) -> ExperimentConfig:
    """Load, override and validate an experiment config.

    Args:
        source: a YAML file path, a dict, or None for all defaults.
        overrides: ``key.path=value`` strings applied after loading.

    Raises:
        ConfigError: naming the offending field.
    """
    if source is None:
        data: dict[str, Any] = {}
    elif isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        data = yaml.safe_load(path.read_text()) or {}
        if isinstance(data.get("schedule"), str):
            schedule_path = Path(data["schedule"])
            if not schedule_path.is_absolute() and not schedule_path.exists():
                schedule_path = path.parent / schedule_path
            data = {**data, "schedule": str(schedule_path)}
    if overrides:
        data = apply_overrides(data, overrides)
    return _build(ExperimentConfig, data, "").validate()


def describe_fields(cls: type = ExperimentConfig, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted name, default, help) for every field, for ``--help``-style listings."""
    rows = []
    for f in dataclasses.fields(cls):
        name = prefix + f.name
        if dataclasses.is_dataclass(f.default_factory if f.default_factory is not dataclasses.MISSING else None):
            rows.extend(describe_fields(f.default_factory, name + "."))
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        rows.append((name, default, f.metadata.get("help", "")))
    return rows
