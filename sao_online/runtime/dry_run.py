"""What a run checks before it starts, without starting it (``sao-online run --dry-run``).

Lighter than ``launch``: it makes the environment and builds the method, but imports no model or
rollout code, so checking a config takes a fraction of a second once torch is imported.
"""

from __future__ import annotations

from sao_online.algorithms import build_method
from sao_online.config import ExperimentConfig
from sao_online.config.run_schedule import clock_horizon
from sao_online.drift_schedules import ScheduleError
from sao_online.runtime.envs import warn_about_budget
from sao_online.util.units import format_bytes, format_duration


def check_run(config: ExperimentConfig) -> str:
    """Everything a run of ``config`` checks before it starts, without starting it: the
    machine's fit, the environment (made once) and its schedule, the method (built), the budget,
    and the run's time and memory by estimate (refused beyond the machine). Returns what the run
    would be, in a few lines (``sao-online run --dry-run``).

    Raises:
        ConfigError / ValueError: what the run would have refused (one line).
    """
    from sao_online.config.run_schedule import resolve_schedule
    from sao_online.runtime.host.machine_fit import check_machine_fit
    from sao_online.runtime.host.plan_fit import (
        PlanFlags,
        RunGroup,
        check_plan_fits,
        estimate_plan,
        method_weight,
    )

    check_machine_fit(config)
    schedule = resolve_schedule(config)
    method = build_method(config)
    warn_about_budget(config)
    group = RunGroup(
        config.experiment,
        config,
        method_weight(method),
        method.uses_critic,
        method.updates_policy,
        runs=1,
    )
    estimate = estimate_plan([group], cores=1)
    check_plan_fits(
        estimate,
        PlanFlags(
            runs="budget.episodes",
            size="budget.episodes, model.num_layers and model.hidden_size",
            parallel="runtime.num_workers",
        ),
    )
    horizon = clock_horizon(config, schedule)
    try:
        shifts = len(schedule.change_points(until=horizon))
    except ScheduleError:
        shifts = None
    return "\n".join(
        [
            f"{config.experiment}: {method.name} on {config.env.id}, seed {config.seed}, "
            f"{config.budget.episodes} episodes on the {config.runtime.backend} runtime",
            f"schedule: {schedule.clock} clock, "
            + (f"{shifts} shift(s) within the budget" if shifts is not None else "open-ended"),
            f"estimate: about {format_duration(estimate.cpu_seconds)} of CPU, about "
            f"{format_bytes(estimate.runs_memory)} of memory",
        ]
    )
