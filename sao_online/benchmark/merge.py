"""``sao-online benchmark merge``: pool results of one protocol (seed sets, machines) into one
scorecard, refusing results whose protocol differs and naming the difference. ``--task-from
TASK=FOLDER`` takes one task's runs from another folder: a task measured again (a new setting,
another machine) or run on its own, pooled without running the other tasks again.

When the pooled folders hold disjoint seed sets, the scorecard adds which pairwise conclusions
every set reaches on its own (``replication``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.analysis.report_render import Block, Heading, Paragraph, Table
from sao_online.benchmark.clean_tree import check_pooled_runs
from sao_online.benchmark.protocol import (
    ProtocolMismatch,
    check_same_protocol,
    joined,
    restricted,
)
from sao_online.benchmark.results import write_json_atomically, write_table_atomically
from sao_online.benchmark.results_files import TABLES, ResultsError, read_tables
from sao_online.benchmark.scorecard import compute, write_scorecard
from sao_online.benchmark.scores import separated


def results_folder(path: str | Path) -> Path:
    """A benchmark output folder's ``results/``, or the results folder itself."""
    path = Path(path)
    if (path / "results" / "benchmark.json").is_file():
        return path / "results"
    if (path / "benchmark.json").is_file():
        return path
    raise ResultsError(f"{path}: not a benchmark output or results folder (no benchmark.json)")


def conclusion(improvement: pd.DataFrame, first: str, second: str) -> str:
    """``"a > b"``, ``"b > a"`` or ``"not separated"``, from P(improvement)'s intervals."""
    if separated(improvement, first, second)[0]:
        return f"{first} > {second}"
    if separated(improvement, second, first)[0]:
        return f"{second} > {first}"
    return "not separated"


def replication_table(named: list[tuple[str, dict[str, Any]]], reps: int) -> pd.DataFrame:
    """Per pair of methods: the conclusion in each result set and whether all of them share it.

    Args:
        named: (label, results as :func:`compute` takes them: tables and benchmark.json).
    """
    computed = [(label, compute(tables, benchmark, reps)) for label, (tables, benchmark) in named]
    methods = sorted(set.intersection(*(set(c["methods"]) for _, c in computed)))
    rows = []
    for i, first in enumerate(methods):
        for second in methods[i + 1 :]:
            verdicts = {
                label: conclusion(result["aggregates"].improvement, first, second)
                for label, result in computed
            }
            distinct = set(verdicts.values())
            shared = distinct.pop() if len(distinct) == 1 else ""
            rows.append(
                {
                    "pair": f"{first} vs {second}",
                    **verdicts,
                    "shared by all": shared if shared else "no",
                }
            )
    return pd.DataFrame(rows)


@dataclass
class _Source:
    """One folder's part of a merge: its name, results folder, tables and benchmark.json."""

    name: str
    folder: Path
    tables: dict[str, pd.DataFrame]
    benchmark: dict[str, Any]
    held: list[str]  # every task the folder holds, before narrowing

    @property
    def seeds(self) -> list[int]:
        return sorted(int(s) for s in self.tables["runs"]["seed"].unique())


def _load(source: str | Path, tasks: Callable[[set[str]], set[str]]) -> _Source:
    """A folder's results, narrowed to ``tasks(its tasks)``."""
    folder = results_folder(source)
    tables, benchmark = read_tables(folder)
    held = sorted(benchmark["protocol"]["tasks"])
    keep = tasks(set(held))
    return _Source(
        str(source),
        folder,
        {name: table[table["task"].isin(keep)] for name, table in tables.items()},
        {**benchmark, "protocol": restricted(benchmark["protocol"], keep)},
        held,
    )


def _runs(tables: dict[str, pd.DataFrame]) -> set[tuple[str, int]]:
    return {(str(m), int(s)) for m, s in zip(tables["runs"]["method"], tables["runs"]["seed"])}


