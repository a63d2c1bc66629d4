"""Environments of a run, built from its config: the schedule, env instances, episode requests."""

from __future__ import annotations

import time
import warnings
from typing import Any

import gymnasium
import numpy as np

import sao_online.environments  # noqa: F401  (registers the environments)
from sao_online.config import ExperimentConfig
from sao_online.config.run_schedule import clock_horizon, resolve_schedule
from sao_online.drift_schedules import Schedule, ScheduleError
from sao_online.environments import LatencyWrapper
from sao_online.rollout import EpisodeRequest
from sao_online.runtime.scheduling.planner import EpisodePlan


class BudgetWarning(UserWarning):
    """The run can start but cannot measure what it is for (no shift inside its budget)."""


#: The share of the first phase SAO's critic-only warm-up may take before a run warns.
CRITIC_WARMUP_SHARE = 0.25


def budget_warnings(config: ExperimentConfig, schedule: Schedule, method: Any = None) -> list[str]:
    """Problems of the budget against the schedule, found before any work (empty: none).

    Warns when the schedule shifts but no change point falls inside the budget (such a run is
    stationary and has no recovery to measure), and when ``method`` trains only its critic for
    more than ``CRITIC_WARMUP_SHARE`` of the first phase (its policy stands still meanwhile: in
    a pilot with a shrunken budget, for most of the phase).
    """
    horizon = clock_horizon(config, schedule)
    if horizon is None:
        return []  # a seconds clock: where the budget ends is not known in advance
    try:  # looking well past the budget finds where the first shift went
        points = [t for t in schedule.change_points(until=100 * horizon + 10_000) if t > 0]
    except ScheduleError:
        return []
    found = []
    unit = schedule.clock
    if points and points[0] >= horizon:
        found.append(
            f"budget.episodes: no change point falls inside the budget (the clock reaches about "
            f"{horizon:g} {unit}; the first shift is at {points[0]:g} {unit}): the run is "
            "stationary and measures no recovery; raise budget.episodes or move the shift"
        )
    share = critic_warmup_share(config, schedule, method)
    if share is not None and share > CRITIC_WARMUP_SHARE:
        warmup = config.algorithm.critic_warmup_steps
        found.append(
            f"algorithm.critic_warmup_steps: {method.name} trains only its critic for its "
            f"first {warmup} update(s), {share:.0%} of the first phase; its policy stands still "
            "meanwhile: lower algorithm.critic_warmup_steps for a budget this small"
        )
    return found


def critic_warmup_share(config: ExperimentConfig, schedule: Schedule, method: Any) -> float | None:
    """The share of the first phase (up to the first shift, or the budget's end) that
    ``method``'s critic-only warm-up takes, in the schedule's clock; None for a method without
    one, or a clock whose horizon is unknown."""
    warmup = config.algorithm.critic_warmup_steps
    horizon = clock_horizon(config, schedule)
    if method is None or not (method.uses_critic and method.updates_policy) or not warmup:
        return None
    if horizon is None:
        return None
    try:
        points = [t for t in schedule.change_points(until=horizon) if t > 0]
    except ScheduleError:
        return None
    first = points[0] if points else horizon
    # The warm-up in clock units: updates, or the episodes (at most the steps) they take.
    per_update = {
        "versions": 1.0,
        "steps": float(config.rollout.batch_size * config.rollout.max_turns),
    }.get(schedule.clock, float(config.rollout.batch_size))
    return warmup * per_update / first if first > 0 else None


def warn_about_budget(config: ExperimentConfig, prefix: str = "") -> None:
    """Emit each :func:`budget_warnings` message (of the config's method too) as a
    :class:`BudgetWarning`, after ``prefix`` (``"task ToolShift: "``)."""
    from sao_online.algorithms import build_method

    for message in budget_warnings(config, resolve_schedule(config), build_method(config)):
        warnings.warn(prefix + message, BudgetWarning, stacklevel=3)


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
