"""Environments of a run, built from its config: the schedule, env instances, episode requests."""

from __future__ import annotations

import gymnasium

import sao_online.environments  # noqa: F401  (registers the environments)
from sao_online.config import ExperimentConfig
from sao_online.drift_schedules import Schedule, load_schedule
from sao_online.environments import LatencyWrapper
from sao_online.rollout import EpisodeRequest
from sao_online.runtime.planner import EpisodePlan


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
    env = config.env.make()
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


def plan_to_request(config: ExperimentConfig, plan: EpisodePlan) -> EpisodeRequest:
    return EpisodeRequest(make_env(config, seed=plan.seed), seed=plan.seed, options=plan.reset_options,
                          prompt_id=plan.prompt_id, group_id=plan.group_id, world_time=plan.world_time)
