"""The sections of an experiment config: each field with its type, range, choices and help.

Every numeric field has a range (``tests/config/test_config_ranges.py`` checks it): a value
outside it would train wrongly without an error (a negative gradient clip flips the update's
sign, an infinite KL coefficient skips every update) or fail late with a message that does not
name the field. Numbers are finite unless the field is a ``NumberOrInfinity`` (where infinity
means "no bound"); NaN is never allowed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic.types import AllowInfNan
from pydantic_core import PydanticCustomError

from sao_online.config.errors import ConfigError, first_line, short_repr
from sao_online.config.names import (
    METHOD_FACTORY,
    builtin_methods,
    check_device,
    check_env_name,
    check_method_name,
)

#: Values of the fixed-choice fields (each list is spelled here only; ``typing.get_args`` reads
#: it elsewhere).
Backend = Literal["sync", "local", "ray", "simulated"]
SimPreset = Literal["gpu-fleet", "cpu-tiny"]
KLEstimator = Literal["exact", "k3"]
AdvantageLevel = Literal["token", "last_token", "average"]
ActionCapPolicy = Literal["truncate", "submit"]
WarmStartRegimes = Literal["space", "schedule"]
ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]
ObservationRole = Literal["user", "tool"]
StepTimeoutPolicy = Literal["stop", "end"]
StragglerPolicy = Literal["wait", "requeue"]
StalenessOrigin = Literal["admission", "tokens"]
BudgetMatch = Literal["episodes", "prompts"]


def _refuse_bool(value: Any) -> Any:
    # pydantic reads true as 1.0 for a float; a config that says `lr: true` is a mistake.
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    return value


#: A finite number; integers and numeric strings (YAML 1.1 reads ``5e-4`` as a string) too.
Number = Annotated[float, BeforeValidator(_refuse_bool), AllowInfNan(False)]
#: A number that may be +infinity where that means "no bound" (NaN fails every range).
NumberOrInfinity = Annotated[float, BeforeValidator(_refuse_bool)]


def number(**bounds: float) -> Any:
    """A finite number with its range, for a number beside None or inside a list or mapping.

    There a range given to ``Field`` reaches the JSON Schema under pydantic's own names (``gt``
    instead of ``exclusiveMinimum``), so it is part of the number's type instead.
    """
    return Annotated[float, Field(**bounds), BeforeValidator(_refuse_bool), AllowInfNan(False)]


SEED = {"ge": 0, "le": 2**32 - 1}


class Section(BaseModel):
    """A config section: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class EnvConfig(Section):
    """The environment."""

    id: Annotated[StrictStr, AfterValidator(check_env_name)] = Field(
        "sao_online/StyleShift-v0",
        description="Gymnasium id of the environment; MODULE:namespace/Name-vN imports MODULE "
        "(which registers it) first.",
    )
    kwargs: dict[str, Any] = Field({}, description="Keyword arguments for gymnasium.make.")
    latency_mean: Number = Field(
        0.0, ge=0, le=3600, description="Mean simulated env latency per step in seconds (0 = none)."
    )
    latency_sigma: Number = Field(
        1.0, ge=0, le=10, description="Lognormal sigma of the simulated latency (long tail)."
    )
    step_timeout: Number = Field(
        600.0,
        gt=0,
        le=86400,
        description="Seconds an env.reset or env.step may take; past it see on_step_timeout (a "
        "reset past it always stops the run).",
    )
    on_step_timeout: StepTimeoutPolicy = Field(
        "stop",
        description="An env.step past step_timeout: stop (the run stops with an error naming "
        "the env and the step) or end (the episode ends, truncated, behaviour 'step_timeout', "
        "counted per update in charts/env_step_timeouts).",
    )

    def make(self, **extra: Any) -> Any:
        """``gymnasium.make(id, **kwargs)``; an unknown id or bad kwargs raise ConfigError."""
        import gymnasium

        import sao_online.environments  # noqa: F401  (registers the environments)

        try:
            return gymnasium.make(self.id, **extra, **self.kwargs)
        except gymnasium.error.Error as error:
            raise ConfigError(f"env.id: {short_repr(self.id)}: {first_line(error)}") from None
        except (TypeError, ValueError) as error:
            raise ConfigError(f"env.kwargs: {first_line(error)}") from None