def _task_from(task: str, source: str | Path, pooled: list[_Source]) -> _Source:
    """``task``'s runs from ``source``, checked to cover the pooled folders' methods and seeds."""
    taken = _load(source, lambda tasks: tasks & {task})
    if task not in taken.held:
        raise ResultsError(
            f"merge: --task-from {task}={source}: it holds no task {task} "
            f"(it holds {', '.join(taken.held) or 'none'})"
        )
    wanted = {
        (method, seed)
        for part in pooled
        for method in set(map(str, part.tables["runs"]["method"]))
        for seed in part.seeds
    }
    have = _runs(taken.tables)
    for what, runs in (("lacks", wanted - have), ("has", have - wanted)):
        if runs:
            method, seed = min(runs)
            other = "have" if what == "lacks" else "lack"
            raise ResultsError(
                f"merge: --task-from {task}={source}: it {what} {len(runs)} run(s) on {task} "
                f"that the other folders {other} (e.g. {method} seed {seed}); a task taken "
                "from one folder needs the same methods and seeds as the rest"
            )
    taken.name = f"{source} ({task})"
    return taken


def merge_results(
    sources: list[str | Path],
    out: str | Path,
    *,
    reps: int = 2000,
    task_from: Mapping[str, str | Path] | None = None,
    force: bool = False,
    allow_dirty: bool = False,
) -> Path:
    """Pool the results of ``sources`` into ``out`` and write its scorecard.

    Every source is read and checked, and the pooled results scored, before anything is
    written; the output is built beside ``out`` and moved into place at the end, so a refusal
    or an error leaves no half-written folder.

    Args:
        task_from: task -> a folder to take that task's runs from instead of ``sources``
            (which need not hold it): one task measured again (a new setting, another
            machine) or run on its own, pooled with the rest without running them again.
            Only that task is taken from the folder; it must hold the same methods and seeds
            on it as ``sources`` pooled hold.
        force: replace the results ``out`` holds already (refused otherwise).
        allow_dirty: pool into the checkout's ``benchmarks/`` folder runs (or with code) from
            a tree with uncommitted changes; the scorecard's first lines say so.

    Raises:
        ProtocolMismatch: two sources measured under different protocols (the difference named).
        ResultsError: a source that is not a results folder or is damaged (the file named), a
            run present in two sources, runs of one task and method with different code, a
            ``task_from`` folder without the task or without the sources' methods and seeds, or
            an ``out`` that holds results (without ``force``) or is in use.
        ConfigError: dirty runs or code pooled into ``benchmarks/`` without ``allow_dirty``.
    """
    from sao_online.benchmark.out_folder import IN_USE, holds_results, remove_own_entries
    from sao_online.benchmark.prepare import MAX_REPS
    from sao_online.rundir.lock import RunLock, holder_of
    from sao_online.runtime.host.plan_fit import check_count

    check_count("--reps", reps, 1, MAX_REPS)
    if not sources:
        raise ResultsError("merge: no folder given")
    out = Path(out)
    for source in [*sources, *(task_from or {}).values()]:
        folder = results_folder(source)
        if (out / "results").resolve() == folder.resolve():
            raise ResultsError(f"merge: --out {out} is one of the folders being merged")
        owner = folder.parent if folder.name == "results" else folder
        holder = holder_of(owner)
        if holder is not None:
            raise ResultsError(f"merge: {source} is in use by {holder}; {IN_USE}")
    pooled = _pool(sources, task_from or {}, reps)
    runs, provenance = pooled.tables["runs"], pooled.benchmark["provenance"]
    if check_pooled_runs(out, runs, provenance, allow_dirty=allow_dirty):
        pooled.benchmark["allow_dirty"] = True
    if holds_results(out) and not force:
        raise ResultsError(
            f"merge: --out {out} holds results already; --force replaces them, or choose "
            "another folder"
        )
    lock = RunLock.acquire(out, advice=IN_USE)
    building = out.parent / f".{out.name}.merging-{os.getpid()}"
    try:
        if holds_results(out) and not force:  # written meanwhile by another process
            raise ResultsError(f"merge: --out {out} holds results already; --force replaces them")
        shutil.rmtree(building, ignore_errors=True)
        _write_pooled(building, pooled, reps)
        remove_own_entries(out)
        for entry in building.iterdir():
            os.replace(entry, out / entry.name)
    finally:
        shutil.rmtree(building, ignore_errors=True)
        lock.release()
    return out / "scorecard.md"


