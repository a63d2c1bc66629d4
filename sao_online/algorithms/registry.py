"""Named methods, and methods from a user's module.

Each factory has the signature ``factory(algorithm_config, max_action_tokens) -> Method`` and
reads only the config fields it uses (None means its default). ``algorithm.name`` is one of the
built-in names of :data:`METHODS` or ``MODULE:FACTORY``, a factory of the same signature in a
module of your own (``my_methods:make_method``), imported wherever a run or a rollout worker
starts, as an environment id ``MODULE:ns/Name-v0`` is.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import NamedTuple

from sao_online.algorithms.base import AdvantageEstimator, Method, PolicyObjective
from sao_online.algorithms.estimators import (
    CriticGAE,
    GroupNormalized,
    KeyedRunningMeanAdvantage,
    LeaveOneOut,
    RunningMeanAdvantage,
    ZeroAdvantage,
)
from sao_online.algorithms.objectives import (
    DecoupledPPO,
    DoubleSidedIS,
    PlainPolicyGradient,
    PPOClip,
    SequenceMaskedIS,
    SequenceRatio,
    TruncatedIS,
)
from sao_online.config import SAFE_NAME, AlgorithmConfig, ConfigError, ExperimentConfig, short_repr
from sao_online.config.method_names import BUILTIN_METHODS, METHOD_NAMES
from sao_online.config.names import check_method_name
from sao_online.config.sections import DAPO_CLIP, DEFAULT_GROUP_SIZE, GSPO_CLIP, PPO_CLIP

MethodFactory = Callable[[AlgorithmConfig, int], Method]

_BUILTIN_FACTORIES: dict[str, MethodFactory] = {}


class _Parts(NamedTuple):
    """What a built-in method's factory chooses; its name and group size come from its entry
    in :data:`sao_online.config.method_names.BUILTIN_METHODS`, so neither is spelled twice."""

    estimator: AdvantageEstimator
    objective: PolicyObjective
    updates_policy: bool = True


def _builtin(parts: Callable[[AlgorithmConfig, int], _Parts]) -> MethodFactory:
    """Register the built-in method named as ``parts`` is (``method_names`` lists it)."""
    name = parts.__name__
    if name not in BUILTIN_METHODS:
        raise AssertionError(f"{name} is not in sao_online.config.method_names")
    single_rollout = BUILTIN_METHODS[name]

    @functools.wraps(parts, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
    def factory(cfg: AlgorithmConfig, max_length: int) -> Method:
        group_size = _single_rollout(cfg) if single_rollout else _group(cfg)
        estimator, objective, updates_policy = parts(cfg, max_length)
        return Method(name, group_size, estimator, objective, updates_policy=updates_policy)

    _BUILTIN_FACTORIES[name] = factory
    return factory


def _or(value, default):
    return default if value is None else value


def _single_rollout(cfg: AlgorithmConfig) -> int:
    if cfg.group_size not in (None, 1):
        raise ConfigError(
            f"algorithm.group_size: {cfg.name} uses one rollout per prompt, got {cfg.group_size}"
        )
    return 1


def _group(cfg: AlgorithmConfig) -> int:
    size = _or(cfg.group_size, DEFAULT_GROUP_SIZE)
    if size < 2:
        raise ConfigError(f"algorithm.group_size: {cfg.name} needs groups of 2 or more, got {size}")
    return size


def _dis(cfg: AlgorithmConfig) -> DoubleSidedIS:
    return DoubleSidedIS(eps_low=cfg.dis_eps_low, eps_high=cfg.dis_eps_high)


def _ppo_clip(cfg: AlgorithmConfig) -> PPOClip:
    return PPOClip(
        *cfg.clip(PPO_CLIP),
        dual_clip=cfg.dual_clip,
        aggregation="token_mean",
    )


def _tis(cfg: AlgorithmConfig) -> TruncatedIS:
    return TruncatedIS(cap=cfg.tis_cap)


def _mis(cfg: AlgorithmConfig) -> SequenceMaskedIS:
    return SequenceMaskedIS(low=cfg.mis_low, high=cfg.mis_high)


def _decoupled(cfg: AlgorithmConfig) -> DecoupledPPO:
    return DecoupledPPO(
        *cfg.clip(PPO_CLIP),
        weight_cap=cfg.decoupled_weight_cap,
    )


def _no_correction(cfg: AlgorithmConfig) -> PlainPolicyGradient:
    return PlainPolicyGradient()


#: Off-policy correction name -> the objective it builds from an algorithm config: how a token
#: sampled by an older policy is weighted (formulas in :mod:`sao_online.learning.losses`). Each goes
#: with any estimator; the built-in methods ``sao_<name>`` and ``grpo_<name>`` pair them with
#: SAO's critic GAE and GRPO's group-normalised advantage (``sao`` is SAO with ``dis``,
#: ``grpo_dis`` GRPO with it, ``*_nocorr`` either with ``none``). All average over the batch's
#: action tokens.
CORRECTIONS: dict[str, Callable[[AlgorithmConfig], PolicyObjective]] = {
    "dis": _dis,
    "ppo_clip": _ppo_clip,
    "tis": _tis,
    "mis": _mis,
    "decoupled": _decoupled,
    "none": _no_correction,
}


def _critic_gae(cfg: AlgorithmConfig, **ablation) -> CriticGAE:
    settings = {
        "policy_lambda": cfg.policy_lambda,
        "skip_observations": cfg.skip_observations,
        **ablation,
    }
    return CriticGAE(
        gamma=cfg.gamma,
        critic_lambda=cfg.critic_lambda,
        lambda_alpha=cfg.lambda_alpha,
        level=cfg.advantage_level,
        **settings,
    )


@_builtin
def sao(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(_critic_gae(cfg), _dis(cfg))


@_builtin
def sao_lambda1(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    # Ablation: policy lambda 1, no length adaptation (the critic enters only as V(t) baseline).
    return _Parts(_critic_gae(cfg, policy_lambda=1.0), _dis(cfg))


@_builtin
def sao_no_skip_obs(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    # Ablation: observation tokens are ordinary GAE steps (and critic targets).
    return _Parts(_critic_gae(cfg, skip_observations=False), _dis(cfg))


@_builtin
def sao_tis(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(_critic_gae(cfg), _tis(cfg))


@_builtin
def sao_mis(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(_critic_gae(cfg), _mis(cfg))


@_builtin
def sao_decoupled(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(_critic_gae(cfg), _decoupled(cfg))


@_builtin
def sao_nocorr(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(_critic_gae(cfg), _no_correction(cfg))


@_builtin
def sao_running_mean(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(RunningMeanAdvantage(window=cfg.baseline_window), _dis(cfg))


@_builtin
def sao_prompt_mean(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    estimator = KeyedRunningMeanAdvantage(
        keys=tuple(cfg.baseline_keys), window=cfg.prompt_baseline_window
    )
    return _Parts(estimator, _dis(cfg))


@_builtin
def frozen(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    # The warm start, never updated: the floor of the benchmark's normalized score.
    return _Parts(ZeroAdvantage(), _dis(cfg), updates_policy=False)


@_builtin
def grpo(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    objective = PPOClip(
        *cfg.clip(PPO_CLIP),
        dual_clip=cfg.dual_clip,
        aggregation="sequence_mean",
    )
    return _Parts(GroupNormalized(normalize_std=True), objective)


@_builtin
def grpo_dis(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(GroupNormalized(normalize_std=True), _dis(cfg))


@_builtin
def grpo_tis(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(GroupNormalized(normalize_std=True), _tis(cfg))


@_builtin
def grpo_mis(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(GroupNormalized(normalize_std=True), _mis(cfg))


@_builtin
def grpo_decoupled(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(GroupNormalized(normalize_std=True), _decoupled(cfg))


@_builtin
def grpo_nocorr(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(GroupNormalized(normalize_std=True), _no_correction(cfg))


@_builtin
def dr_grpo(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    objective = PPOClip(
        *cfg.clip(PPO_CLIP),
        dual_clip=cfg.dual_clip,
        aggregation="constant_normalizer",
        max_length=max_length,
    )
    return _Parts(GroupNormalized(normalize_std=False), objective)


@_builtin
def dapo(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    # Clip-higher (DAPO, Yu et al. 2025), token-level mean aggregation.
    objective = PPOClip(
        *cfg.clip(DAPO_CLIP),
        dual_clip=cfg.dual_clip,
        aggregation="token_mean",
    )
    return _Parts(GroupNormalized(normalize_std=True), objective)


@_builtin
def gspo(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    objective = SequenceRatio(*cfg.clip(GSPO_CLIP))
    return _Parts(GroupNormalized(normalize_std=True), objective)


@_builtin
def rloo(cfg: AlgorithmConfig, max_length: int) -> _Parts:
    return _Parts(LeaveOneOut(), _ppo_clip(cfg))


#: name -> factory(algorithm config, max action tokens per episode), in the order of
#: ``sao_online.config.method_names.METHOD_NAMES`` (a name without a factory fails here, on import).
METHODS: dict[str, MethodFactory] = {name: _BUILTIN_FACTORIES[name] for name in METHOD_NAMES}


class MethodLoadError(ConfigError):
    """A method name that names no built-in method, or a factory that cannot make a Method."""


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:160]}" if lines else type(error).__name__


def is_plugin_method(name: str) -> bool:
    """True for ``MODULE:FACTORY`` (a factory in a user's module), False for a built-in name."""
    return ":" in name


def load_method_factory(name: str, field: str = "algorithm.name") -> MethodFactory:
    """The factory ``name`` stands for: a built-in one, or ``MODULE:FACTORY`` imported.

    Raises:
        MethodLoadError: one line naming the method and what is wrong (unknown name, a module
            that does not import, no such attribute, not callable).
    """
    if not isinstance(name, str) or not name:
        raise MethodLoadError(f"{field}: expected a method name, got {short_repr(name)}")
    try:
        check_method_name(name)  # a built-in name or the form MODULE:FACTORY, as loading checks
    except ValueError as error:
        raise MethodLoadError(f"{field}: {error}") from None
    if name in METHODS:
        return METHODS[name]
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise MethodLoadError(
            f"{field}: method {name!r}: cannot import module {module_name!r} ({error}); it is "
            "looked up on the Python path and in the current directory"
        ) from None
    except Exception as error:  # noqa: BLE001  (a user's module may raise anything on import)
        raise MethodLoadError(
            f"{field}: method {name!r}: importing {module_name!r} raised {_first_line(error)}"
        ) from None
    factory: object = module
    for part in attribute.split("."):
        if not hasattr(factory, part):
            raise MethodLoadError(
                f"{field}: method {name!r}: module {module_name!r} has no {attribute!r}"
            )
        factory = getattr(factory, part)
    if not callable(factory):
        raise MethodLoadError(
            f"{field}: method {name!r}: {attribute!r} is a {type(factory).__name__}, not a "
            "factory(algorithm_config, max_action_tokens) -> Method"
        )
    return factory


def _check_method(name: str, method: object, field: str) -> Method:
    """The factory's product, checked: a Method whose parts the learner can use."""
    where = f"{field}: method {name!r}"
    if not isinstance(method, Method):
        raise MethodLoadError(
            f"{where}: the factory returned {type(method).__name__}, not a "
            "sao_online.algorithms.Method"
        )
    if not isinstance(method.name, str) or not SAFE_NAME.match(method.name):
        raise MethodLoadError(
            f"{where}: Method.name {short_repr(method.name)} cannot name a folder (letters, "
            "digits, '_', '-' and '.', starting with a letter or digit)"
        )
    if method.name in METHODS:
        raise MethodLoadError(
            f"{where}: Method.name {method.name!r} is a built-in method's name; give yours "
            "a name of its own"
        )
    if isinstance(method.group_size, bool) or not isinstance(method.group_size, int):
        raise MethodLoadError(
            f"{where}: Method.group_size must be an integer, got {short_repr(method.group_size)}"
        )
    if method.group_size < 1:
        raise MethodLoadError(f"{where}: Method.group_size must be >= 1, got {method.group_size}")
    needs_critic = getattr(method.estimator, "needs_critic", None)
    if not callable(method.estimator) or not isinstance(needs_critic, bool):
        raise MethodLoadError(
            f"{where}: Method.estimator must be an advantage estimator (callable, with a "
            "bool needs_critic), e.g. one of sao_online.algorithms' estimators"
        )
    for hook in ("state_dict", "load_state_dict"):
        if not callable(getattr(method.estimator, hook, None)):
            raise MethodLoadError(f"{where}: Method.estimator has no {hook}() method")
    if not callable(method.objective):
        raise MethodLoadError(
            f"{where}: Method.objective must be a policy objective (callable), got "
            f"{type(method.objective).__name__}"
        )
    return method


def make_method(name: str, cfg: AlgorithmConfig, max_length: int) -> Method:
    """Build the method ``name`` (built-in or ``MODULE:FACTORY``) for ``cfg``.

    Raises:
        ConfigError: a built-in method refusing a setting (named).
        MethodLoadError: a factory that is missing, raises, or returns something else than a
            usable :class:`Method` (one line naming the method and what was wrong).
    """
    factory = load_method_factory(name)
    if not is_plugin_method(name):
        return factory(cfg, max_length)
    try:
        method = factory(cfg, max_length)
    except Exception as error:  # noqa: BLE001  (a user's factory may raise anything)
        raise MethodLoadError(
            f"algorithm.name: method {name!r}: the factory raised {_first_line(error)}"
        ) from None
    if inspect.isawaitable(method):
        raise MethodLoadError(
            f"algorithm.name: method {name!r}: the factory is a coroutine function; it must "
            "return a Method"
        )
    return _check_method(name, method, "algorithm.name")


def build_method(config: ExperimentConfig) -> Method:
    """The method ``config.algorithm.name`` names (built-in or ``MODULE:FACTORY``), configured.

    Raises:
        ConfigError: an unknown method, a setting it refuses, or a factory that fails (the
            message names the method and what was wrong).
    """
    max_length = config.rollout.max_action_tokens * config.rollout.max_turns
    return make_method(config.algorithm.name, config.algorithm, max_length)