class ModelConfig(Section):
    """The policy model."""

    name: StrictStr = Field(
        "tiny",
        description="'tiny' (the embedded byte-level Llama), a packaged model ('smollm2-135m'), "
        "or a local HF model folder. Never downloaded.",
    )
    gguf_file: StrictStr | None = Field(
        None, description="GGUF file inside the folder `name` (transformers gguf_file=)."
    )
    device: Annotated[StrictStr, AfterValidator(check_device)] = Field(
        "auto",
        description="auto (CUDA when available), cpu, cuda or cuda:N; learner and rollout "
        "workers run there.",
        json_schema_extra={"pattern": "^(auto|cpu|cuda(:[0-9]+)?)$"},
    )
    dtype: ModelDtype = Field(
        "auto", description="auto (bfloat16 on CUDA, float32 on CPU), float32, bfloat16 or float16."
    )
    system_prompt: StrictStr | None = Field(
        None,
        description="System message before the first observation (None: the chat template's "
        "own default, if any).",
    )
    observation_role: ObservationRole = Field(
        "user",
        description="Chat role of environment observations after the first: user or tool (the "
        "template must know it).",
    )
    num_layers: StrictInt = Field(4, ge=1, le=1024, description="Tiny model: transformer layers.")
    hidden_size: StrictInt = Field(128, ge=1, le=65536, description="Tiny model: hidden size.")
    warm_start: StrictBool = Field(
        True, description="Start from the cached SFT warm start on oracle demonstrations."
    )
    warm_start_steps: StrictInt = Field(
        300, ge=0, le=10**8, description="SFT steps for the warm start (part of its cache key)."
    )
    warm_start_seed: StrictInt = Field(
        0, **SEED, description="Seed of the warm start; shared by every method and run seed."
    )
    warm_start_lr: Number = Field(
        5e-3, gt=0, le=10, description="SFT learning rate for the warm start."
    )
    warm_start_batch_size: StrictInt = Field(
        64, ge=1, le=10**6, description="SFT batch size (demonstrations) for the warm start."
    )
    warm_start_regimes: WarmStartRegimes = Field(
        "space",
        description="Regimes of the warm-start demonstrations: 'space' draws theta uniformly "
        "from the env's drift space, 'schedule' from the phases the run's schedule visits "
        "within the budget.",
    )
    warm_start_phase_weights: list[number(ge=0, le=1e6)] | None = Field(
        None,
        min_length=1,
        description="With warm_start_regimes 'schedule': the share of demonstrations drawn from "
        "each phase, in the schedule's order (one weight per phase, normalized; null: every "
        "phase alike). Weighting the first phase makes a warm start that knows the first regime "
        "best, so the shift costs it, while keeping the others within reach of exploration.",
    )
    warm_start_oracle_share: Number = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of warm-start demonstrations that act as the oracle of their regime "
        "(the env's oracle_action) instead of the competent but undecided "
        "demonstration_action. Above 0, the warm start leans to the regimes its demonstrations "
        "are drawn from (see warm_start_phase_weights), so a shift away from them costs it.",
    )

    @model_validator(mode="after")
    def _check_phase_weights(self) -> ModelConfig:
        weights = self.warm_start_phase_weights
        if weights is None:
            return self
        if self.warm_start_regimes != "schedule":
            raise ValueError(
                "warm_start_phase_weights weights the phases of the run's schedule: it needs "
                f"warm_start_regimes 'schedule', got {self.warm_start_regimes!r}"
            )
        if not sum(weights) > 0:
            raise ValueError(
                f"warm_start_phase_weights: at least one must be positive, got {weights}"
            )
        return self


def _method_names_schema(schema: dict[str, Any]) -> None:
    # The built-in names or the MODULE:FACTORY form, so an editor checks the name as load does.
    schema.pop("type", None)
    schema["anyOf"] = [
        {"enum": list(builtin_methods())},
        {"type": "string", "pattern": f"^{METHOD_FACTORY.pattern}$"},
    ]


#: The clip ``(low, high)`` a PPO-style objective takes where ``algorithm.clip_eps_low`` and
#: ``clip_eps_high`` are unset: PPO's 0.2 each way (GRPO, Dr.GRPO, decoupled PPO), DAPO's
#: clip-higher 0.28 above (Yu et al. 2025), GSPO's sequence-level band (Zheng et al. 2025).
PPO_CLIP = (0.2, 0.2)
DAPO_CLIP = (0.2, 0.28)
GSPO_CLIP = (3e-4, 4e-4)

