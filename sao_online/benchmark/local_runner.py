"""The local backend: a benchmark's warm starts and runs as one schedule over this machine's cores.

Each job (a warm start to build, or a run) gets an estimated cost (``costs.CostBook``) and the
cores it keeps busy (its suite task's ``cpus``: the learner's one torch thread plus a thread per
rollout worker); ``CoreScheduler`` (``sao_online.jobs.scheduler``) then starts the work that
unlocks the most first, a run as soon as its warm start is built, and never holds more cores
than the benchmark may use. A warm start already in the cache is no job at all. Each job runs
in a child process (``sao_online.jobs.pool.run_scheduled``), measures its own CPU time, and its
costs are appended to the cost tables as it ends: the jobs still waiting are estimated again
from them at once, and a resumed or later benchmark starts from them.

``CoreUse`` measures the whole command: the CPU seconds of this process and of every process it
started (its process server and, through it, every job and the children they waited for), and
of the machine's cores as a whole, between two snapshots.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sao_online.benchmark.costs import (
    RUN,
    WARM_START,
    CostBook,
    append_cost,
    cost_tables,
    method_weight,
    run_prior_seconds,
    warm_start_prior_seconds,
)
from sao_online.benchmark.warm_starts import warm_start_unit
from sao_online.jobs.pool import process_cpu_seconds
from sao_online.jobs.scheduler import CoreScheduler, Work, plan
from sao_online.runtime.host.plan_fit import RUN_START_SECONDS


def _machine_busy_seconds(cores: tuple[int, ...]) -> float | None:
    """Busy seconds of ``cores`` since boot (``/proc/stat``), or None where unreadable."""
    from sao_online.runtime.host.threads import cpu_times

    try:
        times = cpu_times()
        ticks = sum(times[core][0] for core in cores)
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CoreUse:
    """A snapshot of the clock and CPU counters; ``since(earlier)`` gives the use between."""

    wall: float
    cpu: float
    machine_busy: float | None
    cores: tuple[int, ...]

    @classmethod
    def now(cls) -> CoreUse:
        if hasattr(os, "sched_getaffinity"):
            cores = tuple(sorted(os.sched_getaffinity(0)))
        else:
            cores = tuple(range(os.cpu_count() or 1))
        return cls(time.monotonic(), process_cpu_seconds(), _machine_busy_seconds(cores), cores)

    def since(self, earlier: CoreUse) -> dict[str, Any]:
        """Wall seconds, this command's CPU seconds (its children's counted once they were
        waited for), ``core_share`` = CPU / (wall x cores), and ``other_share``: the share of
        the cores' time that other work on the machine took meanwhile. A child's CPU time
        counts when it is waited for, all of it, so work it did before ``earlier`` (a process
        server started beforehand) can lift a short window's share a little above 1."""
        seconds = self.wall - earlier.wall
        cpu = self.cpu - earlier.cpu
        capacity = seconds * len(self.cores)
        use: dict[str, Any] = {
            "seconds": round(seconds, 1),
            "cores": len(self.cores),
            "cpu_seconds": round(cpu, 1),
            "core_share": round(cpu / capacity, 4) if capacity > 0 else None,
            "other_share": None,
        }
        if capacity > 0 and self.machine_busy is not None and earlier.machine_busy is not None:
            others = max(0.0, self.machine_busy - earlier.machine_busy - cpu)
            use["other_share"] = round(min(1.0, others / capacity), 4)
        return use


def _is_cached(job: dict[str, Any]) -> bool:
    from sao_online.config import load_config
    from sao_online.learning.warm_start import warm_start_path

    return (
        warm_start_path(load_config(job["config"], job["overrides"])) / "warm_start.json"
    ).exists()


def estimate_jobs(
    runs: list[dict[str, Any]], warm_starts: list[dict[str, Any]], book: CostBook
) -> list[Work]:
    """The scheduler's view of the jobs: each job dict gets ``kind``, ``task`` (a warm
    start's first), ``work_key``, ``prior_seconds`` and ``estimate_seconds``; warm starts rank
    before runs, runs by seed."""
    import warnings

    from sao_online.algorithms import build_method
    from sao_online.config import load_config
    from sao_online.learning.warm_start import warm_start_path
    from sao_online.rundir.provenance import stable_hash

    work: list[Work] = []
    warm_of: dict[tuple[str, int | None], str] = {}  # (task, warm-start seed) -> its job
    for job in warm_starts:
        config = load_config(job["config"], job["overrides"])
        prior = warm_start_prior_seconds(config)
        key = warm_start_path(config).name
        estimate = book.estimate(WARM_START, job["tasks"][0], key, prior)
        job.update(
            kind=WARM_START,
            task=job["tasks"][0],
            work_key=key,
            prior_seconds=prior,
            estimate_seconds=estimate,
        )
        work.append(Work(job["name"], estimate, cores=1, rank=0))
        warm_of.update({warm_start_unit(job, served): job["name"] for served in job["serves"]})
    seeds = sorted({job["key"]["seed"] for job in runs})
    # (task, method, variant: a control, a grid point) -> prior, work key
    known: dict[tuple[str, str, str], tuple[float, str]] = {}
    for job in runs:
        task, spec = job["key"]["task"], job["key"]["method_spec"]
        variant = (task, spec, job.get("variant", ""))
        if variant not in known:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # said when the tier was planned
                config = load_config(job["config"], job["overrides"])
                prior = run_prior_seconds(config, method_weight(build_method(config)))
            # The prior counts budget.episodes; the run spends what the job plans. Its start
            # and end (imports, model, summary) cost the same at any budget.
            prior *= job.get("budget", config.budget.episodes) / config.budget.episodes
            prior += RUN_START_SECONDS
            resolved = config.to_dict()
            resolved.pop("seed", None)  # another seed costs the same
            known[variant] = (prior, stable_hash(resolved))
        prior, key = known[variant]
        estimate = book.estimate(RUN, task, key, prior)
        job.update(
            kind=RUN, task=task, work_key=key, prior_seconds=prior, estimate_seconds=estimate
        )
        work.append(
            Work(
                job["name"],
                estimate,
                cores=job["cpus"],
                after=warm_of.get(warm_start_unit(job)),
                rank=1 + seeds.index(job["key"]["seed"]),
            )
        )
    return work