@dataclass
class _Pooled:
    """The pooled results of a merge, checked and scored, not yet written."""

    tables: dict[str, pd.DataFrame]
    benchmark: dict[str, Any]
    extra: list[Block]
    computed: dict[str, Any]


def _pool(sources: list[str | Path], task_from: Mapping[str, str | Path], reps: int) -> _Pooled:
    """Read, check and pool ``sources`` (see ``merge_results``); write nothing."""
    replaced = dict(task_from)
    loaded = [_load(source, lambda tasks: tasks - set(replaced)) for source in sources]
    protocol = loaded[0].benchmark["protocol"]
    for part in loaded[1:]:
        protocol = check_same_protocol(
            protocol, part.benchmark["protocol"], loaded[0].name, part.name
        )
    seen: dict[tuple, str] = {}
    for part in loaded:
        for row in part.tables["runs"].itertuples(index=False):
            key = (row.task, row.method, int(row.seed))
            if key in seen:
                raise ResultsError(
                    f"merge: {row.method} seed {row.seed} on {row.task} is in both "
                    f"{seen[key]} and {part.name}; pool disjoint seed sets"
                )
            seen[key] = part.name
    taken = [_task_from(task, source, loaded) for task, source in replaced.items()]
    for part in taken:
        protocol = joined(protocol, part.benchmark["protocol"], "the other folders", part.name)
    parts = [*loaded, *taken]
    tables = {
        table: pd.concat([part.tables[table] for part in parts], ignore_index=True)
        for table in (*TABLES, "controls")
    }
    provenance: dict[str, Any] = {}
    codes: dict[str, Any] = {}
    sessions: list[dict[str, Any]] = []
    for part in parts:
        provenance.update(part.benchmark.get("provenance", {}))
        codes.update(part.benchmark.get("code", {}))
        for session in part.benchmark.get("sessions", []):
            if session not in sessions:  # tasks taken from one folder bring its sessions once
                sessions.append(session)
    benchmark = {
        "protocol": protocol,
        "provenance": provenance,
        "sessions": sessions,
        "code": codes,
        "sources": [
            {
                "folder": part.name,
                "seeds": part.seeds,
                "tasks": sorted(part.benchmark["protocol"]["tasks"]),
            }
            for part in parts
        ],
    }
    computed = compute(tables, benchmark, reps)  # what the scorecard refuses, before writing
    extra: list[Block] = []
    if len(loaded) > 1:
        named = []
        for part in loaded:  # each seed set with the taken tasks' runs of its seeds
            part_tables = {
                name: pd.concat(
                    [
                        part.tables[name],
                        *(t.tables[name][t.tables[name]["seed"].isin(part.seeds)] for t in taken),
                    ],
                    ignore_index=True,
                )
                for name in part.tables
            }
            named.append(
                (
                    f"{part.name} (seeds {', '.join(map(str, part.seeds))})",
                    (part_tables, {"protocol": protocol}),
                )
            )
        extra = [
            Heading("Which conclusions each result set reaches on its own"),
            Paragraph(
                "For every pair of methods: the conclusion of each pooled folder alone (a > b "
                "when the 95% interval of P(a > b) lies above 1/2) and whether all of them "
                "share it."
            ),
            Table(replication_table(named, reps)),
        ]
    return _Pooled(tables, benchmark, extra, computed)


def _write_pooled(folder: Path, pooled: _Pooled, reps: int) -> None:
    """The pooled results and their scorecard, written into ``folder``."""
    target = folder / "results"
    target.mkdir(parents=True, exist_ok=True)
    for name, table in pooled.tables.items():
        if name != "controls" or len(table):  # controls.csv only where controls ran
            write_table_atomically(table, target / f"{name}.csv")
    write_json_atomically(target / "benchmark.json", pooled.benchmark)
    write_scorecard(folder, reps=reps, extra=pooled.extra, computed=pooled.computed)


__all__ = ["ProtocolMismatch", "merge_results", "replication_table", "results_folder"]
