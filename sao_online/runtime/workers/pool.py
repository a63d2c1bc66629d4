"""What the asynchronous runtime needs of its rollout workers: the ``WorkerPool`` protocol.

A leaf module: the runtime (``async_runtime``) and every pool (``local``, ``ray_backend``) import
it, and it imports neither, so the dependencies point one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from sao_online.runtime.workers.rollout_worker import Order


class WorkerPool(Protocol):
    """How the runtime reaches its rollout workers (processes, Ray actors, ...).

    Workers are numbered 0..N-1; ``launch`` starts worker ``index`` (or replaces it, discarding
    whatever the old one held). Messages are those of ``rollout_worker.run_rollout_worker``.
    """

    def launch(self, index: int, seed: int) -> None:
        """Start worker ``index`` with a sampling stream seeded by ``seed``."""
        ...

    def submit(self, index: int, orders: list[Order]) -> None:
        """Hand orders (tasks to run, interrupts) to worker ``index``; a dead worker is reported
        by ``receive``, not here."""
        ...

    def receive(self, timeout: float) -> tuple[list[tuple[int, tuple]], set[int]]:
        """Wait up to ``timeout`` s; return (worker index, message) pairs and the dead workers."""
        ...

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Make ``model``'s weights, as ``version``, available to every worker."""
        ...

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        ...


def worker_slots(config: Any) -> int:
    """Engine slots per worker: its share of the (max_staleness + 1) * B episodes the gate allows
    in flight (a slot waiting for a slow environment costs nothing to decode)."""
    runtime = config.runtime
    batch_size = config.rollout.batch_size
    share = -(-(runtime.max_staleness + 1) * batch_size // runtime.num_workers)
    return min(config.rollout.num_slots, max(batch_size, share))
