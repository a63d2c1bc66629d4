"""``compare``: methods x seeds at matched budgets, in parallel processes, with one progress bar.

The runs go in the job pool (``sao_online.jobs.pool``), as ``ChildProcesses``
(``sao_online.runtime.host.processes``): SIGINT or SIGTERM to
``compare`` is passed on to every run (each stops after its current update and checkpoints on
SIGINT, at once on SIGTERM), ``compare`` waits for them and exits with ``StopRequested``; a run
never outlives ``compare``, even one killed with SIGKILL. ``--resume`` continues them exactly.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

from tqdm import tqdm

from sao_online.commands.compare_checks import check_plan, continue_same_runs, warn_about_budgets
from sao_online.config import ConfigError, ConfigWarning, ExperimentConfig, load_config
from sao_online.jobs.methods import method_folders, method_overrides
from sao_online.jobs.pool import RERUN_ADVICE, failures_message, run_jobs
from sao_online.rundir.layout import run_directory
from sao_online.runtime.host.machine_fit import check_machine_fit
from sao_online.runtime.host.main_guard import require_main_guard
from sao_online.runtime.host.processes import start_server_early
from sao_online.util.quiet import progress_bars


def compare(
    config: str | Path | dict[str, Any] | ExperimentConfig,
    *,
    methods: list[str],
    seeds: int,
    out: str | Path,
    first_seed: int = 0,
    overrides: list[str] | None = None,
    parallel: int | None = None,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
) -> Path:
    """Run every method for seeds first_seed..first_seed+seeds-1 at the same budget, model,
    schedule and seeds.

    Runs land in ``<out>/<experiment>/<method>/seed-<k>/``. They start seed by seed, every
    method of a seed before the next seed, so runs that share the machine at the same time are
    different methods on the same seed (their wall-clock seconds compare fairly) and an
    interrupted comparison has whole seeds. With ``resume``, runs that exist
    continue from their last checkpoint (finished ones end at once) and missing ones start.
    The warm start is built once up front (it is shared by every run: same starting checkpoint
    for every method and seed). Runs go in child processes (a preloaded forkserver's, see
    ``sao_online.runtime.host.processes``), which import your script again: call this under
    ``if __name__ == "__main__":`` in a script.

    Args:
        config: a YAML path, the same dict, or an ``ExperimentConfig``.

    Raises:
        ConfigError: an unknown method, a bad seed count, or a run that failed (named).
        MissingMainGuardError: called at the top level of a script without a main guard.
        StopRequested: SIGINT or SIGTERM came; every run was stopped (resume with
            ``resume=True``).
    """
    require_main_guard("compare")
    overrides = list(overrides or [])
    # Children rebuild the config from this (a path keeps its relative schedule path working).
    config_source = config.to_dict() if isinstance(config, ExperimentConfig) else config
    if not isinstance(config_source, dict):
        config_source = str(config_source)
    if resume and overwrite:
        raise ConfigError("compare: --resume and --overwrite exclude each other")
    from sao_online.runtime.host.plan_fit import (
        MAX_SEED,
        MAX_SEEDS,
        PARALLEL_PER_CORE_LIMIT,
        check_count,
    )
    from sao_online.runtime.host.threads import usable_cores

    check_count("--seeds", seeds, 1, MAX_SEEDS)
    check_count("--first-seed", first_seed, 0, MAX_SEED - seeds + 1)
    if parallel is not None:
        check_count("--parallel", parallel, 1, PARALLEL_PER_CORE_LIMIT * usable_cores())
    methods = [m.strip() for m in methods if m.strip()]
    if not methods:
        raise ConfigError("--methods: no method given")
    base = load_config(config_source, overrides)
    check_machine_fit(base)
    from sao_online.config.names import check_method_name

    for method in methods:  # the name's form first (a suggestion for a typo), then build it
        try:
            check_method_name(method)
        except ValueError as error:
            raise ConfigError(f"--methods: {error}") from None
    from sao_online.runtime.host.plugin_probe import check_plugins_load, env_loads, method_loads

    # The user's modules first in a child, under a deadline: one that hangs or exits is named.
    check_plugins_load(
        env_loads([base.env.id], "env.id") + method_loads(base.to_dict(), methods, "--methods")
    )
    from sao_online.environments import check_env_id

    check_env_id(base.env.id)
    folders = method_folders(base, methods)
    with warnings.catch_warnings():  # said once, for the base config
        warnings.simplefilter("ignore", ConfigWarning)
        configs = {m: load_config(base.to_dict(), method_overrides(m)) for m in methods}
    estimate = check_plan(configs, seeds, parallel)
    if progress:
        print(f"compare: {estimate.summary()}, by estimate", file=sys.stderr, flush=True)
    out = Path(out)
    jobs = []
    for seed in range(first_seed, first_seed + seeds):
        for method in methods:
            jobs.append(
                {
                    "name": f"{folders[method]}/seed-{seed}",
                    "config": config_source,
                    "overrides": [*overrides, *method_overrides(method), f"seed={seed}"],
                    "out": str(run_directory(out, base.experiment, folders[method], seed)),
                    "overwrite": overwrite,
                    "resume": resume,
                }
            )
    if not (resume or overwrite):
        continue_same_runs(jobs, progress)
    # Every run is a child of the worker server: its imports overlap the warm start below.
    start_server_early()
    warn_about_budgets(base, configs)
    if base.model.warm_start:
        from sao_online.learning.warm_start import warm_start

        warm_start(base, progress=progress)
    total = base.budget.episodes * len(jobs)
    parallel = max(1, min(parallel or os.cpu_count() or 1, len(jobs)))
    bar = tqdm(
        total=total,
        desc=f"compare {','.join(methods)} x {seeds} seeds",
        unit="ep",
        disable=not progress_bars(progress),
        smoothing=0.05,
    )
    try:
        failures = run_jobs(jobs, parallel=parallel, bar=bar)
    finally:
        bar.close()
    if failures:
        raise ConfigError(failures_message("compare", failures, RERUN_ADVICE))
    return out / base.experiment
