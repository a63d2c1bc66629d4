"""``sao-online benchmark``: every task x method x seed of a suite's tier, then the scorecard.

The output folder::

    OUT/runs/<task>/<method>/seed-<k>/      run directories (not needed once results exist)
    OUT/results/benchmark.json              the protocol (suite, tier, resolved task configs,
                                            methods) and provenance records
    OUT/results/runs/<task>/<method>/seed-<k>.json   each finished run's result record
    OUT/results/{runs,phases,shifts,curves}.csv      the same records as tables
    OUT/scorecard.{md,html,csv,json}, OUT/figures/

With ``resume`` a run whose result exists is skipped, a run directory without one continues
from its last checkpoint, and the protocol must be the one the folder was started with.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from sao_online.benchmark.clean_tree import check_clean_tree
from sao_online.benchmark.controls import control_jobs, control_path, control_table, read_controls
from sao_online.benchmark.identity import check_kept_results
from sao_online.benchmark.out_folder import (
    IN_USE,
    close_stale_sessions,
    holds_results,
    remove_own_entries,
    session_summary,
)
from sao_online.benchmark.prepare import PreparedBenchmark, prepare_benchmark
from sao_online.benchmark.protocol import check_same_protocol
from sao_online.benchmark.results import (
    result_tables,
    write_json_atomically,
    write_table_atomically,
)
from sao_online.benchmark.results_files import read_benchmark, read_kept, read_records
from sao_online.benchmark.suite import TierPlan
from sao_online.benchmark.warm_starts import (
    check_resumed_warm_starts,
    import_warm_starts,
    planned_warm_starts,
    shared_warm_starts,
    tier_warm_starts,
    warm_start_overrides,
)
from sao_online.config import ConfigError
from sao_online.rundir.provenance import machine, provenance_id
from sao_online.runtime.scheduling.planner import run_episodes_of
from sao_online.util.code_identity import code_id
from sao_online.util.quiet import progress_bars

#: The file that marks a sweep's folder (``sao_online.benchmark.sweep``).
SWEEP_FILE = "sweep.json"


def _say(message: str) -> None:
    print(f"benchmark: {message}", file=sys.stderr, flush=True)


def result_path(out: Path, key: dict[str, Any]) -> Path:
    """Where the record of the run (or re-adaptation control) ``key`` is kept."""
    if "control" in key:
        return control_path(out, key)
    return out / "results" / "runs" / key["task"] / key["method"] / f"seed-{key['seed']}.json"


def read_results(out: Path) -> list[dict[str, Any]]:
    """Every per-run result record under ``out/results/runs``, each checked (a damaged or
    foreign file is a ``ResultsError`` naming it)."""
    return read_records(out)


def write_tables(
    out: Path,
    records: list[dict[str, Any]],
    protocol: dict[str, Any],
    session: dict[str, Any] | None = None,
) -> None:
    """Compile per-run records (and the controls' records kept in ``out``) into
    ``results/*.csv`` and ``results/benchmark.json``.

    ``benchmark.json`` keeps the ``sessions`` already recorded there (one per command that ran
    runs: when, how long, how many runs, where, how it ended) and records ``session`` (in place
    of the entry with its ``id``, else appended); ``code`` holds the code identity of each
    ``code_id`` the runs name.
    """
    provenances: dict[str, Any] = {}
    codes: dict[str, Any] = {}
    controls = read_controls(out)  # the re-adaptation controls' records, when it ran them
    for record in [*records, *controls]:
        record.setdefault("provenance_id", provenance_id(record["provenance"]))
        provenances[record["provenance_id"]] = record["provenance"]
        if record.get("code"):
            codes[code_id(record["code"])] = record["code"]
    folder = out / "results"
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in result_tables(records).items():
        write_table_atomically(table, folder / f"{name}.csv")
    if controls:
        write_table_atomically(control_table(controls), folder / "controls.csv")
    path = folder / "benchmark.json"
    sessions = read_benchmark(path).get("sessions", []) if path.exists() else []
    if session is not None:
        sessions = [s for s in sessions if s.get("id") is None or s.get("id") != session["id"]]
        sessions.append(session)
    write_json_atomically(
        path,
        {"protocol": protocol, "provenance": provenances, "sessions": sessions, "code": codes},
    )


def _plan_jobs(
    plan: TierPlan,
    labels: dict[str, str],
    seeds: list[int],
    out: Path,
    overrides: list[str],
) -> list[dict[str, Any]]:
    from sao_online.jobs.methods import method_overrides

    jobs = []
    episodes: dict[tuple[str, str], int] = {}
    for seed in seeds:  # seed by seed: an interrupted benchmark has whole seeds
        warm = warm_start_overrides(plan.warm_start_seed(seed))
        for task in plan.tasks:
            warm_start_seed = task.load([*overrides, *warm]).model.warm_start_seed
            for spec, label in labels.items():
                own = [*method_overrides(spec), *task.method_overrides(spec)]
                if (task.name, spec) not in episodes:
                    episodes[task.name, spec] = run_episodes_of(task.load([*overrides, *own]))
                budget = episodes[task.name, spec]
                jobs.append(
                    _job(plan, task, spec, label, seed, out, overrides, budget, warm_start_seed)
                )
    return jobs


def _job(
    plan: TierPlan,
    task: Any,
    spec: str,
    label: str,
    seed: int,
    out: Path,
    overrides: list[str],
    budget: int,
    warm_start_seed: int | None = None,
) -> dict[str, Any]:
    """The job of one run (``warm_start_seed``: the one its config resolves to, for its key;
    the tier's warm start for ``seed`` is in its overrides either way)."""
    from sao_online.jobs.methods import method_overrides

    key = {
        "task": task.name,
        "family": task.family,
        "method": label,
        "method_spec": spec,
        "seed": seed,
        "tier": plan.tier,
        "warm_start_seed": warm_start_seed,
    }
    warm = warm_start_overrides(plan.warm_start_seed(seed))
    own = [*method_overrides(spec), *task.method_overrides(spec)]  # a tuned suite's too
    return {
        "name": f"{task.name}/{label}/seed-{seed}",
        "config": task.config,
        "overrides": [*task.overrides, *overrides, *warm, *own, f"seed={seed}"],
        "out": str(out / "runs" / task.name / label / f"seed-{seed}"),
        "overwrite": False,
        "resume": True,
        "key": key,
        "cpus": task.cpus,
        "budget": budget,
        "time_window": task.time_window,
    }


def _warm_start_jobs(plan: TierPlan, overrides: list[str]) -> list[dict[str, Any]]:
    """One job per distinct warm start the tasks use (tasks may share one); each job lists the
    tasks it serves and, in ``serves``, the (task, warm-start seed) pairs."""
    from sao_online.learning.warm_start import warm_start_path

    jobs: dict[Path, dict[str, Any]] = {}
    for warm in tier_warm_starts(plan):
        for task in plan.tasks:
            config = task.load([*overrides, *warm])
            if not config.model.warm_start:
                continue
            path = warm_start_path(config)
            served = [task.name, config.model.warm_start_seed]
            if path in jobs:
                jobs[path]["tasks"].append(task.name)
                jobs[path]["serves"].append(served)
                continue
            jobs[path] = {
                "name": f"{task.name}/warm-start"
                + (f"-{config.model.warm_start_seed}" if plan.warm_start_seeds else ""),
                "config": task.config,
                "overrides": [*task.overrides, *overrides, *warm],
                "cpus": 1,
                "tasks": [task.name],
                "serves": [served],
            }
    return list(jobs.values())


def _line(record: dict[str, Any], done: int, total: int) -> str:
    key, run = record["key"], record["run"]
    phases = ", ".join(f"{row['reward_mean']:.2f}" for row in record["phases"])
    seconds = run.get("seconds")
    took = f"{seconds:.0f} s" if seconds is not None else "?"
    control = f" (control of shift {key['control']})" if "control" in key else ""
    return (
        f"[{done}/{total}] {key['task']} {key['method']} seed {key['seed']}{control}: {took}, "
        f"{run['episodes']} episodes, mean reward per phase {phases}"
    )


def run_benchmark(
    *,
    out: str | Path,
    suite: str | Path = "core",
    tier: str = "smoke",
    methods: list[str] | None = None,
    seeds: int | None = None,
    first_seed: int | None = None,
    overrides: list[str] | None = None,
    resume: bool = False,
    force: bool = False,
    backend: str = "local",
    address: str | None = None,
    parallel: int | None = None,
    progress: bool = True,
    reps: int = 2000,
    warm_starts: str | Path | None = None,
    allow_dirty: bool = False,
    controls: bool | None = None,
) -> Path:
    """Run a suite's tier for ``methods`` (plus ``frozen``) x seeds; write the scorecard.

    ``warm_starts`` is a folder of exported warm starts, one sub-folder per task
    (``sao-online benchmark warm-starts --export``): the tasks it holds start from those
    weights instead of ones fitted here, so runs on several machines share them.

    Every input is checked first (``prepare_benchmark``): nothing is written before. One
    process writes a folder at a time (``OUT/.lock``); ``force`` replaces a folder's results.
    Results are kept in the checkout's ``benchmarks/`` folder only from committed code, unless
    ``allow_dirty`` (which the scorecard's first lines then show). ``controls`` (default: the
    tier's ``controls``) adds a re-adaptation control per learning run and shift
    (``controls.py``); a resumed benchmark may add them.

    Returns:
        The path of ``scorecard.md``.

    Raises:
        ConfigError: a bad suite, tier, method, seed range or backend (named), a plan beyond
            the machine, an output folder that holds another benchmark (without ``resume`` or
            ``force``) or is in use, ``benchmarks/`` from a dirty tree, kept results that are
            damaged or of another setup, or runs that failed (each named).
        StopRequested: SIGINT or SIGTERM came (local backend); every run was stopped, the
            results of those that had finished are kept, and ``resume=True`` continues.
    """
    from sao_online.runtime.host.main_guard import require_main_guard

    if resume and force:
        raise ConfigError("--resume and --force: continue the benchmark or replace it, not both")
    dirty_allowed = check_clean_tree(out, allow_dirty=allow_dirty)
    prepared = prepare_benchmark(
        out=out,
        suite=suite,
        tier=tier,
        methods=methods,
        seeds=seeds,
        first_seed=first_seed,
        overrides=overrides,
        backend=backend,
        address=address,
        parallel=parallel,
        reps=reps,
        warm_starts=warm_starts,
        controls=controls,
    )
    if prepared.backend == "local":
        require_main_guard("benchmark")
    out = prepared.out
    if (out / SWEEP_FILE).exists():
        raise ConfigError(
            f"--out: {out} holds a sweep (--sweep with --resume continues it), not a benchmark"
        )
    if holds_results(out) and not (resume or force):
        raise ConfigError(
            f"--out: {out} holds a benchmark already; --resume continues it, --force replaces "
            "its results, or choose another folder"
        )
    from sao_online.rundir.lock import RunLock

    lock = RunLock.acquire(out, advice=IN_USE)
    try:
        if lock.took_over:
            _say(lock.took_over)
        if force:
            remove_own_entries(out)
        return _run_locked(prepared, progress, dirty_allowed)
    finally:
        lock.release()


def _run_locked(prepared: PreparedBenchmark, progress: bool, dirty_allowed: bool) -> Path:
    """The body of ``run_benchmark`` while this process holds the folder's lock
    (``dirty_allowed``: results written into ``benchmarks/`` from a dirty tree, recorded)."""
    from sao_online.benchmark.local_runner import CoreUse
    from sao_online.runtime.host.processes import start_server_early

    out, plan, overrides = prepared.out, prepared.plan, prepared.overrides
    protocol = prepared.protocol
    protocol_file = out / "results" / "benchmark.json"
    if protocol_file.exists():
        saved = read_benchmark(protocol_file)["protocol"]
        protocol = check_same_protocol(saved, protocol, str(out), "this command")
    close_stale_sessions(out, _say)
    kept = read_kept(out)
    check_kept_results(kept, _job_finder(prepared), plan.tier)
    started, before = time.time(), CoreUse.now()  # the session: from the process server on
    if prepared.backend == "local":
        start_server_early()
    jobs = _plan_jobs(plan, prepared.labels, prepared.seeds, out, overrides)
    if prepared.controls:
        jobs += control_jobs(jobs)
    pending = [job for job in jobs if not result_path(out, job["key"]).exists()]
    shared: dict[str, Path] = {}
    if prepared.warm_starts is not None:
        shared, unused = shared_warm_starts(plan, prepared.warm_starts, overrides)
        if unused:
            _say(f"{prepared.warm_starts}: no task of this tier, not used: {', '.join(unused)}")
    records = [record for _, record in kept]
    if pending:  # before anything changes: a refusal leaves the cache as it was
        check_resumed_warm_starts(planned_warm_starts(plan, overrides, shared), records)
    import_warm_starts(plan, overrides, shared, _say)
    finished = len(jobs) - len(pending)
    if finished:
        _say(f"{finished} of {len(jobs)} runs finished earlier: kept, not run again")
    session_id = (
        f"{datetime.fromtimestamp(started, UTC).isoformat(timespec='seconds')}/{os.getpid()}"
    )
    session: dict[str, Any] | None = None
    if pending:  # recorded from the start: a session killed with SIGKILL is still listed
        session = {
            "id": session_id,
            "started": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "runs": 0,
            "seconds": 0.0,
            "backend": prepared.backend,
            "parallel": prepared.cores,
            "machine": machine(),
            "ended": "running",
        }
        if dirty_allowed:
            session["allow_dirty"] = True
    write_tables(out, records, protocol, session)  # the protocol is on disk from the start
    total = sum(job["budget"] for job in pending)
    bar = tqdm(
        total=total,
        desc=f"benchmark {plan.suite}/{plan.tier}: {len(pending)} runs",
        unit="ep",
        disable=not progress_bars(progress),
        smoothing=0.05,
        file=sys.stderr,
    )
    ran = 0

    def on_result(name: str, record: dict[str, Any]) -> None:
        nonlocal ran
        ran += 1
        record["provenance_id"] = provenance_id(record["provenance"])
        record["session"] = session_id
        write_json_atomically(result_path(out, record["key"]), record)
        message = _line(record, finished + ran, len(jobs))
        if not progress:
            _say(message)
        elif bar.disable:  # not a terminal: the line alone, no bar redrawn around it
            print(message, file=sys.stderr, flush=True)
        else:
            bar.write(message, file=sys.stderr)

    schedule: dict[str, Any] = {}
    failures: list[str] = []
    ended = "stopped"  # unless the runs below return: a signal, an error
    try:
        if pending:
            warm = _warm_start_jobs(plan, overrides)
            failures, schedule = _run(
                prepared.backend,
                prepared.address,
                prepared.cores,
                pending,
                warm,
                bar,
                on_result,
                out,
                session_id,
            )
        ended = "failed" if failures else "finished"
    finally:
        bar.close()
        if session is not None:  # recorded however the command ends: its results are kept
            use = CoreUse.now().since(before)
            session.update(
                seconds=use["seconds"],
                runs=ran,
                warm_starts=schedule.get("warm_starts"),
                ended=ended,
            )
            if prepared.backend == "local":  # Ray's processes are not this command's children
                session.update(
                    {key: value for key, value in use.items() if key != "seconds"},
                    **{key: value for key, value in schedule.items() if key != "warm_starts"},
                )
            write_tables(out, read_results(out), protocol, session)
    if session is not None:
        _say(session_summary(session))
    if failures:
        from sao_online.jobs.pool import RERUN_ADVICE, failures_message

        raise ConfigError(failures_message("benchmark", failures, RERUN_ADVICE))
    from sao_online.benchmark.scorecard import write_scorecard

    if session is None:
        write_tables(out, read_results(out), protocol)
    return write_scorecard(out, reps=prepared.reps)


def _job_finder(prepared: PreparedBenchmark) -> Callable[[str, str, int], dict[str, Any] | None]:
    """(task, method label, seed) -> the job this benchmark runs there (any seed), or None."""
    tasks = {task.name: task for task in prepared.plan.tasks}
    specs = {label: spec for spec, label in prepared.labels.items()}

    def job_for(task: str, label: str, seed: int) -> dict[str, Any] | None:
        if task not in tasks or label not in specs:
            return None
        return _job(
            prepared.plan,
            tasks[task],
            specs[label],
            label,
            seed,
            prepared.out,
            prepared.overrides,
            0,
        )

    return job_for


def _run(
    backend: str,
    address: str | None,
    cores: int,
    jobs: list[dict[str, Any]],
    warm_jobs: list[dict[str, Any]],
    bar: Any,
    on_result: Callable[[str, dict[str, Any]], None],
    out: Path,
    session_id: str,
) -> tuple[list[str], dict[str, Any]]:
    """Run the jobs on ``backend``; return the failures and what the schedule did."""
    if backend == "ray":
        from sao_online.benchmark.ray_runner import run_on_ray

        failures = run_on_ray(jobs, warm_jobs, address=address, bar=bar, on_result=on_result)
        return failures, {"warm_starts": len(warm_jobs)}
    from sao_online.benchmark.local_runner import run_locally

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_locally(
            jobs,
            warm_jobs,
            out=out,
            cores=cores,
            session=session_id,
            bar=bar,
            on_result=on_result,
        )
