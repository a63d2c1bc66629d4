"""How the rollout engine calls its environments: inline, or in a thread pool.

``EnvCalls.call(slot, fn, on_done, finished)`` runs an environment call (``env.reset`` or
``env.step``) for one slot. Inline (``workers=0``) it runs at once and ``on_done`` sees the
result right away, which keeps a run deterministic for its seed. With workers the call goes to a
thread pool and the slot waits while the others keep decoding; ``apply_ready`` hands every
returned call to its ``on_done`` (in slot order, so the result does not depend on thread timing
within one poll). The engine is the same code either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass
from typing import Any

#: ``on_done(result, seconds, finished)``: applies a call's result; ``finished`` collects the
#: trajectories that complete as a consequence.
OnDone = Callable[[Any, float, list], None]


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    """``call()`` and the seconds it took (measured in the thread that ran it)."""
    began = time.perf_counter()
    result = call()
    return result, time.perf_counter() - began


@dataclass
class _Pending:
    future: Future
    on_done: OnDone


class EnvCalls:
    """Environment calls of the engine's slots, inline or on ``workers`` threads.

    Args:
        workers: threads for environment calls; 0 calls them inline.
    """

    def __init__(self, workers: int = 0) -> None:
        self.workers = workers
        self._pool = (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sao-env")
            if workers
            else None
        )
        self._pending: dict[int, _Pending] = {}

    def call(self, slot: int, fn: Callable[[], Any], on_done: OnDone, finished: list) -> None:
        """Run ``fn`` for ``slot``; ``on_done`` gets its result now (inline) or later."""
        if self._pool is None:
            on_done(*timed(fn), finished)
        else:
            self._pending[slot] = _Pending(self._pool.submit(timed, fn), on_done)

    def apply_ready(self, finished: list) -> None:
        """Hand every returned call to its ``on_done``, in slot order (re-raises env errors)."""
        for slot in sorted(self._pending):
            pending = self._pending[slot]
            if pending.future.done():
                del self._pending[slot]
                pending.on_done(*pending.future.result(), finished)

    def wait(self, timeout: float | None) -> None:
        """Block until a call returns (or ``timeout`` seconds pass)."""
        futures = [pending.future for pending in self._pending.values()]
        if futures:
            wait_for_futures(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        elif timeout is not None:
            time.sleep(timeout)

    def forget(self, slot: int) -> None:
        """Forget ``slot``'s call, if any: not started, it is cancelled; running, it finishes
        unheard (its ``on_done`` is never called)."""
        pending = self._pending.pop(slot, None)
        if pending is not None:
            pending.future.cancel()

    def abandon(self) -> None:
        """Forget every call: those not started are cancelled, running ones finish unheard."""
        for pending in self._pending.values():
            pending.future.cancel()
        self._pending = {}

    def close(self) -> None:
        """Stop the threads (calls already running finish on their own)."""
        self.abandon()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
