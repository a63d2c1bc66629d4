"""``run_experiment``: one method, one seed, from config to a finished run directory."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from sao_online.algorithms import build_method
from sao_online.config import ExperimentConfig
from sao_online.config.run_schedule import clock_horizon
from sao_online.drift_schedules import ScheduleError
from sao_online.rundir.episode_rows import episode_column_types
from sao_online.rundir.failure import failed_run, plan_rerun, write_failure
from sao_online.rundir.layout import RunDirError, read_config_file, run_directory
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.backends import run_backend
from sao_online.runtime.context import RunContext
from sao_online.runtime.envs import warn_about_budget
from sao_online.runtime.host.machine_fit import check_then_start_workers
from sao_online.runtime.host.main_guard import require_main_guard
from sao_online.runtime.host.threads import AUTO, census
from sao_online.runtime.loop import TrainingLoop
from sao_online.util.quiet import progress_bars
from sao_online.util.units import format_duration


def resolved_config(config: ExperimentConfig, ctx: RunContext) -> dict[str, Any]:
    """The config as written to the run directory, with what analysis needs resolved."""
    return resolved_run_config(config, ctx.schedule, ctx.method)


def resolved_run_config(config: ExperimentConfig, schedule: Any, method: Any) -> dict[str, Any]:
    """The run directory's ``config.yaml`` of a run of ``config``: its settings, the schedule
    written out with its change points and phase names, the method's own name, and the code it
    runs (``sao_online.util.code_identity``). A pure function of its arguments, so what a run will
    write is known before it starts (the benchmark checks kept results against it).

    Args:
        config: the run's config.
        schedule: the run's resolved schedule (``resolve_schedule(config)``).
        method: the ``Method`` the run trains (``build_method(config)``).
    """
    from sao_online.algorithms import is_plugin_method, load_method_factory
    from sao_online.util.code_identity import code_identity, env_identity, method_identity

    horizon = clock_horizon(config, schedule)
    try:
        change_points = [float(t) for t in schedule.change_points(until=horizon)]
        phase_names = list(schedule.phase_names(until=horizon))
    except ScheduleError:  # seconds clock and endless shifts: analysis reads the phase column
        change_points, phase_names = None, None
    spec = config.algorithm.name
    factory = load_method_factory(spec) if is_plugin_method(spec) else None
    return {
        **config.to_dict(),
        "schedule": schedule.to_dict(),
        "method": method.name,  # a factory's (MODULE:FACTORY) own name for its method
        "clock": schedule.clock,
        "change_points": change_points,
        "phase_names": phase_names,
        "code": code_identity(method_identity(spec, method, factory), env_identity(config.env.id)),
    }


class DurationEstimate:
    """Tells once, early in a run, how long its whole budget should take at the speed so far.

    The first update is left out of the rate (it pays start-up costs); the estimate is given
    once ``max(3 batches, 5% of the budget)`` more episodes are done.
    """

    def __init__(self, budget: int, batch_size: int, clock: Callable[[], float] = time.monotonic):
        self.budget = budget
        self.clock = clock
        self.wait_for = max(3 * batch_size, budget // 20)
        self.done = 0
        self.start: tuple[float, int] | None = None
        self.told = False

    def update(self, episodes: int) -> str | None:
        """Count ``episodes`` more; return the estimate the first time there is one."""
        self.done += episodes
        if self.start is None:
            self.start = (self.clock(), self.done)
            return None
        measured = self.done - self.start[1]
        if self.told or measured < self.wait_for or self.done >= self.budget:
            return None
        self.told = True
        rate = measured / max(self.clock() - self.start[0], 1e-9)
        left = (self.budget - self.done) / rate
        return (
            f"{rate:.1f} episodes/s so far; the {self.budget}-episode budget needs about "
            f"{format_duration(left)} more"
        )


def _say(message: str) -> None:
    print(f"run: {message}", file=sys.stderr)


@contextlib.contextmanager
def _stop_after_update_on_ctrl_c(loop: TrainingLoop) -> Iterator[None]:
    """First Ctrl-C: finish the current update, checkpoint, stop. Second: stop at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request_stop(signum: int, frame: Any) -> None:
        if loop.stop_requested.is_set():
            raise KeyboardInterrupt
        loop.stop_requested.set()
        print(
            "\nstopping after the current update (Ctrl-C again to stop now, without a checkpoint)",
            file=sys.stderr,
        )

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclasses.dataclass(frozen=True)
class BudgetExtension:
    """A finished (or stopped) run resumed with a larger ``budget.episodes``.

    Attributes:
        episodes_before: the budget the run was started with.
        may_change: the resolved config's keys that the larger budget changes: the budget, the
            change points and phase names inside it, and a staleness bound the smaller budget
            had lowered.
    """

    episodes_before: int
    may_change: tuple[str, ...]


