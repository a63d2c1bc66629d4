"""Tables in Markdown files generated from kept benchmark data (never typed by hand).

A block names its kind and its data, relative to the Markdown file::

    <!-- benchmark-table: leaderboard ../benchmarks/smoke/seed-set-1 -->
    | rank | method | ... |          (generated)
    <!-- /benchmark-table -->

Kinds: ``leaderboard DIR``, ``families DIR`` (per family beside the aggregate),
``replication DIR DIR...`` (which pairwise conclusions every folder reaches on its own),
``calibration DIR`` (per task: learnable, and does the shift cost; then per phase),
``versus DIR BASE OTHER,... [FAMILY,...]`` (one method against others, per family),
``seeds DIR`` (every pooled score, a column per seed),
``first-phase DIR... [tasks=A,B] [methods=M,N]`` (the learnable check's scores, a column per
seed, a row per folder), ``readaptation DIR`` (each method's re-adaptation score, from the
re-adaptation controls),
``sessions DIR...`` (how long each command that ran the folder's runs took, and where; with
several folders, a row per command of each, named by its path below their common folder),
``time-leaderboard DIR`` (the leaderboard on the time axis, for a tier with time windows),
``exercised DIR`` (per task and method: staleness, tokens masked, clipped or truncated),
``tuning DIR`` (for a suite ``benchmark tune`` wrote: each task's grid, and each method's chosen
point with its value on the tuning seeds and its sensitivity) and ``sweep DIR [AXIS]`` (a
sweep's folder: each method's IQM at each swept value, on ``episodes`` or the time axis,
``virtual_seconds``; default episodes), and ``warm-starts DIR`` (the warm starts exported to a
folder: what fitting each took and its losses).
``sao-online benchmark tables FILE.md...`` rewrites every block from its data; with ``--check``
it changes nothing and reports the files whose tables disagree with their data.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from sao_online.analysis.report_render import Table, to_markdown
from sao_online.benchmark import calibration
from sao_online.benchmark.merge import replication_table, results_folder
from sao_online.benchmark.readaptation import readaptation_table
from sao_online.benchmark.results_files import read_benchmark
from sao_online.benchmark.scorecard import compute, read_tables, run_cpus
from sao_online.benchmark.scorecard_tables import (
    family_table,
    first_phase_table,
    leaderboard,
    per_seed_table,
    session_table,
)
from sao_online.benchmark.scorecard_time import exercised_table
from sao_online.benchmark.sweep_scorecard import EPISODES_AXIS, across_values, sweep_results
from sao_online.benchmark.tuning_tables import tuning_blocks
from sao_online.benchmark.versus import versus_table
from sao_online.benchmark.warm_starts import exported_table
from sao_online.config import ConfigError

REPS = 2000
_BLOCK = re.compile(
    r"(<!-- benchmark-table: (?P<spec>[^>]*?) -->\n)(?P<body>.*?)(<!-- /benchmark-table -->)",
    re.S,
)
KINDS = (
    "leaderboard",
    "families",
    "replication",
    "calibration",
    "versus",
    "seeds",
    "first-phase",
    "readaptation",
    "sessions",
    "time-leaderboard",
    "exercised",
    "tuning",
    "sweep",
    "warm-starts",
)


class TableSpecError(ValueError):
    """A benchmark-table block whose kind or data folder is wrong (the file and block named)."""


def _versus(words: list[str], base: Path) -> str:
    if len(words) not in (3, 4):
        raise TableSpecError("versus: expected DIR BASE OTHER,... [FAMILY,...]")
    folder, method, others = words[:3]
    families = words[3].split(",") if len(words) == 4 else None
    tables, benchmark = read_tables(results_folder(base / folder))
    scores = compute(tables, benchmark, REPS)["scores"]
    frame = versus_table(scores, method, others.split(","), families=families, reps=REPS)
    return to_markdown([Table(frame)])


def _tuning(folder: str, benchmark: dict) -> str:
    protocol = benchmark["protocol"]
    labels = {method["spec"]: label for label, method in protocol["methods"].items()}
    blocks = tuning_blocks(protocol.get("tuning"), labels)
    if not blocks:
        raise TableSpecError(f"tuning: {folder} ran a suite `benchmark tune` did not write")
    return to_markdown([block for block in blocks if isinstance(block, Table)])


def _first_phase(words: list[str], base: Path) -> str:
    filters = {"tasks": None, "methods": None}
    folders = []
    for word in words:
        name, sep, values = word.partition("=")
        if sep and name in filters:
            filters[name] = values.split(",")
        elif sep:
            raise TableSpecError(f"first-phase: unknown filter {name!r} (tasks=, methods=)")
        else:
            folders.append(word)
    if not folders:
        raise TableSpecError("first-phase: expected DIR... [tasks=A,B] [methods=M,N]")
    sets = []
    for folder in folders:
        tables, benchmark = read_tables(results_folder(base / folder))
        scores = compute(tables, benchmark, REPS)["scores"]
        runs = tables["runs"].assign(cpu=run_cpus(tables["runs"], benchmark))
        machines = {
            key: ", ".join(sorted(set(part["cpu"])))
            for key, part in runs.groupby(["task", "method"])
        }
        label = folder.rstrip("/").split("/")[-1]
        sets.append((label, scores, benchmark["protocol"]["score"]["floor"], machines))
    frame = first_phase_table(sets, filters["tasks"], filters["methods"])
    if frame.empty:
        raise TableSpecError(f"first-phase: no scored first phase in {', '.join(folders)}")
    return to_markdown([Table(frame)])


def _sessions(folders: list[str], base: Path) -> str:
    """Every command that ran each folder's runs; with several folders, each row named by its
    folder's path below their common one (``tune/points/point-0``, ``seeds-0-5``)."""
    if not folders:
        raise TableSpecError("sessions: expected DIR...")
    frames = []
    for folder in folders:
        frame = session_table(read_benchmark(results_folder(base / folder) / "benchmark.json"))
        if frame.empty:
            raise TableSpecError(f"sessions: {folder} records no session")
        frames.append(frame)
    if len(folders) > 1:
        common = os.path.commonpath([Path(folder).as_posix() for folder in folders])
        frames = [
            frame.assign(folder=Path(folder).as_posix()[len(common) :].lstrip("/") or ".")
            for folder, frame in zip(folders, frames)
        ]
        frames = [frame[["folder", *frame.columns[:-1]]] for frame in frames]
    return to_markdown([Table(pd.concat(frames, ignore_index=True))])


