"""Named methods. Each factory reads only the config fields it uses; None means its default."""

from __future__ import annotations

from collections.abc import Callable

from sao_online.algorithms.base import Method
from sao_online.algorithms.estimators import (
    CriticGAE,
    GroupNormalized,
    KeyedRunningMeanAdvantage,
    LeaveOneOut,
    RunningMeanAdvantage,
)
from sao_online.algorithms.objectives import DoubleSidedIS, PPOClip, SequenceRatio
from sao_online.config import AlgorithmConfig, ConfigError, ExperimentConfig

DEFAULT_GROUP_SIZE = 8


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


def sao(cfg: AlgorithmConfig, max_length: int) -> Method:
    return Method("sao", _single_rollout(cfg), _critic_gae(cfg), _dis(cfg))


def sao_lambda1(cfg: AlgorithmConfig, max_length: int) -> Method:
    # Ablation: policy lambda 1, no length adaptation (the critic enters only as V(t) baseline).
    return Method(
        "sao_lambda1", _single_rollout(cfg), _critic_gae(cfg, policy_lambda=1.0), _dis(cfg)
    )


def sao_no_skip_obs(cfg: AlgorithmConfig, max_length: int) -> Method:
    # Ablation: observation tokens are ordinary GAE steps (and critic targets).
    return Method(
        "sao_no_skip_obs",
        _single_rollout(cfg),
        _critic_gae(cfg, skip_observations=False),
        _dis(cfg),
    )


def sao_running_mean(cfg: AlgorithmConfig, max_length: int) -> Method:
    return Method(
        "sao_running_mean",
        _single_rollout(cfg),
        RunningMeanAdvantage(window=cfg.baseline_window),
        _dis(cfg),
    )


def sao_prompt_mean(cfg: AlgorithmConfig, max_length: int) -> Method:
    estimator = KeyedRunningMeanAdvantage(
        keys=tuple(cfg.baseline_keys), window=cfg.prompt_baseline_window
    )
    return Method("sao_prompt_mean", _single_rollout(cfg), estimator, _dis(cfg))


def grpo(cfg: AlgorithmConfig, max_length: int) -> Method:
    objective = PPOClip(
        eps_low=_or(cfg.clip_eps_low, 0.2),
        eps_high=_or(cfg.clip_eps_high, 0.2),
        dual_clip=cfg.dual_clip,
        aggregation="sequence_mean",
    )
    return Method("grpo", _group(cfg), GroupNormalized(normalize_std=True), objective)


def grpo_dis(cfg: AlgorithmConfig, max_length: int) -> Method:
    return Method("grpo_dis", _group(cfg), GroupNormalized(normalize_std=True), _dis(cfg))


def dr_grpo(cfg: AlgorithmConfig, max_length: int) -> Method:
    objective = PPOClip(
        eps_low=_or(cfg.clip_eps_low, 0.2),
        eps_high=_or(cfg.clip_eps_high, 0.2),
        dual_clip=cfg.dual_clip,
        aggregation="constant_normalizer",
        max_length=max_length,
    )
    return Method("dr_grpo", _group(cfg), GroupNormalized(normalize_std=False), objective)


def dapo(cfg: AlgorithmConfig, max_length: int) -> Method:
    # Clip-higher: eps_high 0.28 (DAPO, Yu et al. 2025), token-level mean aggregation.
    objective = PPOClip(
        eps_low=_or(cfg.clip_eps_low, 0.2),
        eps_high=_or(cfg.clip_eps_high, 0.28),
        dual_clip=cfg.dual_clip,
        aggregation="token_mean",
    )
    return Method("dapo", _group(cfg), GroupNormalized(normalize_std=True), objective)


def gspo(cfg: AlgorithmConfig, max_length: int) -> Method:
    objective = SequenceRatio(
        eps_low=_or(cfg.clip_eps_low, 3e-4), eps_high=_or(cfg.clip_eps_high, 4e-4)
    )
    return Method("gspo", _group(cfg), GroupNormalized(normalize_std=True), objective)


def rloo(cfg: AlgorithmConfig, max_length: int) -> Method:
    objective = PPOClip(
        eps_low=_or(cfg.clip_eps_low, 0.2),
        eps_high=_or(cfg.clip_eps_high, 0.2),
        dual_clip=cfg.dual_clip,
        aggregation="token_mean",
    )
    return Method("rloo", _group(cfg), LeaveOneOut(), objective)


#: name -> factory(algorithm config, max action tokens per episode)
METHODS: dict[str, Callable[[AlgorithmConfig, int], Method]] = {
    "sao": sao,
    "sao_running_mean": sao_running_mean,
    "sao_prompt_mean": sao_prompt_mean,
    "sao_lambda1": sao_lambda1,
    "sao_no_skip_obs": sao_no_skip_obs,
    "grpo": grpo,
    "grpo_dis": grpo_dis,
    "dr_grpo": dr_grpo,
    "dapo": dapo,
    "gspo": gspo,
    "rloo": rloo,
}


#: Methods with one rollout per prompt (``compare`` leaves their group size unset).
SINGLE_ROLLOUT_METHODS: frozenset[str] = frozenset(
    {"sao", "sao_running_mean", "sao_prompt_mean", "sao_lambda1", "sao_no_skip_obs"}
)


def build_method(config: ExperimentConfig) -> Method:
    """The method named ``config.algorithm.name``, configured. Raises ConfigError if unknown."""
    cfg = config.algorithm
    try:
        factory = METHODS[cfg.name]
    except KeyError:
        raise ConfigError(
            f"algorithm.name: unknown method {cfg.name!r}; choose from {', '.join(METHODS)}"
        ) from None
    max_length = config.rollout.max_action_tokens * config.rollout.max_turns
    return factory(cfg, max_length)