class ScheduledJobs:
    """``run_scheduled``'s job source: a ``CoreScheduler`` over the benchmark's jobs
    (each estimated by ``estimate_jobs``), with the time each job started; ``measured`` counts
    a job's measured cost in ``book`` and re-estimates the jobs still waiting from it."""

    def __init__(
        self,
        jobs: list[dict[str, Any]],
        work: list[Work],
        cores: int,
        book: CostBook,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jobs = {job["name"]: job for job in jobs}
        self.book = book
        self.scheduler = CoreScheduler(work, cores, clock=clock)
        self.started: dict[str, float] = {}

    def measured(self, row: dict[str, Any]) -> None:
        """A job's cost row (as the cost tables hold it): count it, revise the estimates."""
        self.book.add(row)
        revised = {}
        for name, job in self.jobs.items():
            if name in self.started:
                continue
            estimate = self.book.estimate(
                job["kind"], job["task"], job["work_key"], job["prior_seconds"]
            )
            job["estimate_seconds"] = estimate
            revised[name] = estimate
        self.scheduler.revise(revised)

    @property
    def waiting(self) -> bool:
        return self.scheduler.waiting

    def start_now(self) -> list[dict[str, Any]]:
        names = self.scheduler.start_now()
        for name in names:
            self.started[name] = time.monotonic()
        return [self.jobs[name] for name in names]

    def ended(self, name: str, succeeded: bool) -> list[str]:
        return [
            f"{dropped}: not run: {name} failed"
            for dropped in self.scheduler.ended(name, succeeded)
        ]


def run_locally(
    runs: list[dict[str, Any]],
    warm_starts: list[dict[str, Any]],
    *,
    out: Path,
    cores: int,
    session: str,
    bar: Any,
    on_result: Callable[[str, dict[str, Any]], None],
) -> tuple[list[str], dict[str, Any]]:
    """Build the warm starts that are not cached and run ``runs`` on ``cores`` cores.

    Returns:
        The failures (``"<name>: <error>"``) and what the schedule did: ``warm_starts``
        built, ``jobs_cpu_seconds`` (what the jobs measured of themselves),
        ``allotted_share`` (the cores held by running jobs over time, as a share of
        cores x the loop's wall time) and the plan's estimated ``planned_seconds`` and
        ``planned_share``.
    """
    from sao_online.benchmark.execute import execute_job
    from sao_online.jobs.pool import run_scheduled
    from sao_online.util.units import format_duration

    warm_starts = [job for job in warm_starts if not _is_cached(job)]
    tables = cost_tables(out)
    book = CostBook.read(tables)
    work = estimate_jobs(runs, warm_starts, book)
    planned = plan(work, cores)
    _say(
        f"{len(runs)} runs and {len(warm_starts)} warm starts to build, about "
        f"{format_duration(sum(item.cost for item in work))} of CPU time by estimate; "
        f"scheduled on {cores} cores: about {format_duration(planned.makespan)} with the cores "
        f"{planned.core_share:.0%} busy"
    )
    source = ScheduledJobs([*warm_starts, *runs], work, cores, book)
    measured: dict[str, float] = {}
    # A run continuing its directory measures only what was left of it: not its cost.
    resumed = {job["name"] for job in runs if (Path(job["out"]) / "config.yaml").exists()}

    def on_job(name: str, outcome: dict[str, Any]) -> None:
        job = source.jobs[name]
        measured[name] = outcome["cpu_seconds"]
        row = {
            **job,
            **job.get("key", {}),
            "session": session,
            "method": job.get("key", {}).get("method", ""),
            "episodes": job.get("budget", ""),
            "cores": source.scheduler.width(name),
            "cpu_seconds": round(outcome["cpu_seconds"], 2),
            "wall_seconds": round(time.monotonic() - source.started[name], 2),
            "resumed": name in resumed,
        }
        for table in tables:
            append_cost(table, row)
        source.measured(row)  # the jobs still waiting are estimated again
        if job["kind"] == RUN:
            on_result(name, outcome["result"])

    started = time.monotonic()
    failures = run_scheduled(source, bar=bar, target=execute_job, on_result=on_job)
    seconds = time.monotonic() - started
    allotted = source.scheduler.allotted_core_seconds
    return failures, {
        "warm_starts": len(warm_starts),
        "jobs_cpu_seconds": round(sum(measured.values()), 1),
        "allotted_share": round(allotted / (seconds * cores), 4) if seconds > 0 else None,
        "planned_seconds": round(planned.makespan, 1),
        "planned_share": round(planned.core_share, 4),
    }


def _say(message: str) -> None:
    print(f"benchmark: {message}", file=sys.stderr, flush=True)