#: Rollouts per prompt of a group method where ``algorithm.group_size`` is unset.
DEFAULT_GROUP_SIZE = 8


class AlgorithmConfig(Section):
    """The method and its settings."""

    name: Annotated[StrictStr, AfterValidator(check_method_name)] = Field(
        "sao",
        description="Method: a built-in one (sao, its ablations sao_*, and the group-rollout "
        "baselines; sao_online.algorithms.METHODS lists them) or MODULE:FACTORY.",
        json_schema_extra=_method_names_schema,
    )
    group_size: StrictInt | None = Field(
        None,
        ge=1,
        le=4096,
        description=f"Rollouts per prompt (1 for SAO; default {DEFAULT_GROUP_SIZE} for group "
        "methods).",
    )
    dis_eps_low: Number = Field(
        0.3,
        gt=0,
        le=1,
        description="DIS band: tokens with ratio <= 1 - dis_eps_low get no gradient.",
    )
    dis_eps_high: NumberOrInfinity = Field(
        5.0,
        gt=0,
        description="DIS band: tokens with ratio >= 1 + dis_eps_high get no gradient (coding "
        "tasks in the paper: 0.8 / 3.0; .inf: no upper band).",
    )
    clip_eps_low: number(gt=0, le=1) | None = Field(
        None,
        description=f"PPO, decoupled PPO and GSPO lower clip (default {PPO_CLIP[0]}; GSPO "
        f"{GSPO_CLIP[0]}).",
    )
    clip_eps_high: number(gt=0, le=100) | None = Field(
        None,
        description=f"PPO, decoupled PPO and GSPO upper clip (default {PPO_CLIP[1]}; DAPO "
        f"{DAPO_CLIP[1]}; GSPO {GSPO_CLIP[1]}).",
    )
    dual_clip: number(gt=1, le=10**6) | None = Field(
        None, description="Dual-clip constant c for negative advantages (PPO objectives)."
    )
    tis_cap: NumberOrInfinity = Field(
        2.0,
        gt=0,
        description="Token TIS (sao_tis, grpo_tis): each token's importance weight is "
        "min(ratio, tis_cap), so a token past the cap still learns at weight tis_cap (.inf: "
        "untruncated importance sampling).",
    )
    mis_low: Number = Field(
        0.5,
        ge=0,
        lt=1,
        description="Sequence-masked IS (sao_mis, grpo_mis): a sequence whose geometric-mean "
        "ratio is <= mis_low is rejected whole (0: no lower edge; below 1, or on-policy "
        "sequences would be rejected).",
    )
    mis_high: NumberOrInfinity = Field(
        2.0,
        gt=1,
        description="Sequence-masked IS: a sequence whose geometric-mean ratio is >= mis_high "
        "is rejected whole (.inf: no upper edge; above 1, or on-policy sequences would be "
        "rejected).",
    )
    decoupled_weight_cap: number(ge=1, le=10**6) | None = Field(
        None,
        description="Decoupled PPO (sao_decoupled, grpo_decoupled): a token whose behaviour "
        "weight pi_proximal / pi_behaviour exceeds it gets no gradient (null: no cap; at least "
        "1, or on-policy tokens would be masked). Its clip is clip_eps_low / clip_eps_high.",
    )
    critic_updates: StrictInt = Field(
        2, ge=1, le=1000, description="SAO: critic updates per policy update (K)."
    )
    critic_lr_multiple: Number = Field(
        5.0, gt=0, le=10**6, description="SAO: critic LR as a multiple of the policy LR."
    )
    critic_warmup_steps: StrictInt = Field(
        10, ge=0, le=10**9, description="SAO: critic-only learner steps before the policy trains."
    )
    freeze_critic_attention: StrictBool = Field(
        True, description="SAO: freeze the critic's attention parameters."
    )
    lambda_alpha: Number = Field(
        1.5, gt=0, le=10**6, description="SAO: policy lambda = 1 - 1/(alpha * action tokens)."
    )
    critic_lambda: Number = Field(
        1.0, ge=0, le=1, description="SAO: GAE lambda for critic targets."
    )
    gamma: Number = Field(1.0, ge=0, le=1, description="Discount over action tokens.")
    advantage_level: AdvantageLevel = Field(
        "token", description="SAO: token, last_token or average (step-level ablations)."
    )
    baseline_window: StrictInt = Field(
        128, ge=1, le=10**7, description="sao_running_mean: rewards in the running-mean baseline."
    )
    policy_lambda: number(ge=0, le=1) | None = Field(
        None,
        description="SAO: fixed policy GAE lambda in [0, 1] (sao_lambda1: 1); null = length "
        "adaptive, 1 - 1/(lambda_alpha * l).",
    )
    skip_observations: StrictBool = Field(
        True,
        description="SAO: GAE skips observation tokens (sao_no_skip_obs: false, observation "
        "tokens are ordinary steps).",
    )
    baseline_keys: list[Annotated[StrictStr, Field(min_length=1)]] = Field(
        ["difficulty"],
        min_length=1,
        description="sao_prompt_mean: env info keys whose values name an episode's prompt "
        "class (e.g. [task, difficulty]).",
    )
    prompt_baseline_window: StrictInt = Field(
        32, ge=1, le=10**7, description="sao_prompt_mean: rewards kept per prompt class."
    )

    def clip(self, unset: tuple[float, float]) -> tuple[float, float]:
        """``(clip_eps_low, clip_eps_high)``, each taken from ``unset`` (the method's own clip,
        e.g. ``PPO_CLIP``) where this config leaves it unset."""
        low, high = unset
        return (
            low if self.clip_eps_low is None else self.clip_eps_low,
            high if self.clip_eps_high is None else self.clip_eps_high,
        )


