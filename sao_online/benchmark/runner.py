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

import json
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
from sao_online.benchmark.protocol import (
    FLOOR_METHOD,
    check_same_protocol,
    method_labels,
    protocol_of,
)
from sao_online.benchmark.provenance import machine, provenance_id
from sao_online.benchmark.results import result_tables, write_json_atomically
from sao_online.benchmark.suite import TierPlan, plan_tier
from sao_online.benchmark.warm_starts import (
    check_resumed_warm_starts,
    import_warm_starts,
    planned_warm_starts,
    shared_warm_starts,
    tier_warm_starts,
    warm_start_overrides,
)
from sao_online.config import ConfigError
from sao_online.config.names import check_method_name
from sao_online.runtime.host.threads import usable_cores
from sao_online.runtime.scheduling.planner import run_episodes_of

BACKENDS = ("local", "ray")
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
    """Every per-run result record under ``out/results/runs``."""
    folder = out / "results" / "runs"
    if not folder.is_dir():
        return []
    return [json.loads(path.read_text()) for path in sorted(folder.rglob("seed-*.json"))]


def write_tables(
    out: Path,
    records: list[dict[str, Any]],
    protocol: dict[str, Any],
    session: dict[str, Any] | None = None,
) -> None:
    """Compile per-run records (and the controls' records kept in ``out``) into
    ``results/*.csv`` and ``results/benchmark.json``.

    ``benchmark.json`` keeps the ``sessions`` already recorded there (one per command that ran
    runs: when, how long, how many runs, where) and appends ``session``.
    """
    from sao_online.analysis.report_render import write_csv

    provenances: dict[str, Any] = {}
    controls = read_controls(out)  # the re-adaptation controls' records, when it ran them
    for record in [*records, *controls]:
        record.setdefault("provenance_id", provenance_id(record["provenance"]))
        provenances[record["provenance_id"]] = record["provenance"]
    folder = out / "results"
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in result_tables(records).items():
        write_csv(table, folder / f"{name}.csv")
    if controls:
        write_csv(control_table(controls), folder / "controls.csv")
    path = folder / "benchmark.json"
    sessions = json.loads(path.read_text()).get("sessions", []) if path.exists() else []
    if session is not None:
        sessions.append(session)
    write_json_atomically(
        path, {"protocol": protocol, "provenance": provenances, "sessions": sessions}
    )


def method_specs(methods: list[str] | None, plan: TierPlan) -> list[str]:
    """The method specs a benchmark runs: ``methods`` (default the tier's), each name's form
    checked (built on each task later), and the floor ``frozen`` first unless given.

    Raises:
        ConfigError: no method, or a malformed name (a suggestion for a typo).
    """
    specs = [m.strip() for m in (methods or plan.methods) if m.strip()]
    if not specs:
        raise ConfigError("--methods: no method given")
    for spec in specs:
        try:
            check_method_name(spec)
        except ValueError as error:
            raise ConfigError(f"--methods: {error}") from None
    if FLOOR_METHOD not in specs:
        specs = [FLOOR_METHOD, *specs]  # the floor of the normalized score is always measured
    return specs


def _plan_jobs(
    plan: TierPlan,
    labels: dict[str, str],
    seeds: list[int],
    out: Path,
    overrides: list[str],
) -> list[dict[str, Any]]:
    from sao_online.commands.compare import method_overrides

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
                key = {
                    "task": task.name,
                    "family": task.family,
                    "method": label,
                    "method_spec": spec,
                    "seed": seed,
                    "tier": plan.tier,
                    "warm_start_seed": warm_start_seed,
                }
                jobs.append(
                    {
                        "name": f"{task.name}/{label}/seed-{seed}",
                        "config": task.config,
                        "overrides": [
                            *task.overrides,
                            *overrides,
                            *warm,
                            *own,
                            f"seed={seed}",
                        ],
                        "out": str(out / "runs" / task.name / label / f"seed-{seed}"),
                        "overwrite": False,
                        "resume": True,
                        "key": key,
                        "cpus": task.cpus,
                        "budget": episodes[task.name, spec],
                        "time_window": task.time_window,
                    }
                )
    return jobs


