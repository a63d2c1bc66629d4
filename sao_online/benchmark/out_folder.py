"""A benchmark's output folder: what a benchmark writes there (``--force`` replaces it), whether it
holds results, and the sessions recorded in ``results/benchmark.json``: one per command that ran
runs, written as it starts (so one killed with SIGKILL is listed too) and closed as it ends; a
session left open is marked ``killed`` by the next command, with the runs it had finished."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sao_online.benchmark.controls import read_controls
from sao_online.benchmark.results import write_json_atomically
from sao_online.benchmark.results_files import read_benchmark, read_records

#: What a benchmark writes in its folder: all of it is replaced by ``--force``.
OWN_ENTRIES = (
    "results",
    "runs",
    "figures",
    "scorecard.md",
    "scorecard.html",
    "scorecard.csv",
    "scorecard.json",
)
#: The advice a second writer of a folder in use gets.
IN_USE = "another benchmark, --resume or merge writes it; wait for it to end or stop it first"


def holds_results(folder: Path) -> bool:
    """Whether ``folder`` holds a benchmark's results or runs (or a merge's)."""
    return (
        (folder / "results" / "benchmark.json").exists()
        or (folder / "runs").exists()
        or (folder / "results" / "runs").exists()
    )


def remove_own_entries(folder: Path) -> None:
    """Remove what a benchmark wrote in ``folder`` (``--force``); anything else stays."""
    for name in OWN_ENTRIES:
        entry = folder / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        elif entry.exists() or entry.is_symlink():
            entry.unlink()


def close_stale_sessions(out: Path, say: Callable[[str], None]) -> None:
    """Mark the sessions a killed command left open (``ended: running``; this process holds the
    folder's lock, so their process is gone) as ``killed``, counting the results they wrote."""
    path = out / "results" / "benchmark.json"
    if not path.exists():
        return
    data = read_benchmark(path)
    stale = [s for s in data.get("sessions", []) if s.get("ended") == "running"]
    if not stale:
        return
    counts: dict[str, int] = {}
    for record in [*read_records(out), *read_controls(out)]:
        if record.get("session"):
            counts[record["session"]] = counts.get(record["session"], 0) + 1
    for session in stale:
        session["ended"] = "killed"
        session["runs"] = counts.get(session.get("id", ""), 0)
        say(
            f"the session started {session.get('started', '?')} (pid {session.get('pid', '?')}) "
            f"was killed: it had finished {session['runs']} run(s)"
        )
    write_json_atomically(path, data)


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
