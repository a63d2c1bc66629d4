"""A run's drift schedule as its config names it, and how far the schedule's clock can go.

Both the warm start (which draws its demonstrations from the schedule's phases) and the runtime
read the schedule this way, so it lives with the config they both stand on.
"""

from __future__ import annotations

from sao_online.config.errors import ConfigError
from sao_online.config.experiment import ExperimentConfig
from sao_online.drift_schedules import Schedule, load_schedule


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


def resolve_schedule(config: ExperimentConfig) -> Schedule:
    """The run's schedule (stationary at the env's defaults when none is given), validated."""
    from sao_online.environments import check_env_id  # the environments register on import

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