class OptimConfig(Section):
    """The optimiser."""

    lr: Number = Field(5e-4, gt=0, le=10, description="Policy learning rate (Adam).")
    betas: list[number(ge=0, lt=1)] = Field(
        [0.9, 0.99], min_length=2, max_length=2, description="Adam betas."
    )
    weight_decay: Number = Field(0.0, ge=0, le=10, description="AdamW weight decay.")
    max_grad_norm: Number = Field(
        1.0, gt=0, le=1e9, description="Gradient-norm clip for policy and critic."
    )


class RegularizerConfig(Section):
    """KL and entropy terms."""

    kl_coef: Number = Field(
        0.0,
        ge=0,
        le=1e6,
        description="Per-token KL penalty to the warm-start policy (0 = off, the paper's "
        "setting). The tiny model's preset sets 0.6 when a config leaves this unset "
        "(sao_online.config.model_presets).",
    )
    kl_estimator: KLEstimator = Field(
        "exact", description="exact (over the vocabulary) or k3 (sampled tokens)."
    )
    entropy_coef: Number = Field(
        0.0, ge=-1e3, le=1e3, description="Entropy bonus coefficient (0 = off)."
    )


class RolloutConfig(Section):
    """Sampling."""

    batch_size: StrictInt = Field(
        32, ge=1, le=10**6, description="Trajectories per learner update (B)."
    )
    num_slots: StrictInt = Field(
        64, ge=1, le=10**5, description="Episodes decoded concurrently per worker."
    )
    temperature: Number = Field(
        1.0, gt=0, le=100, description="Sampling temperature (the learner uses the same)."
    )
    top_p: Number = Field(1.0, gt=0, le=1, description="Nucleus sampling threshold.")
    max_turns: StrictInt = Field(4, ge=1, le=10**4, description="Turn cap per episode (truncates).")
    max_action_tokens: StrictInt = Field(
        64, ge=1, le=10**6, description="Token cap per action (turn)."
    )
    on_action_cap: ActionCapPolicy = Field(
        "truncate",
        description="An action reaching max_action_tokens: truncate (ends the episode, no env "
        "step) or submit (the env gets the cut action).",
    )
    max_episode_tokens: StrictInt = Field(
        384, ge=1, le=10**7, description="Token cap per episode (truncates)."
    )
    lean_forward: StrictBool | None = Field(
        None,
        description="Decode with the hand-written Llama/Qwen2 forward (same logits, less "
        "overhead): null = where supported, true = require it, false = the Hugging Face forward.",
    )


