"""Everything a run is made of, built from its config: models, method, learner, schedule, envs."""

from __future__ import annotations

import copy
import functools
import json
import math
from dataclasses import dataclass
from typing import Any

import gymnasium
import torch

import sao_online.environments  # noqa: F401  (registers the environments)
from sao_online.algorithms import Method, build_method
from sao_online.config import ConfigError, ExperimentConfig
from sao_online.drift_schedules import Clock, Schedule, load_schedule
from sao_online.environments import LatencyWrapper
from sao_online.learner import Learner
from sao_online.models import ValueModel
from sao_online.pretrain import base_policy, load_warm_start
from sao_online.rollout import EpisodeRequest, RolloutEngine
from sao_online.runtime.planner import EpisodePlan, EpisodePlanner
from sao_online.types import Trajectory


def clock_horizon(config: ExperimentConfig, schedule: Schedule) -> float | None:
    """The furthest clock reading a run can reach, in the schedule's clock units (None: unknown).

    Episodes: the budget; steps: budget x max_turns; versions: one per batch of the budget;
    seconds: no bound.
    """
    budget = config.budget.episodes
    return {"episodes": float(budget),
            "steps": float(budget * config.rollout.max_turns),
            "versions": float(-(-budget // config.rollout.batch_size)),
            }.get(schedule.clock)


def resolve_schedule(config: ExperimentConfig) -> Schedule:
    """The run's schedule (stationary at the env's defaults when none is given), validated."""
    env = gymnasium.make(config.env.id, **config.env.kwargs)
    drift_space = env.unwrapped.drift_space
    env.close()
    schedule = Schedule.stationary({}) if config.schedule is None else load_schedule(config.schedule)
    schedule.validate(drift_space)
    return schedule


def make_env(config: ExperimentConfig, seed: int = 0) -> gymnasium.Env:
    env = gymnasium.make(config.env.id, disable_env_checker=True, **config.env.kwargs)
    if config.env.latency_mean > 0:
        env = LatencyWrapper(env, mean=config.env.latency_mean, sigma=config.env.latency_sigma, seed=seed)
    return env


@dataclass
class RunContext:
    """The pieces of one run (one method, one seed)."""

    config: ExperimentConfig
    schedule: Schedule
    method: Method
    policy: torch.nn.Module
    tokenizer: Any
    learner: Learner
    planner: EpisodePlanner
    clock: Clock

    @classmethod
    def build(cls, config: ExperimentConfig, progress: bool = False) -> RunContext:
        torch.manual_seed(config.seed)
        schedule = resolve_schedule(config)
        method = build_method(config)
        if config.rollout.batch_size % method.group_size:
            raise ConfigError(f"rollout.batch_size: {config.rollout.batch_size} is not a multiple of the "
                              f"group size {method.group_size} of {method.name}")
        if config.model.warm_start:
            policy, tokenizer = load_warm_start(config, progress=progress)
        else:
            policy, tokenizer = base_policy(config)
        critic = None
        if method.uses_critic:
            critic = ValueModel.from_policy(policy, freeze_attention=config.algorithm.freeze_critic_attention)
        reference = None
        if config.regularizers.kl_coef > 0:
            reference = copy.deepcopy(policy).eval()
            reference.requires_grad_(False)
        policy.train()
        learner = Learner(policy, method, config, pad_token_id=tokenizer.pad_token_id,
                          critic=critic, reference=reference)
        clock = schedule.make_clock()  # the run's one clock (see planner.py for who moves it)
        planner = EpisodePlanner(schedule, method.group_size, config.seed, clock=clock)
        return cls(config, schedule, method, policy, tokenizer, learner, planner, clock)

    def make_engine(self, model: torch.nn.Module | None = None, seed: int | None = None,
                    num_slots: int | None = None) -> RolloutEngine:
        return build_engine(self.config, self.policy if model is None else model, self.tokenizer,
                            seed=self.config.seed if seed is None else seed,
                            num_slots=num_slots or self.config.rollout.num_slots)


def build_engine(config: ExperimentConfig, model: torch.nn.Module, tokenizer: Any, *, seed: int,
                 num_slots: int) -> RolloutEngine:
    """A rollout engine with the config's sampling settings and caps (the one place they are read).

    With simulated env latency (``env.latency_mean > 0``) environments are stepped by a thread per
    slot, so one slow step stalls only its own episode; without it they are stepped inline, which
    keeps a run deterministic for its seed.
    """
    rollout = config.rollout
    env_workers = num_slots if config.env.latency_mean > 0 else 0
    return RolloutEngine(model, tokenizer, num_slots=num_slots, temperature=rollout.temperature,
                         top_p=rollout.top_p, max_turns=rollout.max_turns,
                         max_action_tokens=rollout.max_action_tokens,
                         max_episode_tokens=rollout.max_episode_tokens, seed=seed,
                         env_workers=env_workers, on_action_cap=rollout.on_action_cap,
                         system_prompt=config.model.system_prompt,
                         observation_role=config.model.observation_role)


def plan_to_request(config: ExperimentConfig, plan: EpisodePlan) -> EpisodeRequest:
    return EpisodeRequest(make_env(config, seed=plan.seed), seed=plan.seed, options=plan.reset_options,
                          prompt_id=plan.prompt_id, group_id=plan.group_id, world_time=plan.world_time)


def oracle_reward(config: ExperimentConfig, theta: dict[str, Any]) -> float:
    """The env's ceiling under ``theta`` (memoised per env id, env kwargs and theta)."""
    return _oracle_reward(config.env.id, json.dumps(config.env.kwargs, sort_keys=True),
                          json.dumps(theta, sort_keys=True))


@functools.lru_cache(maxsize=1024)
def _oracle_reward(env_id: str, kwargs_json: str, theta_json: str) -> float:
    env = gymnasium.make(env_id, **json.loads(kwargs_json))
    try:
        return float(env.unwrapped.oracle_reward(json.loads(theta_json)))
    finally:
        env.close()


def _planned_columns(config: ExperimentConfig, index: int, *, world_time: float, phase: int,
                     theta: dict[str, Any], prompt_id: int, group_id: int, straddles_change: bool,
                     wall_time: float) -> dict[str, Any]:
    """The columns of an episode row known before it runs (shared by run and dropped episodes)."""
    return {
        "episode": index,
        "world_time": float(world_time),
        "phase": int(phase),
        "oracle_reward": oracle_reward(config, theta),
        "wall_time": wall_time,
        "prompt_id": prompt_id,
        "group_id": group_id,
        "group_straddles_change": straddles_change,
        "theta": json.dumps(theta, sort_keys=True),
        "env_id": config.env.id,
    }


def episode_record(config: ExperimentConfig, trajectory: Trajectory, index: int, *, trained_version: int,
                   straddles_change: bool, wall_time: float) -> dict[str, Any]:
    """One row of ``episodes.parquet`` (see the analysis package for the column contract)."""
    oldest = trajectory.oldest_version
    return {
        **_planned_columns(config, index, world_time=trajectory.world_time, phase=trajectory.phase,
                           theta=trajectory.theta, prompt_id=trajectory.prompt_id,
                           group_id=trajectory.group_id, straddles_change=straddles_change,
                           wall_time=wall_time),
        "reward": trajectory.total_reward,
        "behavior": trajectory.behavior,
        "policy_version": oldest,
        "staleness": (trained_version - oldest) if trained_version >= 0 and oldest >= 0 else -1,
        "num_action_tokens": trajectory.num_action_tokens,
        "num_tokens": len(trajectory.tokens),
        "num_turns": trajectory.num_turns,
        "terminated": trajectory.terminated,
        "truncated": trajectory.truncated,
        "dropped": False,
        "env_seconds": trajectory.env_seconds,
        "env_steps": trajectory.env_steps,
    }


def dropped_episode_record(config: ExperimentConfig, plan: EpisodePlan, index: int, *,
                           wall_time: float) -> dict[str, Any]:
    """An ``episodes.parquet`` row for an episode lost to a worker fault (reward NaN)."""
    return {
        **_planned_columns(config, index, world_time=plan.world_time, phase=plan.state.phase,
                           theta=dict(plan.state.theta), prompt_id=plan.prompt_id,
                           group_id=plan.group_id, straddles_change=plan.straddles_change,
                           wall_time=wall_time),
        "reward": math.nan,
        "behavior": "",
        "policy_version": -1,
        "staleness": -1,
        "num_action_tokens": 0,
        "num_tokens": 0,
        "num_turns": 0,
        "terminated": False,
        "truncated": False,
        "dropped": True,
        "env_seconds": 0.0,
        "env_steps": 0,
    }
