"""The process pool that ``compare`` and the benchmark both run their jobs in.

A job is a dict (its ``name`` first); ``run_scheduled`` starts each job a ``JobSource`` hands
out in a child process (``ChildProcesses``, ``sao_online.runtime.host.processes``): SIGINT or
SIGTERM to this process is passed on to every child (each stops after its current update and
checkpoints on SIGINT, at once on SIGTERM), the pool waits for them and raises
``StopRequested``; a child never outlives the pool, even one killed with SIGKILL. ``run_one``
is the body of one run in its child; ``failures_message`` says which jobs failed and why.
"""

from __future__ import annotations

import contextlib
import os
import queue
import resource
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from sao_online.config import load_config
from sao_online.rundir.failure import failed_run, failure_line, with_tracebacks
from sao_online.runtime.envs import BudgetWarning
from sao_online.runtime.host.processes import (
    ChildProcesses,
    adopt_environment,
    process_context,
    stop_server,
)
from sao_online.runtime.launch import run_experiment
from sao_online.util.quiet import verbose_output

#: How long to wait for the result of a job whose process has exited cleanly (it is sent
#: before the process exits, so it is in the pipe already).
RESULT_WAIT_SECONDS = 5.0


def run_one(job: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Run ``job`` (``config``, ``overrides``, ``out``, ``overwrite``, ``resume``) in this child
    process on one torch thread; return ``run_experiment``'s result.

    ``progress.put(n)`` is called with the episodes each update consumed (the parent's bar).
    A failed run is continued or started again as a rerun of it decides, not resumed as such.
    """
    import torch

    torch.set_num_threads(1)  # one core per run; runs go in parallel instead
    warnings.simplefilter("ignore", BudgetWarning)  # the parent warned once for every run

    config = load_config(job["config"], job["overrides"])
    # A failed run is continued or started again as a rerun of it decides (not resumed as such:
    # its code may have been fixed since).
    resume = (
        job["resume"] and (Path(job["out"]) / "config.yaml").exists() and not failed_run(job["out"])
    )
    # runtime.torch_threads=auto would count the cores the parallel runs share: one each.
    threads = 1 if config.runtime.torch_threads == "auto" else None
    return run_experiment(
        config,
        out=job["out"],
        overwrite=job["overwrite"],
        resume=resume,
        progress=False,
        threads=threads,
        progress_callback=progress.put,
    )  # to the parent's bar


def _worker(
    target: Callable[[dict[str, Any], Any], Any],
    job: dict[str, Any],
    environment: dict[str, str],
    progress: Any,
    results: Any,
) -> None:
    adopt_environment(environment)
    try:
        results.put(("ok", job["name"], target(job, progress)))
    except BaseException as error:  # reported to the parent, which raises it with the run's name
        results.put(("error", job["name"], failure_line(error, job.get("out"))))


class JobSource(Protocol):
    """What ``run_scheduled`` asks which job to start next (``InOrder``; the benchmark's
    ``CoreScheduler`` through ``sao_online.benchmark.local_runner``)."""

    @property
    def waiting(self) -> bool:
        """Whether some job is still to start."""
        ...

    def start_now(self) -> list[dict[str, Any]]:
        """The jobs to start now (none when every slot is taken)."""
        ...

    def ended(self, name: str, succeeded: bool) -> list[str]:
        """``name`` is over; return failure lines (``"<name>: <why>"``) of the jobs that will
        now never start because of it."""
        ...


class InOrder:
    """Jobs in their order, ``parallel`` at a time."""

    def __init__(self, jobs: list[dict[str, Any]], parallel: int) -> None:
        self._pending, self._parallel, self._running = list(jobs), parallel, 0

    @property
    def waiting(self) -> bool:
        return bool(self._pending)

    def start_now(self) -> list[dict[str, Any]]:
        count = max(0, min(self._parallel - self._running, len(self._pending)))
        started, self._pending = self._pending[:count], self._pending[count:]
        self._running += count
        return started

    def ended(self, name: str, succeeded: bool) -> list[str]:
        self._running -= 1
        return []


def run_jobs(
    jobs: list[dict[str, Any]],
    *,
    parallel: int,
    bar: Any,
    target: Callable[[dict[str, Any], Any], Any] = run_one,
    on_result: Callable[[str, Any], None] | None = None,
    keep_server: bool = False,
) -> list[str]:
    """Run each job in a child process, ``parallel`` at a time, in order; return the failures.

    ``run_scheduled`` with ``InOrder(jobs, parallel)``: see there.
    """
    return run_scheduled(
        InOrder(jobs, parallel),
        bar=bar,
        target=target,
        on_result=on_result,
        keep_server=keep_server,
    )


def run_scheduled(
    source: JobSource,
    *,
    bar: Any,
    target: Callable[[dict[str, Any], Any], Any] = run_one,
    on_result: Callable[[str, Any], None] | None = None,
    keep_server: bool = False,
) -> list[str]:
    """Run the jobs ``source`` hands out, each in a child process; return the failures.

    Whenever a job ends (its result or error has arrived, or its process died without one),
    ``source.ended`` hears of it and ``source.start_now`` is asked what to start next.
    ``target(job, progress_queue)`` runs in the child (a module-level function: it is sent by
    reference); it puts episode counts on the queue, which move ``bar``, and its return value
    reaches ``on_result(job["name"], value)`` in this process as each job ends. A failure is
    one line ``"<name>: <error>"``; the other jobs go on. The children are
    ``ChildProcesses``: a SIGINT or SIGTERM to this process is passed on to each of them, no
    further job starts, and once they have stopped (the results of those that finished first
    reach ``on_result``) ``StopRequested`` is raised. The worker server is stopped at the end,
    so nothing of the caller outlives it, unless ``keep_server`` (more jobs follow at once) and
    no stop signal came.

    Raises:
        StopRequested: SIGINT or SIGTERM came; the jobs that had not finished were stopped.
    """
    context = process_context()
    progress_queue, results = context.Queue(), context.Queue()
    children = ChildProcesses(context)
    running: dict[str, Any] = {}
    failures: list[str] = []
    reported: set[str] = set()

    def receive(status: str, name: str, payload: Any) -> None:
        if name in reported:
            return
        reported.add(name)
        if status == "error":
            failures.append(f"{name}: {payload}")
        elif on_result is not None:
            on_result(name, payload)
        failures.extend(source.ended(name, succeeded=status == "ok"))

    with children.forwarding_stop_signals():
        while running or (source.waiting and children.stop_signal is None):
            if children.stop_signal is None:
                for job in source.start_now():
                    running[job["name"]] = children.start(
                        _worker,
                        (target, job, dict(os.environ), progress_queue, results),
                        name=job["name"],
                    )
            if not running:
                raise RuntimeError("run_scheduled: jobs are waiting but none can start")
            with contextlib.suppress(queue.Empty):
                bar.update(progress_queue.get(timeout=0.5))
                while True:  # drain: the bar keeps up with every run
                    bar.update(progress_queue.get_nowait())
            with contextlib.suppress(queue.Empty):
                while True:
                    receive(*results.get_nowait())
            for name, process in list(running.items()):
                if process.is_alive():
                    continue
                process.join()
                del running[name]
                if name in reported:
                    continue
                if process.exitcode == 0:  # its result is in the pipe already: wait for it
                    with contextlib.suppress(queue.Empty):
                        while name not in reported:
                            receive(*results.get(timeout=RESULT_WAIT_SECONDS))
                if name not in reported:  # killed, or exited without a word
                    receive("error", name, _ended_without_result(process.exitcode))
            children.kill_if_overdue()
    if (not keep_server or children.stop_signal is not None) and not children.alive():
        stop_server()  # the runs' server: nothing of the caller outlives it
    with contextlib.suppress(queue.Empty):  # what the last jobs sent as they ended
        while True:
            receive(*results.get(timeout=0.2))
    # After a stop signal, runs that stopped early "failed" on purpose: --resume continues them.
    children.raise_if_stopped()
    return failures


def _ended_without_result(exitcode: int | None) -> str:
    """How a run's process ended when it sent no result: its exit status, or the signal."""
    if exitcode is not None and exitcode < 0:
        import signal

        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"run process was killed by {name} before it sent a result"
    return f"run process exited with code {exitcode} before it sent a result"


def process_cpu_seconds() -> float:
    """User + system seconds of this process and of its children that have been waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


#: What running a command again after failed runs does.
RERUN_ADVICE = (
    "--resume continues: finished runs are kept, each failed one is continued from its last "
    "checkpoint or started again, said for each"
)


def failures_message(command: str, failures: list[str], advice: str) -> str:
    """The message of a command whose runs failed: each run, its exception and where its
    traceback is kept (the whole traceback under ``--verbose``), and what running the same
    command again does."""
    shown = with_tracebacks(failures) if verbose_output() else failures
    return f"{command}: {len(failures)} run(s) failed ({advice}):\n  " + "\n  ".join(shown)
