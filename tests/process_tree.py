"""The processes a command leaves: its descendants, read from /proc, and which still run.

Shared by the tests that stop ``compare`` and ``benchmark`` with signals."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path


def descendants(pid: int) -> dict[int, str]:
    """Every live descendant of ``pid``: pid -> command line."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return {child: command_line(child) for child in found}


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def running(pids: Iterable[int]) -> list[int]:
    """The pids that are still processes (not gone, not zombies waiting to be reaped)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def kill_leftovers(found: dict[int, str]) -> None:
    """SIGKILL the processes of ``found`` (pid -> command line) that still run as themselves."""
    for pid in running(found):
        if command_line(pid) == found[pid]:  # still the same process
            os.kill(pid, signal.SIGKILL)


def runs_of(tree: dict[int, str]) -> list[int]:
    """The run processes of a command: children of its process server."""
    return [pid for pid, line in tree.items() if "forkserver" in line]
