"""Environments of a run, built from its config: the schedule, env instances, episode requests."""

from __future__ import annotations

import time
import warnings

import gymnasium
import numpy as np

import sao_online.environments  # noqa: F401  (registers the environments)
from sao_online.config import ConfigError, ExperimentConfig
from sao_online.drift_schedules import Schedule, ScheduleError, load_schedule
from sao_online.environments import LatencyWrapper, check_env_id
from sao_online.rollout import EpisodeRequest
from sao_online.runtime.scheduling.planner import EpisodePlan


def clock_horizon(config: ExperimentConfig, schedule: Schedule) -> float | None:
    """The furthest clock reading a run can reach, in the schedule's clock units (None: unknown).

    Episodes: the budget; steps: budget x max_turns; versions: one per batch of the budget;
    seconds: no bound.
    """
    budget = config.budget.episodes
    return {
        "episodes": float(budget),
        "steps": float(budget * config.rollout.max_turns),
        "versions": float(-(-budget // config.rollout.batch_size)),
    }.get(schedule.clock)


class BudgetWarning(UserWarning):
    """The run can start but cannot measure what it is for (no shift inside its budget)."""


def budget_warnings(config: ExperimentConfig, schedule: Schedule) -> list[str]:
    """Problems of the budget against the schedule, found before any work (empty: none).

    Warns when the schedule shifts but no change point falls inside the budget: such a run
    is stationary and has no recovery to measure.
    """
    horizon = clock_horizon(config, schedule)
    if horizon is None:
        return []  # a seconds clock: where the budget ends is not known in advance
    try:  # looking well past the budget finds where the first shift went
        points = [t for t in schedule.change_points(until=100 * horizon + 10_000) if t > 0]
    except ScheduleError:
        return []
    if not points or points[0] < horizon:
        return []  # a stationary schedule, or a shift inside the budget
    unit = schedule.clock
    return [
        f"budget.episodes: no change point falls inside the budget (the clock reaches about "
        f"{horizon:g} {unit}; the first shift is at {points[0]:g} {unit}): the run is "
        "stationary and measures no recovery; raise budget.episodes or move the shift"
    ]


def warn_about_budget(config: ExperimentConfig) -> None:
    """Emit each :func:`budget_warnings` message as a :class:`BudgetWarning`."""
    for message in budget_warnings(config, resolve_schedule(config)):
        warnings.warn(message, BudgetWarning, stacklevel=3)


def resolve_schedule(config: ExperimentConfig) -> Schedule:
    """The run's schedule (stationary at the env's defaults when none is given), validated."""
    check_env_id(config.env.id)  # says how to register or import an unknown id
    env = config.env.make()
    drift_space = getattr(env.unwrapped, "drift_space", None)
    env.close()
    if drift_space is None:
        raise ConfigError(
            f"env.id: {config.env.id!r} declares no drift_space; subclass "
            "DriftingTextEnv or give the env class a drift_space"
        )
    schedule = (
        Schedule.stationary({}) if config.schedule is None else load_schedule(config.schedule)
    )
    schedule.validate(drift_space)
    return schedule


def _no_sleep(seconds: float) -> None:
    """The simulated runtime counts env latency on its virtual clock instead of sleeping."""


def make_env(config: ExperimentConfig, seed: int = 0, attempt: int = 0) -> gymnasium.Env:
    """The run's env; with simulated latency, its delays are seeded by ``seed`` and ``attempt``.

    An episode run again (``EpisodePlan.attempt`` > 0) draws fresh delays, as a retried call to
    a real service would: the simulated latency is noise, not a property of the prompt. On the
    simulated backend the delays are drawn but never slept: each call reports its latency in
    ``info["latency"]`` and the simulation counts it on its virtual clock.
    """
    env = gymnasium.make(config.env.id, disable_env_checker=True, **config.env.kwargs)
    if config.env.latency_mean > 0:
        latency_seed = (
            seed if attempt == 0 else int(np.random.default_rng([seed, attempt]).integers(2**31))
        )
        env = LatencyWrapper(
            env,
            mean=config.env.latency_mean,
            sigma=config.env.latency_sigma,
            seed=latency_seed,
            sleep=_no_sleep if config.runtime.backend == "simulated" else time.sleep,
        )
    return env


def plan_to_request(config: ExperimentConfig, plan: EpisodePlan) -> EpisodeRequest:
    return EpisodeRequest(
        make_env(config, seed=plan.seed, attempt=plan.attempt),
        seed=plan.seed,
        options=plan.reset_options,
        prompt_id=plan.prompt_id,
        group_id=plan.group_id,
        world_time=plan.world_time,
    )