def _sweep(words: list[str], base: Path) -> str:
    if len(words) not in (1, 2):
        raise TableSpecError("sweep: expected DIR [AXIS]")
    axis = EPISODES_AXIS if len(words) == 1 else words[1].replace("_", " ")
    data = sweep_results(base / words[0], REPS)
    frame = data["frame"]
    if axis not in set(frame["axis"]):
        axes = ", ".join(a.replace(" ", "_") for a in dict.fromkeys(frame["axis"])) or "none"
        raise TableSpecError(f"sweep: {words[0]} has no axis {axis!r} (axes: {axes})")
    values = [value for value in data["sweep"].values if value in data["results"]]
    return to_markdown([Table(across_values(frame, axis, values))])


def render_block(spec: str, base: Path) -> str:
    """The Markdown table for one block spec (``kind DIR...``), folders relative to ``base``."""
    kind, *folders = spec.split()
    if kind not in KINDS:
        raise TableSpecError(f"unknown table kind {kind!r}; kinds: {', '.join(KINDS)}")
    if kind == "versus":
        return _versus(folders, base)
    if kind == "first-phase":
        return _first_phase(folders, base)
    if kind == "sweep":
        return _sweep(folders, base)
    if kind == "sessions":
        return _sessions(folders, base)
    if kind == "warm-starts":
        if len(folders) != 1:
            raise TableSpecError("warm-starts: expected one folder")
        try:
            return to_markdown([Table(exported_table(base / folders[0]))])
        except ConfigError as error:
            raise TableSpecError(str(error)) from None
    if not folders or (kind != "replication" and len(folders) != 1):
        raise TableSpecError(
            f"{kind}: expected {'folders' if kind == 'replication' else 'one folder'}"
        )
    if kind == "tuning":  # the benchmark's record alone: no result table is read
        return _tuning(
            folders[0], read_benchmark(results_folder(base / folders[0]) / "benchmark.json")
        )
    loaded = [(folder, read_tables(results_folder(base / folder))) for folder in folders]
    if kind == "replication":
        if len(loaded) < 2:
            raise TableSpecError("replication: needs two folders or more")
        frame = replication_table(loaded, REPS)
    else:
        tables, benchmark = loaded[0][1]
        result = compute(tables, benchmark, REPS)
        if kind == "calibration":
            floor = benchmark["protocol"]["score"]["floor"]
            frames = calibration.tables(result, tables, floor)
            return to_markdown([Table(frame) for frame in frames])
        if kind == "seeds":
            return to_markdown([Table(per_seed_table(result["scores"], result["methods"]))])
        if kind == "readaptation":
            if result["readaptation"] is None:
                raise TableSpecError(f"readaptation: {folders[0]} ran no re-adaptation control")
            return to_markdown([Table(readaptation_table(result["readaptation"]))])
        if kind == "exercised":
            frame = exercised_table(tables["runs"], result["methods"])
            if frame.empty or tables["runs"]["staleness_mean"].isna().all():
                raise TableSpecError(f"exercised: {folders[0]} records none (kept before it was)")
            return to_markdown([Table(frame)])
        if kind == "time-leaderboard":
            if result["time"] is None or result["time"]["aggregates"] is None:
                raise TableSpecError(f"time-leaderboard: {folders[0]} has no timed task scored")
            return to_markdown([Table(leaderboard(result["time"]["aggregates"]))])
        frame = (
            leaderboard(result["aggregates"])
            if kind == "leaderboard"
            else family_table(result["aggregates"], result["methods"])
        )
    return to_markdown([Table(frame)])


def refresh(text: str, base: Path, source: str = "<text>") -> str:
    """``text`` with every benchmark-table block regenerated from its data."""

    def replace(match: re.Match) -> str:
        try:
            body = render_block(match.group("spec").strip(), base)
        except (TableSpecError, ValueError) as error:
            raise TableSpecError(
                f"{source}: benchmark-table {match.group('spec').strip()!r}: {error}"
            ) from None
        return match.group(1) + body + match.group(4)

    return _BLOCK.sub(replace, text)


def update_tables(files: list[str | Path], *, check: bool = False) -> list[str]:
    """Regenerate the blocks of ``files``; return the files whose tables were out of date.

    With ``check`` nothing is written.
    """
    stale = []
    for name in files:
        path = Path(name)
        if not path.is_file():
            raise FileNotFoundError(f"benchmark tables: no file {path}")
        text = path.read_text()
        if "<!-- benchmark-table:" not in text:
            raise TableSpecError(f"{path}: holds no benchmark-table block")
        new = refresh(text, path.parent, str(path))
        if new != text:
            stale.append(str(path))
            if not check:
                path.write_text(new)
    return stale