class SimCostConfig(Section):
    """The simulated runtime's cost model: how long each thing takes on its virtual clock.

    Every field is in seconds and defaults to the preset's value; set one to override it. The
    time of one decoding step of a rollout worker is ``decode_step_seconds + decode_slot_seconds
    x slots + decode_cached_token_seconds x cached tokens + prefill_token_seconds x tokens fed
    beyond one per slot``; an environment call takes ``env_call_seconds`` plus the env's
    simulated latency (``env.latency_mean``, ``env.latency_sigma``, drawn from the run's seed);
    a learner update takes ``learner_update_seconds`` plus the longer of its two lanes (policy:
    ``learner_policy_token_seconds`` per token of the batch; critic:
    ``learner_critic_token_seconds`` per token per critic update), then publishing the weights
    takes ``publish_seconds``.
    """

    preset: SimPreset = Field(
        "gpu-fleet",
        description="Where the fields left null come from: gpu-fleet (rollout workers that are "
        "GPU replicas serving a ~30B model, a learner on 16 GPUs, from published figures) or "
        "cpu-tiny (the tiny model on this project's 2-core reference machine, fitted to the "
        "demo's real runs); see the simulated runtime guide.",
    )
    decode_step_seconds: number(gt=0, le=3600) | None = Field(
        None,
        description="Fixed seconds of one decoding step of a rollout worker, whatever it feeds; "
        "must be > 0, or virtual time would not move while tokens are sampled (null: the "
        "preset's value).",
    )
    decode_slot_seconds: number(ge=0, le=3600) | None = Field(
        None, description="Seconds per slot fed in a decoding step (null: the preset's value)."
    )
    decode_cached_token_seconds: number(ge=0, le=60) | None = Field(
        None,
        description="Seconds per cached token the step's slots attend to (null: the preset's "
        "value).",
    )
    prefill_token_seconds: number(ge=0, le=60) | None = Field(
        None,
        description="Seconds per prompt or observation token fed beyond one per slot (null: "
        "the preset's value).",
    )
    env_call_seconds: number(ge=0, le=86400) | None = Field(
        None,
        description="Seconds of every env reset and step, before the env's simulated latency "
        "(null: the preset's value).",
    )
    learner_update_seconds: number(gt=0, le=86400) | None = Field(
        None,
        description="Fixed seconds of one learner update; must be > 0 (null: the preset's value).",
    )
    learner_policy_token_seconds: number(ge=0, le=60) | None = Field(
        None,
        description="Seconds per token of the batch for the policy's forward, backward and step "
        "(null: the preset's value).",
    )
    learner_critic_token_seconds: number(ge=0, le=60) | None = Field(
        None,
        description="Seconds per token of the batch per critic update (value pass included); the "
        "critic runs beside the policy, so an update costs the longer lane (null: the preset's "
        "value).",
    )
    publish_seconds: number(ge=0, le=86400) | None = Field(
        None,
        description="Seconds to publish new weights to the rollout workers after an update "
        "(null: the preset's value).",
    )


class RuntimeConfig(Section):
    """How rollouts and the learner run."""

    backend: Backend = Field(
        "local",
        description="sync, local (rollout-worker processes), ray (Ray actors) or simulated (the "
        "same roles in one process on a virtual clock: deterministic, time from runtime.sim).",
    )
    num_workers: StrictInt = Field(
        2,
        ge=1,
        le=4096,
        description="Rollout workers (processes or Ray actors) of the asynchronous backends.",
    )
    max_staleness: StrictInt = Field(
        4,
        ge=0,
        le=10**9,
        description="Bound on learner version minus a trajectory's oldest token version.",
    )
    in_flight_updates: StrictBool = Field(
        True, description="Workers take new weights between decoding steps."
    )
    stragglers: StragglerPolicy = Field(
        "wait",
        description="Asynchronous backends: an episode still running that would pass "
        "max_staleness if the learner stepped now, with a batch ready: wait for it (nothing is "
        "thrown away; the learner may idle for the latency tail), or requeue it (it is "
        "stopped, logged as a dropped episode with dropped_reason 'stale' and the tokens it "
        "spent, and run again from its start; an episode requeued twice is waited for). Either "
        "way no trained token is older than the bound and the run trains exactly "
        "budget.episodes episodes. requeue keeps the learner busy at the cost of the stopped "
        "episodes' tokens; where an episode's duration goes with its outcome (a sandbox that "
        "times out, long multi-turn failures) a re-run replaces the slow outcome, which is then "
        "under-represented in training.",
    )
    staleness_from: StalenessOrigin = Field(
        "tokens",
        description="Asynchronous backends: what a running episode's staleness is counted "
        "from when the learner decides whether to wait for it: tokens (the weights its worker "
        "started sampling it with, as soon as the worker says so; later than admission for an "
        "episode that queued at its worker) or admission (the learner version that admitted "
        "it: never later, so the learner may wait longer).",
    )
    torch_threads: Annotated[StrictInt, Field(ge=1, le=4096)] | Literal["auto"] = Field(
        "auto",
        description="Torch threads of the learner process: 'auto' counts the cores this process "
        "may use (affinity) minus those busy with other work (sampled from /proc/stat) and, for "
        "local/ray, minus one per rollout worker (at least 1); a number is used as is.",
    )
    ray_worker_resources: dict[StrictStr, number(gt=0)] = Field(
        {},
        description="Ray custom resources each rollout actor requests, e.g. {rollout_node: 1} "
        "to place the actors on the nodes that offer it (started with --resources).",
    )
    ray_address: StrictStr | None = Field(
        None,
        description="Ray cluster to join ('auto', 'ray://host:port'); unset starts a private "
        "local Ray with num_workers CPUs.",
    )
    sim: SimCostConfig = Field(
        default_factory=SimCostConfig,
        description="The simulated backend's cost model (read only by backend: simulated).",
    )