def _warm_start_jobs(plan: TierPlan, overrides: list[str]) -> list[dict[str, Any]]:
    """One job per distinct warm start the tasks use (tasks may share one); each job lists the
    tasks it serves and, in ``serves``, the (task, warm-start seed) pairs."""
    from sao_online.pretrain import warm_start_path

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


def check_run_options(
    *,
    seeds: int | None,
    first_seed: int | None,
    backend: str,
    address: str | None,
    parallel: int | None,
) -> None:
    """Refuse a benchmark's options that no suite makes valid (None: the tier's default).

    Raises:
        ConfigError: the option and what is wrong with it, in one line.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"--backend: must be local or ray, got {backend!r}")
    if address is not None and backend != "ray":
        raise ConfigError("--address: applies to --backend ray only")
    if parallel is not None and parallel < 1:
        raise ConfigError(f"--parallel: must be >= 1, got {parallel}")
    if seeds is not None and seeds < 1:
        raise ConfigError(f"--seeds: must be >= 1, got {seeds}")
    if first_seed is not None and first_seed < 0:
        raise ConfigError(f"--first-seed: must be >= 0, got {first_seed}")


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

    Results are kept in the checkout's ``benchmarks/`` folder only from committed code, unless
    ``allow_dirty`` (which the scorecard's first lines then show). ``controls`` (default: the
    tier's ``controls``) adds a re-adaptation control per learning run and shift
    (``controls.py``); a resumed benchmark may add them.

    Returns:
        The path of ``scorecard.md``.

    Raises:
        ConfigError: a bad suite, tier, method, seed range or backend (named), an output
            folder that holds another benchmark, ``benchmarks/`` from a dirty tree, or runs that
            failed (each named).
        StopRequested: SIGINT or SIGTERM came (local backend); every run was stopped, the
            results of those that had finished are kept, and ``resume=True`` continues.
    """
    from sao_online.runtime.host.main_guard import require_main_guard

    check_run_options(
        seeds=seeds, first_seed=first_seed, backend=backend, address=address, parallel=parallel
    )
    if backend == "local":
        require_main_guard("benchmark")
    out = Path(out)
    dirty_allowed = check_clean_tree(out, allow_dirty=allow_dirty)
    overrides = list(overrides or [])
    plan = plan_tier(suite, tier)
    if overrides:  # every task must still load with them
        for task in plan.tasks:
            try:
                task.load(overrides)
            except ConfigError as error:
                raise ConfigError(f"--set: task {task.name}: {error}") from None
    seeds = plan.seeds if seeds is None else seeds
    first_seed = plan.first_seed if first_seed is None else first_seed
    labels = method_labels(plan, method_specs(methods, plan), overrides)
    seed_list = list(range(first_seed, first_seed + seeds))
    tuned_on = sorted(set(seed_list) & set((plan.tuned or {}).get("seeds", [])))
    if tuned_on:
        raise ConfigError(
            f"--seeds/--first-seed: this suite's settings were tuned (in "
            f"{plan.tuned.get('from')}) on seeds {', '.join(map(str, tuned_on))} among these: "
            "evaluate on others"
        )
    protocol = protocol_of(plan, labels, overrides)
    protocol_file = out / "results" / "benchmark.json"
    if (out / SWEEP_FILE).exists():
        raise ConfigError(
            f"--out: {out} holds a sweep (--sweep with --resume continues it), not a benchmark"
        )
    if protocol_file.exists() or (out / "runs").exists():
        if not resume:
            raise ConfigError(
                f"--out: {out} holds a benchmark already; --resume continues it, or choose "
                "another folder"
            )
        if protocol_file.exists():
            saved = json.loads(protocol_file.read_text())["protocol"]
            protocol = check_same_protocol(saved, protocol, str(out), "this command")
    from sao_online.benchmark.local_runner import CoreUse
    from sao_online.runtime.host.processes import start_server_early

    started, before = time.time(), CoreUse.now()  # the session: from the process server on
    if backend == "local":
        start_server_early()
    jobs = _plan_jobs(plan, labels, seed_list, out, overrides)
    if plan.controls if controls is None else controls:
        jobs += control_jobs(jobs)
    pending = [job for job in jobs if not result_path(out, job["key"]).exists()]
    shared: dict[str, Path] = {}
    if warm_starts is not None:
        shared, unused = shared_warm_starts(plan, warm_starts, overrides)
        if unused:
            _say(f"{warm_starts}: no task of this tier, not used: {', '.join(unused)}")
    if pending:  # before anything changes: a refusal leaves the cache as it was
        check_resumed_warm_starts(planned_warm_starts(plan, overrides, shared), read_results(out))
    import_warm_starts(plan, overrides, shared, _say)
    finished = len(jobs) - len(pending)
    if finished:
        _say(f"{finished} of {len(jobs)} runs finished earlier: kept, not run again")
    write_tables(out, read_results(out), protocol)  # the protocol is on disk from the start
    total = sum(job["budget"] for job in pending)
    bar = tqdm(
        total=total,
        desc=f"benchmark {plan.suite}/{tier}: {len(pending)} runs",
        unit="ep",
        disable=not progress,
        smoothing=0.05,
        file=sys.stderr,
    )
    done = finished

    def on_result(name: str, record: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        record["provenance_id"] = provenance_id(record["provenance"])
        write_json_atomically(result_path(out, record["key"]), record)
        message = _line(record, done, len(jobs))
        if progress:
            bar.write(message, file=sys.stderr)
        else:
            _say(message)

    cores = max(1, parallel or usable_cores())
    schedule: dict[str, Any] = {}
    failures: list[str] = []
    ended = "stopped"  # unless the runs below return: a signal, an error
    session = None
    try:
        if pending:
            warm = _warm_start_jobs(plan, overrides)
            session_id = datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds")
            failures, schedule = _run(
                backend, address, cores, pending, warm, bar, on_result, out, session_id
            )
        ended = "failed" if failures else "finished"
    finally:
        bar.close()
        if pending:  # recorded however the command ends: its runs' results are kept either way
            use = CoreUse.now().since(before)
            session = {
                "started": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
                "seconds": use["seconds"],
                "runs": done - finished,
                "warm_starts": schedule.get("warm_starts"),
                "backend": backend,
                "parallel": cores,
                "machine": machine(),
                "ended": ended,
            }
            if dirty_allowed:
                session["allow_dirty"] = True
            if backend == "local":  # Ray's processes are not this command's children
                session.update(
                    {key: value for key, value in use.items() if key != "seconds"},
                    **{key: value for key, value in schedule.items() if key != "warm_starts"},
                )
            write_tables(out, read_results(out), protocol, session)
    if session is not None:
        _say(session_summary(session))
    if failures:
        raise ConfigError(
            f"benchmark: {len(failures)} run(s) failed (finished runs are kept; --resume "
            "continues):\n  " + "\n  ".join(failures)
        )
    from sao_online.benchmark.scorecard import write_scorecard

    if session is None:
        write_tables(out, read_results(out), protocol)
    return write_scorecard(out, reps=reps)


def session_summary(session: dict[str, Any]) -> str:
    """One line: how long a session took and, on the local backend, how busy it kept the cores."""
    line = f"{session['runs']} runs in {session['seconds']:.0f} s"
    if session.get("core_share") is not None:
        line += (
            f"; the cores {session['core_share']:.0%} busy ({session['cpu_seconds']:.0f} CPU s "
            f"of {session['cores']} cores x {session['seconds']:.0f} s; the schedule held "
            f"{session['allotted_share']:.0%} of them, planned {session['planned_share']:.0%})"
        )
        if session.get("other_share") is not None:
            line += f"; other work took {session['other_share']:.0%} of the cores meanwhile"
    return line


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
