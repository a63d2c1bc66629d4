"""Settings this machine cannot run usefully, refused before any work starts.

A leaf module (no torch): the command line checks a config with it before it starts the worker
server, so a config that cannot run starts no process.
"""

from __future__ import annotations

import os
import warnings

from sao_online.config import ConfigError, ConfigWarning, ExperimentConfig

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
        ConfigError: ``runtime.num_workers`` far beyond the cores of the ``local`` backend.
    """
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
