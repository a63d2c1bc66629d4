"""How the rollout engine calls its environments: inline or concurrently, each with a deadline.

``EnvCalls.call(slot, fn, on_done, finished, what)`` runs an environment call (``env.reset`` or
``env.step``) for one slot. Inline (``workers=0``) the caller waits for it and ``on_done`` sees
the result right away, which keeps a run deterministic for its seed. With workers the slot waits
while the others keep decoding; ``apply_ready`` hands every returned call to its ``on_done`` (in
slot order, so the result does not depend on thread timing within one poll). The engine is the
same code either way.

With a ``timeout`` every call runs on a daemon thread (``DaemonThreads``) and is waited for at
most that long: a call past it goes to ``on_timeout`` (the engine ends the episode, or stops the
run), and its thread, which Python cannot stop, is written off and replaced, never joined, so a
hung environment cannot keep the process from exiting either. An environment that raises becomes
an :class:`EnvError` naming the environment, the call and where in the user's code it raised.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass
from math import inf
from pathlib import Path
from typing import Any

from sao_online.rollout.daemon_threads import DaemonThreads, Task

#: ``on_done(result, seconds, finished)``: applies a call's result; ``finished`` collects the
#: trajectories that complete as a consequence.
OnDone = Callable[[Any, float, list], None]
#: ``on_timeout(seconds, finished)``: a call ran past the timeout (its result will never count).
OnTimeout = Callable[[float, list], None]

#: Calls past their timeout whose threads still run, beyond which the run stops: each holds a
#: thread (and whatever the environment holds) for as long as it hangs.
MAX_HUNG_CALLS = 64


def _library_folders() -> tuple[Path, ...]:
    """Where code that is not the user's lives: this package (its subpackages map to folders of
    their own), the standard library and installed packages."""
    import sysconfig

    import sao_online
    import sao_online.analysis
    import sao_online.drift_schedules
    import sao_online.environments

    folders = {
        Path(path).resolve()
        for module in (
            sao_online,
            sao_online.analysis,
            sao_online.drift_schedules,
            sao_online.environments,
        )
        for path in module.__path__
    }
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        folders.add(Path(sysconfig.get_paths()[name]).resolve())
    return tuple(folders)


class EnvError(ValueError):
    """A user environment broke the contract: it raised, returned the wrong type or a reward
    that is not a finite number, or ran past ``env.step_timeout``. The message is one line
    naming the environment, the call and the field or the file."""


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    """``call()`` and the seconds it took (measured in the thread that ran it)."""
    began = time.perf_counter()
    result = call()
    return result, time.perf_counter() - began


def where_raised(error: BaseException) -> str:
    """``file:line`` of the innermost frame of ``error``'s traceback in the user's code (not this
    package, the standard library or an installed package); empty when there is none."""
    libraries = _library_folders()
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        path = Path(frame.filename).resolve()
        if not any(path.is_relative_to(folder) for folder in libraries):
            return f"{path.name}:{frame.lineno}"
    return ""


def describe_failure(what: str, error: BaseException) -> str:
    """One line: ``<what> raised <Type>: <message> (at file:line)``."""
    text = " ".join(str(error).split())
    text = text[:200] + ("..." if len(text) > 200 else "")
    where = where_raised(error)
    return (
        f"{what} raised {type(error).__name__}"
        + (f": {text}" if text else "")
        + (f" (at {where})" if where else "")
    )


@dataclass
class _Pending:
    task: Task
    on_done: OnDone
    on_timeout: OnTimeout | None
    what: str
    deadline: float | None

    @property
    def future(self) -> Future:
        return self.task.future


class EnvCalls:
    """Environment calls of the engine's slots, inline or concurrent, with an optional deadline.

    Args:
        workers: 0 calls environments one at a time, the caller waiting for each; more lets
            that many slots' calls run at once while the engine decodes the others.
        timeout: seconds a call may take (None: no limit, and inline calls run in the caller's
            own thread, as plain function calls).

    Raises:
        ValueError: ``workers`` is not an int >= 0, or ``timeout`` not a positive number.
    """

    def __init__(self, workers: int = 0, timeout: float | None = None) -> None:
        if not isinstance(workers, int) or workers < 0:
            raise ValueError(f"env_workers must be an int >= 0, got {workers!r}")
        if timeout is not None and not (isinstance(timeout, int | float) and 0 < timeout < inf):
            raise ValueError(
                f"env_step_timeout must be a positive number of seconds or None, got {timeout!r}"
            )
        self.workers = workers
        self.timeout = timeout
        self._pending: dict[int, _Pending] = {}
        self._hung: list[Task] = []  # calls given up on that may still be running
        self._threads = DaemonThreads(max(workers, 1)) if workers or timeout is not None else None

    def call(
        self,
        slot: int,
        fn: Callable[[], Any],
        on_done: OnDone,
        finished: list,
        what: str = "an environment call",
        on_timeout: OnTimeout | None = None,
    ) -> None:
        """Run ``fn`` for ``slot``; ``on_done`` gets its result now (inline) or later.

        Args:
            what: the call in words, for errors (``env X-v0: step 2 of episode 7``).
            on_timeout: what to do when the call runs past the timeout; None raises
                :class:`EnvError`.

        Raises:
            EnvError: (inline) the call raised, or ran past the timeout with no ``on_timeout``.
        """
        if self._threads is None:
            try:
                result = timed(fn)
            except Exception as error:
                raise EnvError(describe_failure(what, error)) from error
            on_done(*result, finished)
            return
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        pending = _Pending(self._threads.submit(fn), on_done, on_timeout, what, deadline)
        if self.workers:
            self._pending[slot] = pending
            return
        wait_for_futures([pending.future], timeout=self.timeout)
        self._settle(pending, finished)

    def _settle(self, pending: _Pending, finished: list) -> bool:
        """Apply a call that returned, or handle one past its deadline; False if neither."""
        if pending.future.done():
            error = pending.future.exception()
            if error is not None:
                if not isinstance(error, Exception):
                    raise error  # KeyboardInterrupt, SystemExit: not the environment's fault
                raise EnvError(describe_failure(pending.what, error)) from error
            pending.on_done(*pending.future.result(), finished)
            return True
        if pending.deadline is None or time.monotonic() < pending.deadline:
            return False
        self._threads.give_up(pending.task)
        self._hung = [task for task in self._hung if not task.future.done()]
        self._hung.append(pending.task)
        if pending.on_timeout is None or len(self._hung) > MAX_HUNG_CALLS:
            many = f" ({len(self._hung)} calls still hang)" if len(self._hung) > 1 else ""
            raise EnvError(
                f"{pending.what} did not return within env.step_timeout={self.timeout:g} s"
                f"{many}; raise the timeout, fix the environment, or set "
                "env.on_step_timeout: end to end such episodes instead"
            )
        pending.on_timeout(self.timeout, finished)
        return True

    def apply_ready(self, finished: list) -> None:
        """Hand every returned call to its ``on_done`` and every call past its deadline to its
        ``on_timeout``, in slot order.

        Raises:
            EnvError: a call raised, or ran past the timeout with no ``on_timeout``.
        """
        for slot in sorted(self._pending):
            pending = self._pending[slot]
            done_or_late = pending.future.done() or (
                pending.deadline is not None and time.monotonic() >= pending.deadline
            )
            if done_or_late:
                del self._pending[slot]
                self._settle(pending, finished)

    def wait(self, timeout: float | None) -> None:
        """Block until a call returns, the nearest deadline passes, or ``timeout`` seconds."""
        futures = [pending.future for pending in self._pending.values()]
        deadlines = [p.deadline for p in self._pending.values() if p.deadline is not None]
        if deadlines:
            until_deadline = max(0.0, min(deadlines) - time.monotonic())
            timeout = until_deadline if timeout is None else min(timeout, until_deadline)
        if futures:
            wait_for_futures(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        elif timeout is not None:
            time.sleep(timeout)

    def forget(self, slot: int) -> None:
        """Forget ``slot``'s call, if any (its episode was stopped): not started, it is dropped;
        running, it finishes unheard (its ``on_done`` is never called) on a thread written off,
        so the calls still to come do not wait for it."""
        pending = self._pending.pop(slot, None)
        if pending is not None and self._threads is not None:
            self._threads.give_up(pending.task)

    def abandon(self) -> None:
        """Forget every call: running ones finish unheard."""
        self._pending = {}

    def close(self) -> None:
        """Forget every call (their threads are daemons: none is waited for)."""
        self.abandon()