def budget_extension(path: Path, config: ExperimentConfig) -> BudgetExtension | None:
    """What resuming the run in ``path`` with ``config`` extends, or None when the budget is the
    run's own (or there is no run yet: ``RunLog.create`` says so).

    Raises:
        RunDirError: the budget would shrink, or the warm start depends on the budget
            (``model.warm_start_regimes: schedule`` draws demonstrations from the phases inside
            it, so a larger budget would change the policy the run started from).
    """
    if not (path / "config.yaml").is_file():
        return None
    saved = read_config_file(path / "config.yaml")
    before = (saved.get("budget") or {}).get("episodes")
    if not isinstance(before, int) or before == config.budget.episodes:
        return None
    if config.budget.episodes < before:
        raise RunDirError(
            f"--resume: budget.episodes can only grow: {path} was started with {before}, "
            f"got {config.budget.episodes}"
        )
    if config.model.warm_start and config.model.warm_start_regimes == "schedule":
        raise RunDirError(
            f"--resume: budget.episodes cannot grow for {path}: its warm start drew "
            "demonstrations from the phases inside the budget (model.warm_start_regimes: "
            "schedule), which a larger budget changes; start a new run with the larger budget"
        )
    may_change = ["budget.episodes", "change_points", "phase_names"]
    updates_before = -(-before // config.rollout.batch_size)
    if (saved.get("runtime") or {}).get("max_staleness") == updates_before:
        may_change.append("runtime.max_staleness")  # lowered to fit the smaller budget
    return BudgetExtension(before, tuple(may_change))


def learner_threads(config: ExperimentConfig) -> int:
    """Torch threads of the learner process for ``runtime.torch_threads``."""
    setting = config.runtime.torch_threads
    if setting != AUTO:
        return int(setting)
    if config.runtime.backend == "simulated":
        return 1  # a number the machine's load cannot change: the run must not depend on it
    free = census().free
    if config.runtime.backend in ("local", "ray"):
        free -= config.runtime.num_workers  # each rollout worker runs one thread of its own
    return max(1, free)


def run_experiment(
    config: ExperimentConfig,
    out: str | Path | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    threads: int | None = None,
    progress_callback: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run one experiment to its episode budget; return a short summary.

    Args:
        config: the validated experiment config.
        out: the run directory; ``<logging.out>/<experiment>/<method>/seed-<seed>`` by default.
        resume: continue a killed run from its last checkpoint (no record lost or duplicated);
            with a larger ``budget.episodes`` than the run's, a finished run continues to the
            new budget (see :func:`budget_extension`).
        overwrite: replace an existing run directory.
        progress: show a progress bar.
        threads: torch threads of the learner; None follows ``runtime.torch_threads``
            (``auto``: one per free core, less one per rollout worker for local and ray; see
            ``sao_online.runtime.host.threads``). The caller's setting is restored at the end; the
            summary's ``threads`` says what the run used.
        progress_callback: called with the number of episodes each update consumed.
    """
    if config.runtime.backend == "local":
        require_main_guard("the local backend")  # before any work: a child would redo it
    check_then_start_workers(config)  # the workers' imports overlap the learner's set-up
    if threads is None:
        threads = learner_threads(config)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        summary = _run(
            config,
            out,
            resume=resume,
            overwrite=overwrite,
            progress=progress,
            progress_callback=progress_callback,
        )
    finally:
        torch.set_num_threads(threads_before)
    return {**summary, "threads": threads}


def _run(
    config: ExperimentConfig,
    out: str | Path | None,
    *,
    resume: bool,
    overwrite: bool,
    progress: bool,
    progress_callback: Callable[[int], None] | None,
) -> dict[str, Any]:
    # The folder is the method's own name (a MODULE:FACTORY method names itself).
    path = (
        Path(out)
        if out
        else run_directory(
            config.logging.out, config.experiment, build_method(config).name, config.seed
        )
    )
    warn_about_budget(config)  # before any work (the warm start included)
    extension = budget_extension(path, config) if resume else None
    ctx = RunContext.build(config, progress=progress)
    resolved = resolved_config(config, ctx)
    rerun = None
    if not (resume or overwrite) and failed_run(path):  # run again: continue it or restart it
        rerun = plan_rerun(path, resolved)
        resume, overwrite = rerun.resume, not rerun.resume
        _say(rerun.message)
    log = RunLog.create(
        path,
        resolved,
        resume=resume,
        overwrite=overwrite,
        flush_every=config.logging.flush_every,
        column_types={"episodes": episode_column_types(config)},
        may_change=extension.may_change if extension else (),
    )
    if rerun is not None:
        rerun.keep_previous(path)
    if extension:
        log.messages.append(
            f"extending the run from {extension.episodes_before} to {config.budget.episodes} "
            "episodes"
        )
    try:
        return _run_locked(
            config,
            ctx,
            log,
            path,
            resume=resume,
            progress=progress,
            progress_callback=progress_callback,
        )
    except Exception as error:  # its evidence, kept in the run directory; then raised on
        _keep_failure(
            path, error, log, f"{ctx.method.name} seed {config.seed} of {config.experiment}"
        )
        raise
    finally:
        log.close()


def _keep_failure(path: Path, error: BaseException, log: RunLog, what: str) -> None:
    """Write the failed run's ``error.txt`` (a failure to write it must not hide ``error``)."""
    from sao_online.rundir.disk_full import is_disk_full

    if is_disk_full(error):
        return  # nothing more can be written; the error names the file
    tables = {}
    for name in ("updates", "episodes"):
        try:
            tables[name] = log.read(name)
        except Exception:  # noqa: BLE001  (a damaged table: the traceback is what matters)
            tables[name] = None
    with contextlib.suppress(OSError):
        write_failure(path, error, what, tables, log.messages)


def _run_locked(
    config: ExperimentConfig,
    ctx: RunContext,
    log: RunLog,
    path: Path,
    *,
    resume: bool,
    progress: bool,
    progress_callback: Callable[[int], None] | None,
) -> dict[str, Any]:
    """The body of ``run_experiment`` while this process holds the run directory's lock."""
    episodes = ctx.planner.episodes_to_run(config.budget.episodes)  # budget.match and start
    bar = tqdm(
        total=episodes,
        desc=f"{ctx.method.name} seed {config.seed}",
        unit="ep",
        disable=not progress_bars(progress),
        smoothing=0.1,
    )

    estimate = DurationEstimate(episodes, config.rollout.batch_size)

    def advance(n: int) -> None:
        bar.update(n)
        if progress_callback is not None:
            progress_callback(n)
        if progress and (line := estimate.update(n)):
            bar.write(f"{ctx.method.name} seed {config.seed}: {line}", file=sys.stderr)

    loop = TrainingLoop(ctx, log, progress=advance)
    state = None
    if resume:
        state = log.load_checkpoint()
        if state is not None:
            loop.load_state_dict(state)
            bar.update(loop.episodes_logged)
    logged_before = loop.episodes_logged  # what earlier sessions of the run logged
    for message in log.messages:  # what resuming (or taking over a stale lock) did
        _say(message)
    started = time.time()
    try:
        loop.start()
        with _stop_after_update_on_ctrl_c(loop):
            run_backend(loop, state)
        loop.finish()
    finally:
        bar.close()  # an error message then starts on a line of its own
    seconds = time.time() - started
    episodes = log.read("episodes")
    dropped = episodes["dropped"].astype(bool) if "dropped" in episodes else None
    trained = episodes[~dropped] if dropped is not None else episodes
    return {
        "run_dir": str(path),
        "method": ctx.method.name,
        "episodes": int(len(trained)),
        "dropped_episodes": int(dropped.sum()) if dropped is not None else 0,
        "updates": ctx.learner.version,
        "seconds": round(seconds, 2),
        # This session's speed: the episodes it ran over its own seconds (a resumed run's
        # earlier episodes are not this session's work).
        "episodes_this_session": loop.episodes_logged - logged_before,
        "episodes_per_second": round(
            (loop.episodes_logged - logged_before) / max(seconds, 1e-9), 2
        ),
        "reward_mean_last_10pct": float(trained["reward"].tail(max(1, len(trained) // 10)).mean())
        if len(trained)
        else None,
    }
