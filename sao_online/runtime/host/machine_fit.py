"""Settings this machine cannot run usefully, refused before any work starts, and the worker
server started once a config passes.

A leaf module (no torch): the command line runs ``check_then_start_workers`` before its own
heavy imports, and ``run_experiment`` runs it again (a no-op for a started server), so a config
that cannot run starts no process either way.
"""

from __future__ import annotations

import os
import warnings

from sao_online.config import ConfigError, ConfigWarning, ExperimentConfig
from sao_online.runtime.host.threads import thread_count_problem

# More local rollout workers than this many per core make no progress (each is a process with
# its own copy of the model, decoding on one thread).
WORKERS_PER_CORE_LIMIT = 4


def check_machine_fit(
    config: ExperimentConfig, cores: int | None = None, *, warn: bool = True
) -> None:
    """Refuse (or warn about) settings this machine cannot run usefully, before any work.

    Args:
        config: the run's config.
        cores: CPU cores to assume; this machine's when None.
        warn: also warn about workers sharing cores (False where the same run is checked again
            later, which warns).

    Raises:
        ConfigError: ``runtime.torch_threads`` or (``local`` backend) ``runtime.num_workers``
            far beyond the cores.
    """
    level, message = thread_count_problem(config.runtime.torch_threads)
    if level == "error":
        raise ConfigError(message)
    if level and warn:
        warnings.warn(ConfigWarning(message), stacklevel=2)
    if config.runtime.backend != "local":
        return  # ray places actors on a cluster's cores; sync has no workers
    cores = cores or os.cpu_count() or 1
    workers = config.runtime.num_workers
    if workers > WORKERS_PER_CORE_LIMIT * cores:
        raise ConfigError(
            f"runtime.num_workers: {workers} worker processes on {cores} CPU "
            f"core(s) make no progress; use at most {cores}"
        )
    if warn and workers > cores:
        warnings.warn(
            ConfigWarning(
                f"runtime.num_workers={workers} is more than the {cores} CPU core(s); the workers "
                f"will share them and each runs slower"
            ),
            stacklevel=2,
        )


def check_then_start_workers(config: ExperimentConfig, *, warn: bool = True) -> None:
    """The checks a run makes before any work, then (local backend) the worker server.

    ``check_machine_fit``; for the local backend also the env id, then ``start_server_early``,
    so the workers' imports overlap whatever the caller does next.

    Args:
        config: the run's config.
        warn: passed to ``check_machine_fit``.

    Raises:
        ConfigError / ValueError: the config cannot run here (nothing was started).
    """
    check_machine_fit(config, warn=warn)
    if config.runtime.backend != "local":
        return
    from sao_online.environments import check_env_id
    from sao_online.runtime.host.processes import start_server_early

    check_env_id(config.env.id)
    start_server_early()