class BudgetConfig(Section):
    """The budget, matched across methods."""

    episodes: StrictInt = Field(
        4500,
        ge=1,
        le=10**9,
        description="Episodes per run (matched across methods); with match 'prompts', prompts "
        "per run.",
    )
    match: BudgetMatch = Field(
        "episodes",
        description="What is equal across methods that roll out G episodes per prompt: "
        "'episodes' (a group of G takes G of budget.episodes and moves the episodes clock by G) "
        "or 'prompts' (budget.episodes counts prompts and the episodes clock reads the prompts "
        "started: a group method runs G times the episodes, on the prompts and regimes a "
        "single-rollout method sees). Needs a schedule on the episodes clock.",
    )
    start: StrictInt = Field(
        0,
        ge=0,
        le=10**9 - 1,
        description="The episodes clock's reading the run starts at: it runs from there to "
        "budget.episodes, fresh from its warm start, on the prompts and regimes a run from 0 "
        "reaches there (the benchmark's re-adaptation controls start at a shift). A multiple of "
        "the group size when match is 'episodes'.",
    )

    @model_validator(mode="after")
    def _check_start(self) -> BudgetConfig:
        if self.start >= self.episodes:
            raise ValueError(
                f"start: must be below budget.episodes ({self.episodes}), got {self.start}"
            )
        return self


class EvalConfig(Section):
    """Evaluation on pinned policy versions."""

    every_updates: StrictInt = Field(
        0, ge=0, le=10**9, description="Evaluate every N updates (0 = off)."
    )
    episodes_per_phase: StrictInt = Field(
        32, ge=1, le=10**6, description="Episodes per evaluated phase."
    )


class LoggingConfig(Section):
    """The run directory."""

    out: StrictStr = Field(
        "runs", description="Root of run directories: <out>/<experiment>/<method>/seed-<k>/."
    )
    flush_every: StrictInt = Field(
        256,
        ge=1,
        le=10**7,
        description="Episode records buffered before a parquet chunk is written.",
    )
    checkpoint_every: StrictInt = Field(
        50, ge=0, le=10**9, description="Checkpoint every N updates (0 = only at the end)."
    )
    tensorboard: StrictBool = Field(
        False,
        description="Write TensorBoard event files under <run>/tensorboard/ (needs the "
        "tensorboard package: pip install 'sao-online[tensorboard]').",
    )
    wandb: StrictBool = Field(
        False,
        description="Also log the TensorBoard series and the run's config to Weights & Biases "
        "(needs the wandb package: pip install 'sao-online[wandb]'); offline under <run>/wandb/ "
        "when no API key is set up or the server does not answer (WANDB_MODE overrides; "
        "`wandb sync` uploads); project from WANDB_PROJECT (default sao-online).",
    )
    transcripts_every: StrictInt = Field(
        50,
        ge=0,
        le=10**9,
        description="Keep every N-th episode as text in <run>/transcripts.jsonl "
        "(`sao-online show RUN` prints them; 0 = none).",
    )
