"""What a benchmark job costs: estimated before it runs, measured after, kept for the next.

Every job the local backend runs is measured (CPU seconds of its process and the children it
waited for, such as the sandbox's; wall seconds) and one row is appended to two tables:
``OUT/results/costs.csv``, kept with the benchmark's data, and ``<cache>/benchmark-costs.csv``
(``sao_online.util.cache``), which every benchmark on this machine shares. A job's estimate is then:

1. the mean measured cost of the same work (the same warm start, or a run of the same task,
   method and config at another seed), from either table; failing that,
2. the prior below times the median ratio measured / prior of the jobs already measured (of
   the same kind and task, else the same kind, else any): the machine's speed, learned;
   failing that,
3. the prior: CPU seconds from the job's config, with constants fitted to the costs measured
   for sizing the lite tier (``benchmarks/lite-sizing/costs.csv``, one process, one thread).

The benchmark estimates every job before it starts and again, for the jobs still waiting, each
time a job ends and its measured cost is counted, so even a first benchmark on a machine
schedules its later seeds by what its first ones cost.

A run's prior is ``episodes x max_episode_tokens x (A + B x layers x hidden^2) x w`` with
``w`` = 1 for a method that never updates (``frozen``), 2 for one without a critic and 4 for
one with a critic (SAO's K critic updates and value pass); a warm start's is ``steps x batch
x max_episode_tokens x (C + D x layers x hidden^2)``. Work the prior does not see (a sandbox's
programs, an env's own time) is what the measured ratios correct.
"""

from __future__ import annotations

import csv
import io
import os
import statistics
from pathlib import Path
from typing import Any

from sao_online.runtime.host.plan_fit import (  # the priors: also what a plan is checked by
    RUN_SECONDS_PER_TOKEN,
    RUN_SECONDS_PER_TOKEN_WEIGHT,
    WARM_START_SECONDS_PER_TOKEN,
    WARM_START_SECONDS_PER_TOKEN_WEIGHT,
    method_weight,
    run_prior_seconds,
    warm_start_prior_seconds,
)

WARM_START, RUN = "warm start", "run"
COLUMNS = (
    "session",
    "kind",
    "name",
    "task",
    "method",
    "seed",
    "work_key",
    "episodes",
    "cores",
    "prior_seconds",
    "estimate_seconds",
    "cpu_seconds",
    "wall_seconds",
    "resumed",
)
MACHINE_TABLE = "benchmark-costs.csv"


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


class CostBook:
    """Measured job costs, read from cost tables, and the estimates made from them."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows: list[dict[str, Any]] = []
        self._seen: set[tuple[Any, Any]] = set()
        self._same_work: dict[tuple[Any, Any], list[float]] = {}
        self._ratios: dict[tuple[Any, Any], list[float]] = {}  # (kind or None, task or None)
        self._medians: dict[tuple[Any, Any], float] = {}
        for row in rows:
            self.add(row)

    def add(self, row: dict[str, Any]) -> None:
        """Count one measured job (a cost table's row), unless it measured only a resumed
        run's remainder, has no CPU seconds, or was counted already (the same session and
        name: the same row in the folder's and the machine's table)."""
        cpu, prior = _number(row.get("cpu_seconds")), _number(row.get("prior_seconds"))
        if cpu is None or str(row.get("resumed")).lower() == "true":
            return
        identity = (row.get("session"), row.get("name"))
        if identity in self._seen:
            return
        self._seen.add(identity)
        self.rows.append({**row, "cpu_seconds": cpu, "prior_seconds": prior})
        kind, task = row.get("kind"), row.get("task")
        self._same_work.setdefault((kind, row.get("work_key")), []).append(cpu)
        if prior:
            for scope in ((kind, task), (kind, None), (None, None)):
                self._ratios.setdefault(scope, []).append(cpu / prior)
                self._medians.pop(scope, None)

    @classmethod
    def read(cls, paths: list[Path]) -> CostBook:
        """The rows of every table in ``paths`` that exists (unreadable lines are skipped)."""
        rows: list[dict[str, Any]] = []
        for path in paths:
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            rows.extend(csv.DictReader(io.StringIO(text)))
        return cls(rows)

    def _median_ratio(self, scope: tuple[Any, Any]) -> float | None:
        if scope not in self._medians and self._ratios.get(scope):
            self._medians[scope] = statistics.median(self._ratios[scope])
        return self._medians.get(scope)

    def estimate(self, kind: str, task: str, work_key: str, prior: float) -> float:
        """Estimated CPU seconds of a job (see the module for the order of the sources)."""
        same_work = self._same_work.get((kind, work_key))
        if same_work:
            return statistics.fmean(same_work)
        for scope in ((kind, task), (kind, None), (None, None)):
            ratio = self._median_ratio(scope)
            if ratio is not None:
                return prior * ratio
        return prior


def cost_tables(out: Path) -> list[Path]:
    """The cost tables a benchmark in ``out`` reads and appends to: its own, the machine's."""
    from sao_online.util.cache import cache_root

    return [out / "results" / "costs.csv", cache_root() / MACHINE_TABLE]


def append_cost(path: Path, row: dict[str, Any]) -> None:
    """Append ``row`` to the table at ``path`` (its header first when the file is new), in one
    write, so benchmarks appending to the machine's table at once do not interleave lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    new = not path.exists() or path.stat().st_size == 0
    if new:
        writer.writeheader()
    writer.writerow({column: row.get(column, "") for column in COLUMNS})
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, buffer.getvalue().encode())
    finally:
        os.close(descriptor)


__all__ = [
    "RUN_SECONDS_PER_TOKEN",
    "RUN_SECONDS_PER_TOKEN_WEIGHT",
    "WARM_START_SECONDS_PER_TOKEN",
    "WARM_START_SECONDS_PER_TOKEN_WEIGHT",
    "CostBook",
    "append_cost",
    "cost_tables",
    "method_weight",
    "run_prior_seconds",
    "warm_start_prior_seconds",
]
