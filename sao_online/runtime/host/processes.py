"""Fresh processes for rollout workers and ``compare``'s runs, from a preloaded forkserver.

A spawned process spends about 5 s importing torch, transformers and the package before it does
any work, at every start (every run of a comparison, every rollout worker, every restart after a
crash). A forkserver pays that once: the server is a fresh interpreter that imports the modules
below and forks a child per process asked for. What a child sees is what spawn would give it:

- nothing of the parent's state: the server never ran a learner (no threads, no torch state);
- the parent's main script, imported again in the child (so a script without a
  ``__main__`` guard is caught the same way, ``main_guard.py``), its ``sys.path`` and folder;
- the parent's environment variables as they are when the child starts (``adopt_environment``;
  the server's own copy dates from its start).

The server starts with the first child of a process (or earlier, ``start_server_early``) and
serves every later one; it exits once that process and every child it served are gone (each
child holds the server's lifeline, so a child the parent forgot keeps the server up).

No process outlives the one that started it:

- ``watch_parent`` (called first thing in every child body: rollout workers, ``compare``'s
  runs) waits in a thread for the parent to go, however it goes (SIGKILL included), and then
  ends the child (and, for a child that leads a process group, the whole group).
- ``ChildProcesses`` is what a command that runs children (``compare``, ``benchmark``) uses to
  start them and to pass its stop signals on: each child leads a process group of its own (its
  rollout workers and their server join it), so a terminal's Ctrl-C reaches the command only
  and the command forwards SIGINT or SIGTERM to each child's group exactly once, then waits for
  the children to stop (a run stops after its update and checkpoints on SIGINT, at once on
  SIGTERM) before it exits itself; past ``STOP_GRACE_SECONDS`` the rest are killed.
  ``stop_server`` then stops the command's process server, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

#: Imported once by the server: everything a run or a rollout worker needs at start.
PRELOAD = ["sao_online.runtime.launch", "sao_online.runtime.workers.local"]


def process_context() -> Any:
    """The multiprocessing context for a run's child processes (forkserver, preloaded)."""
    context = multiprocessing.get_context("forkserver")
    # Replaces the default preload (the main script): each child imports that itself, as under
    # spawn, so only a child that starts a run while importing it fails, and says why.
    context.set_forkserver_preload(PRELOAD)
    return context


def start_server_early() -> None:
    """Start the forkserver now, so its imports (about 3 s) overlap what the caller does next.

    Otherwise the first child's ``start()`` waits for them: a run of the local backend would
    stand still while the server imports what the command itself has just imported. Callers
    that will start children call this as soon as their input is checked (a config that cannot
    run should start no process): the ``sao-online`` command line for ``run`` on the local
    backend, ``bench async`` and ``bench throughput``; ``compare`` (and so ``demo``) and
    ``run_experiment`` on the local backend. Idempotent: a running server is kept.
    """
    process_context()
    multiprocessing.forkserver.ensure_running()


def adopt_environment(environment: dict[str, str]) -> None:
    """Make a child's environment variables the parent's (``dict(os.environ)`` at launch)."""
    os.environ.clear()
    os.environ.update(environment)


def stop_server() -> None:
    """Stop this process's worker server now and wait for it (only once no child it started
    is alive), so a command leaves no process behind it; the next child starts a new one."""
    server = multiprocessing.forkserver._forkserver
    stop = getattr(server, "_stop", None)  # private, in CPython 3.9 to 3.13 at least
    if stop is not None and getattr(server, "_forkserver_pid", None) is not None:
        stop()


#: Signals a command passes on to its children (and stops on).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds the children get to stop after the first stop signal before they are killed.
STOP_GRACE_SECONDS = 300.0


class StopRequested(KeyboardInterrupt):
    """The command got SIGINT or SIGTERM and stopped its children; ``signum`` says which.

    A ``KeyboardInterrupt``, so code that handles Ctrl-C handles it; the command line exits
    with ``128 + signum``.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def watch_parent() -> None:
    """End this child as soon as the process that started it is gone.

    Call it first in the body of a child started through ``process_context`` (the forkserver
    keeps such a child's real parent, the server, alive as long as the child lives, so the
    kernel's parent-death signal cannot tell). A daemon thread waits on the parent's sentinel;
    when it fires, the child kills its own process group if it leads one (a run started by
    ``ChildProcesses``, with its rollout workers and their server), otherwise itself. No-op in
    a process that is not a multiprocessing child.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait_then_end() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait_then_end, name="sao-watch-parent", daemon=True).start()


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _supervised_child(target: Callable[..., Any], args: tuple) -> None:
    """Body of a ``ChildProcesses`` child: lead a process group, watch the parent, run.

    SIGTERM ends the child through ``SystemExit``, so its ``finally`` blocks and exit handlers
    run (the run directory's lock is released, named semaphores unlinked) before it exits.
    """
    os.setpgid(0, 0)
    watch_parent()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    target(*args)


