"""Admission control that bounds staleness without throwing trajectories away.

With B trajectories per update, a trajectory admitted while the learner is at version v is
trained at the latest at version v + max_staleness as long as no more than
(max_staleness + v + 1) * B trajectories were ever admitted. So the gate admits a new episode
only while

    capacity = (max_staleness + version + 1) * B - (accepted + running) > 0,

where ``accepted`` counts finished trajectories kept for training (consumed or waiting) and
``running`` those still being generated. A dropped episode (a worker fault, or a straggler
requeued by ``runtime.stragglers: requeue``) frees its place, and so does a finished one thrown
away before training (``discard``): it will be admitted again as a new episode.
"""

from __future__ import annotations

import threading
from typing import Any


class StalenessGate:
    """Thread-safe admission counter (after AReaL's staleness manager).

    Args:
        batch_size: trajectories per learner update (B).
        max_staleness: the bound on learner version minus a trajectory's sampling version.

    Example:
        >>> gate = StalenessGate(batch_size=4, max_staleness=0)
        >>> gate.capacity()
        4
        >>> gate.try_acquire(4), gate.try_acquire(1)
        (True, False)
    """

    def __init__(self, batch_size: int, max_staleness: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
        self.batch_size = batch_size
        self.max_staleness = max_staleness
        self._version = 0
        self._accepted = 0
        self._running = 0
        self._changed = threading.Condition()

    def capacity(self) -> int:
        with self._changed:
            return self._capacity()

    def _capacity(self) -> int:
        limit = (self.max_staleness + self._version + 1) * self.batch_size
        return limit - (self._accepted + self._running)

    def try_acquire(self, n: int = 1) -> bool:
        """Admit ``n`` episodes at once (a whole group) if there is room for all of them."""
        with self._changed:
            if self._capacity() < n:
                return False
            self._running += n
            return True

    def acquire(self, n: int = 1, timeout: float | None = None) -> bool:
        """Block until ``n`` episodes can be admitted (or ``timeout`` seconds pass)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._capacity() >= n, timeout=timeout):
                return False
            self._running += n
            return True

    def finish(self, n: int = 1, accepted: bool = True) -> None:
        """``n`` admitted episodes ended: kept for training (accepted) or dropped."""
        with self._changed:
            if n > self._running:
                raise ValueError(f"finish({n}) with only {self._running} running")
            self._running -= n
            if accepted:
                self._accepted += n
            self._changed.notify_all()

    def discard(self, n: int = 1) -> None:
        """``n`` finished episodes, accepted earlier, are thrown away before training (a group
        member whose group is requeued): their places are free again."""
        with self._changed:
            if n > self._accepted:
                raise ValueError(f"discard({n}) with only {self._accepted} accepted")
            self._accepted -= n
            self._changed.notify_all()

    def set_version(self, version: int) -> None:
        """The learner published ``version``; more episodes may start."""
        with self._changed:
            if version < self._version:
                raise ValueError(f"version went back from {self._version} to {version}")
            self._version = version
            self._changed.notify_all()

    @property
    def running(self) -> int:
        with self._changed:
            return self._running

    @property
    def accepted(self) -> int:
        with self._changed:
            return self._accepted

    def state_dict(self) -> dict[str, Any]:
        """Counters for a checkpoint. Running episodes are not saved: they restart on resume."""
        with self._changed:
            return {"version": self._version, "accepted": self._accepted}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._changed:
            self._version = int(state["version"])
            self._accepted = int(state["accepted"])
            self._running = 0
            self._changed.notify_all()
