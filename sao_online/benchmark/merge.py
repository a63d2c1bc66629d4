"""``sao-online benchmark merge``: pool results of one protocol (seed sets, machines) into one
scorecard, refusing results whose protocol differs and naming the difference.

When the pooled folders hold disjoint seed sets, the scorecard adds which pairwise conclusions
every set reaches on its own (``replication``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.analysis.report_render import Block, Heading, Paragraph, Table
from sao_online.benchmark.protocol import ProtocolMismatch, check_same_protocol
from sao_online.benchmark.results import write_json_atomically
from sao_online.benchmark.scorecard import ResultsError, compute, read_tables, write_scorecard
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


def _seed_sets(tables: dict[str, pd.DataFrame]) -> str:
    seeds = sorted(int(s) for s in tables["runs"]["seed"].unique())
    return f"seeds {', '.join(map(str, seeds))}"


def merge_results(sources: list[str | Path], out: str | Path, *, reps: int = 2000) -> Path:
    """Pool the results of ``sources`` into ``out`` and write its scorecard.

    Raises:
        ProtocolMismatch: two sources measured under different protocols (the difference named).
        ResultsError: a source that is not a results folder, or a run present in two sources.
    """
    if not sources:
        raise ResultsError("merge: no folder given")
    loaded = []
    for source in sources:
        folder = results_folder(source)
        tables, benchmark = read_tables(folder)
        loaded.append((str(source), folder, tables, benchmark))
    protocol = loaded[0][3]["protocol"]
    for name, _, _, benchmark in loaded[1:]:
        protocol = check_same_protocol(protocol, benchmark["protocol"], loaded[0][0], name)
    seen: dict[tuple, str] = {}
    for name, _, tables, _ in loaded:
        for row in tables["runs"].itertuples(index=False):
            key = (row.task, row.method, int(row.seed))
            if key in seen:
                raise ResultsError(
                    f"merge: {row.method} seed {row.seed} on {row.task} is in both "
                    f"{seen[key]} and {name}; pool disjoint seed sets"
                )
            seen[key] = name
    out = Path(out)
    target = out / "results"
    if target.resolve() in {folder.resolve() for _, folder, _, _ in loaded}:
        raise ResultsError(f"merge: --out {out} is one of the folders being merged")
    target.mkdir(parents=True, exist_ok=True)
    from sao_online.analysis.report_render import write_csv

    for table in ("runs", "phases", "shifts", "curves"):
        pooled = pd.concat([tables[table] for _, _, tables, _ in loaded], ignore_index=True)
        write_csv(pooled, target / f"{table}.csv")
    provenance: dict[str, Any] = {}
    for _, _, _, benchmark in loaded:
        provenance.update(benchmark.get("provenance", {}))
    write_json_atomically(
        target / "benchmark.json",
        {
            "protocol": protocol,
            "provenance": provenance,
            "sessions": [
                session
                for _, _, _, benchmark in loaded
                for session in benchmark.get("sessions", [])
            ],
            "sources": [
                {"folder": name, "seeds": sorted(int(s) for s in tables["runs"]["seed"].unique())}
                for name, _, tables, _ in loaded
            ],
        },
    )
    extra: list[Block] = []
    if len(loaded) > 1:
        named = [
            (f"{name} ({_seed_sets(tables)})", (tables, benchmark))
            for name, _, tables, benchmark in loaded
        ]
        extra = [
            Heading("Which conclusions each result set reaches on its own"),
            Paragraph(
                "For every pair of methods: the conclusion of each pooled folder alone (a > b "
                "when the 95% interval of P(a > b) lies above 1/2) and whether all of them "
                "share it."
            ),
            Table(replication_table(named, reps)),
        ]
    return write_scorecard(out, reps=reps, extra=extra)


__all__ = ["ProtocolMismatch", "merge_results", "replication_table", "results_folder"]
