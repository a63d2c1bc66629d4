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
import math
import re
import reprlib
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from sao_online.config_ranges import range_problems
from sao_online.safe_yaml import YamlInputError, load_yaml_text

#: Values of the fixed-choice fields (validated on load; the JSON Schema lists them as enums).
Backend = Literal["sync", "local", "ray"]
KLEstimator = Literal["exact", "k3"]
AdvantageLevel = Literal["token", "last_token", "average"]
ActionCapPolicy = Literal["truncate", "submit"]
WarmStartRegimes = Literal["space", "schedule"]
ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]
ObservationRole = Literal["user", "tool"]

# Experiment and method names become folders of a run's path: no separators, no "..".
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class ConfigError(ValueError):
    """A configuration value that is missing, unknown or of the wrong type; names the field."""


class ConfigWarning(UserWarning):
    """A setting that was adjusted on load (the message says what and why)."""


def _first_line(error: BaseException, limit: int = 160) -> str:
    text = str(error).strip().splitlines()
    return text[0][:limit] if text else type(error).__name__


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, never building much more of a huge value."""
    bounded = reprlib.Repr()
    bounded.maxlevel, bounded.maxstring, bounded.maxother, bounded.maxlong = 3, limit, limit, limit
    bounded.maxlist = bounded.maxdict = bounded.maxtuple = bounded.maxset = 6
    text = bounded.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _f(default: Any, help: str, **kwargs: Any) -> Any:
    if isinstance(default, list | dict):
        return field(
            default_factory=lambda d=default: type(d)(d), metadata={"help": help}, **kwargs
        )
    return field(default=default, metadata={"help": help}, **kwargs)


@dataclass
class EnvConfig:
    id: str = _f("sao_online/StyleShift-v0", "Gymnasium id of the environment.")
    kwargs: dict = _f({}, "Keyword arguments for gymnasium.make.")
    latency_mean: float = _f(0.0, "Mean simulated env latency per step in seconds (0 = none).")
    latency_sigma: float = _f(1.0, "Lognormal sigma of the simulated latency (long tail).")

    def make(self, **extra: Any) -> Any:
        """``gymnasium.make(id, **kwargs)``; an unknown id or bad kwargs raise ConfigError."""
        import gymnasium

        import sao_online.environments  # noqa: F401  (registers the environments)

        try:
            return gymnasium.make(self.id, **extra, **self.kwargs)
        except gymnasium.error.Error as error:
            raise ConfigError(f"env.id: {short_repr(self.id)}: {_first_line(error)}") from None
        except (TypeError, ValueError) as error:
            raise ConfigError(f"env.kwargs: {_first_line(error)}") from None


@dataclass
class ModelConfig:
    name: str = _f(
        "tiny",
        "'tiny' (the embedded byte-level Llama), a packaged model "
        "('smollm2-135m'), or a local HF model folder. Never downloaded.",
    )
    gguf_file: str | None = _f(
        None, "GGUF file inside the folder `name` (transformers gguf_file=)."
    )
    device: str = _f(
        "auto",
        "auto (CUDA when available), cpu, cuda or cuda:N; learner and rollout workers run there.",
    )
    dtype: ModelDtype = _f(
        "auto", "auto (bfloat16 on CUDA, float32 on CPU), float32, bfloat16 or float16."
    )
    system_prompt: str | None = _f(
        None,
        "System message before the first observation (None: "
        "the chat template's own default, if any).",
    )
    observation_role: ObservationRole = _f(
        "user",
        "Chat role of environment observations after "
        "the first: user or tool (the template must know it).",
    )
    num_layers: int = _f(4, "Tiny model: transformer layers.")
    hidden_size: int = _f(128, "Tiny model: hidden size.")
    warm_start: bool = _f(True, "Start from the cached SFT warm start on oracle demonstrations.")
    warm_start_steps: int = _f(300, "SFT steps for the warm start (part of its cache key).")
    warm_start_seed: int = _f(0, "Seed of the warm start; shared by every method and run seed.")
    warm_start_lr: float = _f(5e-3, "SFT learning rate for the warm start.")
    warm_start_batch_size: int = _f(64, "SFT batch size (demonstrations) for the warm start.")
    warm_start_regimes: WarmStartRegimes = _f(
        "space",
        "Regimes of the warm-start demonstrations: 'space' draws theta uniformly from "
        "the env's drift space, 'schedule' from the phases the run's schedule visits "
        "within the budget.",
    )


@dataclass
class AlgorithmConfig:
    name: str = _f(
        "sao",
        "Method: sao, sao_running_mean, sao_prompt_mean, sao_lambda1, "
        "sao_no_skip_obs, grpo, grpo_dis, dr_grpo, dapo, gspo, rloo, frozen (the warm "
        "start, never updated), or MODULE:FACTORY, a factory(algorithm_config, "
        "max_action_tokens) -> Method in a module of your own.",
    )
    group_size: int | None = _f(
        None, "Rollouts per prompt (1 for SAO; default 8 for group methods)."
    )
    dis_eps_low: float = _f(0.3, "DIS band: tokens with ratio <= 1 - dis_eps_low get no gradient.")
    dis_eps_high: float = _f(
        5.0,
        "DIS band: tokens with ratio >= 1 + dis_eps_high get no gradient "
        "(coding tasks in the paper: 0.8 / 3.0).",
    )
    clip_eps_low: float | None = _f(None, "PPO/GSPO lower clip (default 0.2; GSPO 3e-4).")
    clip_eps_high: float | None = _f(
        None, "PPO/GSPO upper clip (default 0.2; DAPO 0.28; GSPO 4e-4)."
    )
    dual_clip: float | None = _f(
        None, "Dual-clip constant c for negative advantages (PPO objectives)."
    )
    critic_updates: int = _f(2, "SAO: critic updates per policy update (K).")
    critic_lr_multiple: float = _f(5.0, "SAO: critic LR as a multiple of the policy LR.")
    critic_warmup_steps: int = _f(10, "SAO: critic-only learner steps before the policy trains.")
    freeze_critic_attention: bool = _f(True, "SAO: freeze the critic's attention parameters.")
    lambda_alpha: float = _f(1.5, "SAO: policy lambda = 1 - 1/(alpha * action tokens).")
    critic_lambda: float = _f(1.0, "SAO: GAE lambda for critic targets.")
    gamma: float = _f(1.0, "Discount over action tokens.")
    advantage_level: AdvantageLevel = _f(
        "token", "SAO: token, last_token or average (step-level ablations)."
    )
    baseline_window: int = _f(128, "sao_running_mean: rewards in the running-mean baseline.")
    policy_lambda: float | None = _f(
        None,
        "SAO: fixed policy GAE lambda in [0, 1] (sao_lambda1: 1); "
        "null = length adaptive, 1 - 1/(lambda_alpha * l).",
    )
    skip_observations: bool = _f(
        True,
        "SAO: GAE skips observation tokens (sao_no_skip_obs: false, "
        "observation tokens are ordinary steps).",
    )
    baseline_keys: list = _f(
        ["difficulty"],
        "sao_prompt_mean: env info keys whose values name an "
        "episode's prompt class (e.g. [task, difficulty]).",
    )
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
    kl_estimator: KLEstimator = _f("exact", "exact (over the vocabulary) or k3 (sampled tokens).")
    entropy_coef: float = _f(0.0, "Entropy bonus coefficient (0 = off).")


@dataclass
class RolloutConfig:
    batch_size: int = _f(32, "Trajectories per learner update (B).")
    num_slots: int = _f(64, "Episodes decoded concurrently per worker.")
    temperature: float = _f(1.0, "Sampling temperature (the learner uses the same).")
    top_p: float = _f(1.0, "Nucleus sampling threshold.")
    max_turns: int = _f(4, "Turn cap per episode (truncates).")
    max_action_tokens: int = _f(64, "Token cap per action (turn).")
    on_action_cap: ActionCapPolicy = _f(
        "truncate",
        "An action reaching max_action_tokens: truncate (ends the "
        "episode, no env step) or submit (the env gets the cut action).",
    )
    max_episode_tokens: int = _f(384, "Token cap per episode (truncates).")
    lean_forward: bool | None = _f(
        None,
        "Decode with the hand-written Llama/Qwen2 forward (same "
        "logits, less overhead): null = where supported, true = "
        "require it, false = the Hugging Face forward.",
    )


@dataclass
class RuntimeConfig:
    backend: Backend = _f("local", "sync, local (rollout-worker processes) or ray (Ray actors).")
    num_workers: int = _f(
        2, "Rollout workers (processes or Ray actors) of the asynchronous backends."
    )
    max_staleness: int = _f(
        4, "Bound on learner version minus a trajectory's oldest token version."
    )
    in_flight_updates: bool = _f(True, "Workers take new weights between decoding steps.")
    torch_threads: int | Literal["auto"] = _f(
        "auto",
        "Torch threads of the learner process: 'auto' counts the "
        "cores this process may use (affinity) minus those busy with "
        "other work (sampled from /proc/stat) and, for local/ray, minus "
        "one per rollout worker (at least 1); a number is used as is.",
    )
    ray_worker_resources: dict = _f(
        {},
        "Ray custom resources each rollout actor requests, e.g. "
        "{rollout_node: 1} to place the actors on the nodes that "
        "offer it (started with --resources).",
    )
    ray_address: str | None = _f(
        None,
        "Ray cluster to join ('auto', 'ray://host:port'); unset starts a "
        "private local Ray with num_workers CPUs.",
    )


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
    tensorboard: bool = _f(
        False,
        "Write TensorBoard event files under <run>/tensorboard/ (needs "
        "the tensorboard package: pip install 'sao-online[tensorboard]').",
    )
    transcripts_every: int = _f(
        50,
        "Keep every N-th episode as text in <run>/transcripts.jsonl "
        "(`sao-online show RUN` prints them; 0 = none).",
    )


@dataclass
class ExperimentConfig:
    experiment: str = _f("default", "Experiment name (a folder of the run directory).")
    seed: int = _f(0, "Seed of everything in the run.")
    schedule: Any = _f(None, "Drift schedule: a dict in the YAML form, or a path to one.")
    env: EnvConfig = field(default_factory=EnvConfig, metadata={"help": "Environment."})
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "Policy model."})
    algorithm: AlgorithmConfig = field(
        default_factory=AlgorithmConfig, metadata={"help": "Method."}
    )
    optim: OptimConfig = field(default_factory=OptimConfig, metadata={"help": "Optimiser."})
    regularizers: RegularizerConfig = field(
        default_factory=RegularizerConfig, metadata={"help": "KL and entropy terms."}
    )
    rollout: RolloutConfig = field(default_factory=RolloutConfig, metadata={"help": "Sampling."})
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig, metadata={"help": "Runtime."})
    budget: BudgetConfig = field(default_factory=BudgetConfig, metadata={"help": "Budget."})
    eval: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "Evaluation."})
    logging: LoggingConfig = field(
        default_factory=LoggingConfig, metadata={"help": "Run directory."}
    )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def validate(self) -> ExperimentConfig:
        """Check value ranges that types alone cannot; raises ConfigError naming the field.

        Every numeric field has a range (``config_ranges.RANGES``). A staleness bound beyond the
        number of updates the budget allows is lowered to it, with a ``ConfigWarning``.
        """
        for name, why in range_problems(lambda dotted: _get_path(self, dotted)):
            raise ConfigError(f"{name}: {why}")
        resources = self.runtime.ray_worker_resources
        if not all(
            isinstance(name, str)
            and not isinstance(amount, bool)
            and isinstance(amount, int | float)
            and 0 < amount < math.inf
            for name, amount in resources.items()
        ):
            raise ConfigError(
                f"runtime.ray_worker_resources: must map resource names to "
                f"positive amounts, got {short_repr(resources)}"
            )
        if not SAFE_NAME.match(self.experiment):
            raise ConfigError(
                f"experiment: {short_repr(self.experiment)} cannot name a folder "
                f"(letters, digits, '_', '-' and '.', starting with a letter or "
                f"digit; at most 128 characters)"
            )
        choices = [
            ("rollout.on_action_cap", ("truncate", "submit")),
            ("runtime.backend", ("sync", "local", "ray")),
            ("algorithm.advantage_level", ("token", "last_token", "average")),
            ("regularizers.kl_estimator", ("exact", "k3")),
            ("model.dtype", ("auto", "float32", "bfloat16", "float16")),
            ("model.observation_role", ("user", "tool")),
        ]
        for name, allowed in choices:
            if _get_path(self, name) not in allowed:
                raise ConfigError(
                    f"{name}: must be {', '.join(allowed[:-1])} or {allowed[-1]}, "
                    f"got {short_repr(_get_path(self, name))}"
                )
        keys = self.algorithm.baseline_keys
        if not keys or not all(isinstance(key, str) and key for key in keys):
            raise ConfigError(
                f"algorithm.baseline_keys: must be a non-empty list of info key "
                f"names, got {short_repr(keys)}"
            )
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.model.device):
            raise ConfigError(
                f"model.device: must be auto, cpu, cuda or cuda:N, "
                f"got {short_repr(self.model.device)}"
            )
        group_size = self.algorithm.group_size
        if group_size is not None and self.rollout.batch_size % group_size:
            raise ConfigError(
                f"algorithm.group_size: must be >= 1 and divide rollout.batch_size "
                f"({self.rollout.batch_size}), got {group_size}"
            )
        updates = -(-self.budget.episodes // self.rollout.batch_size)
        if self.runtime.max_staleness > updates:
            if self.runtime.backend != "sync":  # sync never reads it
                warnings.warn(
                    ConfigWarning(
                        f"runtime.max_staleness={self.runtime.max_staleness} is more than the "
                        f"{updates} update(s) the budget allows; using {updates} "
                        "(no trajectory can "
                        f"be staler, so the schedule is the same)"
                    ),
                    stacklevel=2,
                )
            self.runtime.max_staleness = updates
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
        raise ConfigError(f"{path}: expected {names}, got {short_repr(value)}")
    if annotation is Any:
        return value
    if origin is Literal:
        allowed = typing.get_args(annotation)
        if value not in allowed:
            choices = ", ".join(str(choice) for choice in allowed)
            raise ConfigError(f"{path}: must be one of {choices}, got {short_repr(value)}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {short_repr(value)}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {short_repr(value)}")
        return value
    if annotation is float:
        if isinstance(value, str):
            try:  # YAML reads 5e-4 as a string; accept numeric strings.
                value = float(value)
            except ValueError:
                raise ConfigError(f"{path}: expected a number, got {short_repr(value)}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}: expected a number, got {short_repr(value)}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {short_repr(value)}")
        return value
    if annotation in (dict, list) or origin in (dict, list):
        expected = origin or annotation
        if not isinstance(value, expected):
            raise ConfigError(f"{path}: expected a {expected.__name__}, got {short_repr(value)}")
        return value
    if dataclasses.is_dataclass(annotation):
        return _build(annotation, value, path)
    return value


def _build(cls: type, data: Any, path: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {short_repr(data)}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f"; known keys: {', '.join(sorted(known))}"
            )
            name = str(key) if len(str(key)) <= 60 else short_repr(str(key))
            raise ConfigError(f"{path + '.' if path else ''}{name}: unknown key{hint}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _check_type(
                f"{path + '.' if path else ''}{f.name}", data[f.name], hints[f.name]
            )
    return cls(**kwargs)


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
    import copy

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


def load_config(
    source: str | Path | dict[str, Any] | None = None, overrides: list[str] | None = None
) -> ExperimentConfig:
    """Load, override and validate an experiment config.

    Args:
        source: a YAML file path, a dict, or None for all defaults.
        overrides: ``key.path=value`` strings applied after loading.

    Raises:
        ConfigError: naming the offending field.
    """
    if source is None:
        data: dict[str, Any] = {}
    elif not isinstance(source, str | Path | dict):
        raise ConfigError(f"config: expected a mapping or a file path, got {type(source).__name__}")
    elif isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            data = load_yaml_text(path.read_text(errors="replace"), str(path))
        except YamlInputError as error:
            raise ConfigError(str(error)) from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(
                f"{path}: expected a mapping of config sections, got a {type(data).__name__}"
            )
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
        if dataclasses.is_dataclass(
            f.default_factory if f.default_factory is not dataclasses.MISSING else None
        ):
            rows.extend(describe_fields(f.default_factory, name + "."))
            continue
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        )
        rows.append((name, default, f.metadata.get("help", "")))
    return rows
