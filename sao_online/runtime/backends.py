"""The one place where ``runtime.backend`` is turned into a way of running: sync, local, ray or
simulated.

Ray is imported only when the ``ray`` backend is chosen (it is an optional dependency).
"""

from __future__ import annotations

from typing import Any, get_args

import torch

from sao_online.config import Backend, ConfigError, ExperimentConfig
from sao_online.runtime.loop import TrainingLoop
from sao_online.runtime.scheduling.async_runtime import run_async
from sao_online.runtime.scheduling.sync import run_sync
from sao_online.runtime.simulation.runtime import run_simulated
from sao_online.runtime.workers.pool import WorkerPool

#: Every value ``runtime.backend`` may take.
BACKENDS: tuple[str, ...] = get_args(Backend)


def make_pool(config: ExperimentConfig, policy: torch.nn.Module, version: int) -> WorkerPool:
    """The rollout workers of an asynchronous backend (not started: the runtime launches them)."""
    backend = config.runtime.backend
    if backend == "local":
        from sao_online.runtime.workers.local import ProcessWorkerPool

        return ProcessWorkerPool(config, policy, version)
    if backend == "ray":
        from sao_online.runtime.workers.ray_backend import RayWorkerPool

        return RayWorkerPool(config, policy, version)
    raise ConfigError(
        f"runtime.backend: {backend!r} has no worker pool; asynchronous backends "
        "are 'local' and 'ray'"
    )


def run_backend(loop: TrainingLoop, state: dict[str, Any] | None = None) -> None:
    """Train ``loop`` to its budget with the config's backend, resuming from ``state`` if given."""
    backend = loop.ctx.config.runtime.backend
    if backend == "sync":
        run_sync(loop, state.get("engine") if state else None)
    elif backend == "simulated":
        run_simulated(loop, state)
    elif backend in BACKENDS:
        run_async(
            loop,
            lambda: make_pool(loop.ctx.config, loop.ctx.policy, loop.ctx.learner.version),
            state,
        )
    else:  # validated on load; kept for configs built in code
        raise ConfigError(
            f"runtime.backend: unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}"
        )
