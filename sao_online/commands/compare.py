"""``compare``: methods x seeds at matched budgets, in parallel processes, with one progress bar.

The runs are ``ChildProcesses`` (``sao_online.runtime.host.processes``): SIGINT or SIGTERM to
``compare`` is passed on to every run (each stops after its current update and checkpoints on
SIGINT, at once on SIGTERM), ``compare`` waits for them and exits with ``StopRequested``; a run
never outlives ``compare``, even one killed with SIGKILL. ``--resume`` continues them exactly.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from sao_online.commands.compare_checks import (
    RERUN_ADVICE,
    check_plan,
    continue_same_runs,
    failures_message,
    warn_about_budgets,
)
from sao_online.config import ConfigError, ConfigWarning, ExperimentConfig, load_config
from sao_online.method_names import SINGLE_ROLLOUT_METHODS
from sao_online.quiet import progress_bars
from sao_online.rundir.layout import run_directory
from sao_online.runtime.host.machine_fit import check_machine_fit
from sao_online.runtime.host.main_guard import require_main_guard
from sao_online.runtime.host.processes import (
    ChildProcesses,
    adopt_environment,
    process_context,
    start_server_early,
    stop_server,
)

#: How long to wait for the result of a job whose process has exited cleanly (it is sent
#: before the process exits, so it is in the pipe already).
_RESULT_WAIT_SECONDS = 5.0


def _run_one(job: dict[str, Any], progress: Any) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)  # one core per run; runs go in parallel instead
    from sao_online.rundir.failure import failed_run
    from sao_online.runtime.envs import BudgetWarning
    from sao_online.runtime.launch import run_experiment

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
        from sao_online.rundir.failure import failure_line

        results.put(("error", job["name"], failure_line(error, job.get("out"))))


def method_folders(base: ExperimentConfig, methods: list[str]) -> dict[str, str]:
    """Method spec -> the folder its runs go in: the name of the Method it builds.

    Each method is built here, in the parent, from ``base`` (the config with its overrides): a
    built-in name is its own folder; ``MODULE:FACTORY`` is imported and called, and its runs go
    in the folder of the ``Method.name`` it returns (checked to name a folder and to be no
    built-in's name), so a factory that is missing, raises or returns something else fails
    before any run starts (one line naming the method), and two specs that build methods of one
    name are refused.

    Raises:
        ConfigError: an unknown method, a setting it refuses, a failing factory, or two
            methods of one name.
    """
    from sao_online.algorithms import build_method

    folders: dict[str, str] = {}
    for method in methods:
        with warnings.catch_warnings():  # what loading the base config warned, said once
            warnings.simplefilter("ignore", ConfigWarning)
            config = load_config(base.to_dict(), method_overrides(method))
        folders[method] = build_method(config).name
    for method, name in folders.items():
        clash = [spec for spec, other in folders.items() if other == name and spec != method]
        if clash:
            raise ConfigError(
                f"--methods: {method!r} and {clash[0]!r} both make a method named {name!r}"
            )
    return folders


def method_overrides(method: str) -> list[str]:
    """The overrides that make a run of ``method`` (one rollout per prompt: group size unset)."""
    run_overrides = [f"algorithm.name={method}"]
    if method in SINGLE_ROLLOUT_METHODS:
        run_overrides.append("algorithm.group_size=null")
    return run_overrides


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
    target: Callable[[dict[str, Any], Any], Any] = _run_one,
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
    target: Callable[[dict[str, Any], Any], Any] = _run_one,
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
                            receive(*results.get(timeout=_RESULT_WAIT_SECONDS))
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
        from sao_online.pretrain import warm_start

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