class ChildProcesses:
    """Children of a command that get its stop signals and never outlive it.

    ``compare`` runs its runs with it, and so should any command that launches runs the same
    way. Each child leads a process group of its own and ends itself if this process dies
    (``watch_parent``). Inside ``forwarding_stop_signals`` a SIGINT or SIGTERM to this process
    is passed on to every live child's group and recorded in ``stop_signal`` instead of
    interrupting the caller, whose loop should then start no more children, keep reading what
    they send until none is alive (calling ``kill_if_overdue`` as it goes), and finally call
    ``raise_if_stopped``. A second signal is passed on too (a run stops at once on a second
    SIGINT).

    Example:
        >>> children = ChildProcesses(process_context())                 # doctest: +SKIP
        >>> with children.forwarding_stop_signals():                     # doctest: +SKIP
        ...     for job in jobs:
        ...         if children.stop_signal is None:
        ...             children.start(run_job, (job,))
        ...     while children.alive():
        ...         drain_queues()
        ...         children.kill_if_overdue()
        >>> stop_server()                                                # doctest: +SKIP
        >>> children.raise_if_stopped()                                  # doctest: +SKIP

    Args:
        context: the multiprocessing context the children come from (``process_context()``).
        grace_seconds: how long after the first stop signal the children may take to stop;
            ``kill_if_overdue`` then kills the groups still alive.
    """

    def __init__(self, context: Any, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        self.context = context
        self.grace_seconds = grace_seconds
        self.processes: list[Any] = []
        self.stop_signal: int | None = None
        self._stopped_at: float | None = None
        # Pids of children seen to have ended (``alive`` updates it; the signal handler reads
        # it rather than polling the children itself, which could race with a ``join``).
        self._ended: set[int] = set()

    def start(self, target: Callable[..., Any], args: tuple = (), name: str | None = None) -> Any:
        """Start ``target(*args)`` in a child (module-level ``target``: the child imports it).

        Raises:
            StopRequested: a stop signal already came.
        """
        if self.stop_signal is not None:
            raise StopRequested(self.stop_signal)
        process = self.context.Process(target=_supervised_child, args=(target, args), name=name)
        process.start()
        self.processes.append(process)
        return process

    def alive(self) -> list[Any]:
        """The children still running."""
        running = []
        for process in self.processes:
            if process.pid in self._ended:
                continue
            if process.is_alive():
                running.append(process)
            else:
                self._ended.add(process.pid)
        return running

    def signal_children(self, signum: int) -> None:
        """Send ``signum`` to the process group of every child not seen to have ended."""
        for process in self.processes:
            if process.pid in self._ended:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                try:
                    os.killpg(process.pid, signum)
                except ProcessLookupError:  # not leading its group yet: the child alone
                    os.kill(process.pid, signum)

    def request_stop(self, signum: int) -> None:
        """Record a stop (the first one starts the grace period) and pass ``signum`` on."""
        if self.stop_signal is None:
            self.stop_signal, self._stopped_at = signum, time.monotonic()
        self.signal_children(signum)

    def kill_if_overdue(self) -> None:
        """Kill the children still alive ``grace_seconds`` after the first stop signal."""
        stopped_at = self._stopped_at
        if stopped_at is not None and time.monotonic() - stopped_at > self.grace_seconds:
            self.signal_children(signal.SIGKILL)

    def stop_and_wait(self, signum: int = signal.SIGINT) -> None:
        """Ask the live children to stop with ``signum`` (unless a stop was already passed on),
        wait for them, and kill those still alive when the grace period is over."""
        if not self.alive():
            return
        if self._stopped_at is None:
            self.request_stop(signum)
        deadline = (self._stopped_at or time.monotonic()) + self.grace_seconds
        for process in self.alive():
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.alive():
            self.signal_children(signal.SIGKILL)
            for process in self.processes:
                process.join()

    @contextlib.contextmanager
    def forwarding_stop_signals(self) -> Iterator[ChildProcesses]:
        """While inside, SIGINT and SIGTERM are passed on to the children (see the class).

        Leaving the block in any way stops the children still alive (SIGINT, then SIGKILL after
        the grace period) and waits for them. Outside the main thread signals cannot be caught:
        the block then only does the stopping on the way out.
        """
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                previous[signum] = signal.signal(
                    signum, lambda number, frame: self.request_stop(number)
                )
        try:
            yield self
        finally:
            try:
                self.stop_and_wait()
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

    def raise_if_stopped(self) -> None:
        """Raise ``StopRequested`` if a stop signal came."""
        if self.stop_signal is not None:
            raise StopRequested(self.stop_signal)
