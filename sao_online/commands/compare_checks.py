"""What ``compare`` checks before its runs start and says when some failed: the plan's time and
memory, the budget's warnings per method, runs already in place (the same run is continued,
another refused), and the failed runs with where their tracebacks are kept."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

from sao_online.config import ConfigError, ExperimentConfig, load_config
from sao_online.runtime.host.plan_fit import (
    PlanEstimate,
    PlanFlags,
    RunGroup,
    check_plan_fits,
    estimate_plan,
    method_weight,
)


def check_plan(
    configs: dict[str, ExperimentConfig], seeds: int, parallel: int | None
) -> PlanEstimate:
    """The comparison's time and memory by estimate (``configs``: each method's config);
    refused when beyond the machine.

    Raises:
        ConfigError: naming the option that makes the plan too large.
    """
    from sao_online.algorithms import build_method

    groups = []
    for config in configs.values():
        method = build_method(config)
        groups.append(
            RunGroup(
                name=method.name,
                config=config,
                weight=method_weight(method),
                uses_critic=method.uses_critic,
                updates_policy=method.updates_policy,
                runs=seeds,
            )
        )
    cores = max(1, min(parallel or os.cpu_count() or 1, seeds * len(configs)))
    estimate = estimate_plan(groups, cores=cores)
    check_plan_fits(
        estimate,
        PlanFlags(
            runs="--seeds", size="the config's budget.episodes and model", parallel="--parallel"
        ),
    )
    return estimate


def warn_about_budgets(base: ExperimentConfig, configs: dict[str, ExperimentConfig]) -> None:
    """Each budget warning of the comparison's methods (``configs``), said once."""
    from sao_online.algorithms import build_method
    from sao_online.config.run_schedule import resolve_schedule
    from sao_online.runtime.envs import BudgetWarning, budget_warnings

    schedule = resolve_schedule(base)
    said: list[str] = []
    for config in configs.values():
        for message in budget_warnings(config, schedule, build_method(config)):
            if message not in said:
                said.append(message)
                warnings.warn(message, BudgetWarning, stacklevel=3)


def continue_same_runs(jobs: list[dict[str, Any]], progress: bool) -> None:
    """Before any run starts: a run folder that holds this very run (its config, code
    included, what the job would write) is continued, a finished one kept as it is (so ``run``
    then ``compare`` of one config works); one that holds another run is refused. A failed run
    is left to its rerun (continued or started again, said then).

    Raises:
        ConfigError: naming the first folder that holds another run.
    """
    import yaml

    from sao_online.algorithms import build_method
    from sao_online.config.run_schedule import resolve_schedule
    from sao_online.rundir.failure import failed_run
    from sao_online.rundir.layout import read_config_file
    from sao_online.runtime.launch import resolved_run_config

    same = []
    for job in jobs:
        folder = Path(job["out"])
        if not (folder / "config.yaml").exists() or failed_run(folder):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = load_config(job["config"], job["overrides"])
        expected = resolved_run_config(config, resolve_schedule(config), build_method(config))
        saved = read_config_file(folder / "config.yaml")
        if saved != yaml.safe_load(yaml.safe_dump(expected)):
            raise ConfigError(
                f"--out: {folder} holds another run (its config differs from this "
                "comparison's); --resume continues it as it was, --overwrite replaces it, or "
                "choose another --out"
            )
        job["resume"] = True
        same.append(job["name"])
    if same and progress:
        print(
            f"compare: {', '.join(same)}: run(s) of this config already there, continued (a "
            "finished one is kept as it is)",
            file=sys.stderr,
        )
