"""Keeping a benchmark's result for ``docs/performance.md``: run it, watch the machine, write it.

A kept result is one JSON file under ``docs/performance/``: the ``command`` that produced it,
the ``provenance`` of the code and machine (commit, dirty tree, package versions, CPU), the
machine's load while it ran (``machine_load``, and ``load`` in words for the page), and the
command's whole JSON output under ``result``. :func:`keep_result` makes one:

- it refuses a tree with uncommitted changes (a kept result names the commit that produced it)
  and, unless told otherwise, a busy machine: a 1-minute load average of ``QUIET_LOAD`` or more
  before it starts;
- it runs the command as a child process, its stdout being the result, and meanwhile samples the
  load average and counts the CPU time the rest of the machine used: the machine's busy time
  (``/proc/stat``) less the benchmark's own (its process tree, from ``getrusage``). The load
  average counts the benchmark's own threads too; the other processes' share is what says
  whether the machine was quiet;
- a kept result it replaces moves to ``docs/performance/history/`` as ``NAME-1.json``,
  ``NAME-2.json``, ... in the order they were replaced (its own ``measured_at`` dates it), so
  nothing kept is lost; the appendix page renders what it names from there.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sao_online.rundir.provenance import provenance, source_state

QUIET_LOAD = 0.5
"""A machine whose 1-minute load average is this or more is busy: no result is kept from it."""
QUIET_SHARE = 0.05
"""Other processes using less than this share of the cores during a run: a quiet machine."""
SAMPLE_SECONDS = 2.0

#: The kept results this module can measure again: file name -> the command's arguments.
MEASURABLE = {
    "bench_throughput_trl": ["bench", "throughput", "--peer", "trl"],
    "bench_learner": ["bench", "learner"],
    "bench_rollout": ["bench", "rollout"],
    "bench_simulated": ["bench", "simulated"],
}


class KeepError(RuntimeError):
    """A result cannot be kept (a dirty tree, a busy machine, a failed command): one line."""


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (``/proc/stat``'s first line)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU seconds of this process and of every child it has waited for (and theirs)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class MachineWatch:
    """The load on the machine while a benchmark runs: the 1-minute load average, sampled, and
    the share of the cores that processes other than this one and its children used."""

    def __init__(self, sample_seconds: float = SAMPLE_SECONDS) -> None:
        self.sample_seconds = sample_seconds
        self.loads: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.sample_seconds):
            self.loads.append(os.getloadavg()[0])

    def __enter__(self) -> MachineWatch:
        self.load_before = os.getloadavg()[0]
        self.loads.append(self.load_before)
        self._busy, self._own, self._started = _busy_seconds(), _own_seconds(), time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.loads.append(os.getloadavg()[0])
        wall = time.monotonic() - self._started
        others = (_busy_seconds() - self._busy) - (_own_seconds() - self._own)
        self.cores = os.cpu_count() or 1
        # /proc/stat counts in clock ticks: over a short run its rounding can exceed the wall
        # time, so the share is bounded to what the cores can give
        self.others_share = min(1.0, max(0.0, others) / max(wall * self.cores, 1e-9))

    def summary(self) -> dict[str, Any]:
        return {
            "load_average_before": round(self.load_before, 2),
            "load_average": {"min": round(min(self.loads), 2), "max": round(max(self.loads), 2)},
            "others_cpu_share": round(self.others_share, 3),
            "cores": self.cores,
            "quiet": self.others_share < QUIET_SHARE and self.load_before < QUIET_LOAD,
        }


def load_in_words(load: dict[str, Any]) -> str:
    """The ``load`` line of a kept result, from its ``machine_load``.

    Example:
        >>> words = load_in_words({"load_average": {"min": 1.9, "max": 2.2},
        ...                        "others_cpu_share": 0.01, "cores": 2, "quiet": True})
        >>> for part in words.split(", "):
        ...     print(part)
        load average 1.9-2.2 over the run
        other processes using 1% of the 2 cores (a quiet machine)
    """
    state = "a quiet machine" if load["quiet"] else "other work running"
    return (
        f"load average {load['load_average']['min']:.1f}-{load['load_average']['max']:.1f} "
        f"over the run, other processes using {load['others_cpu_share']:.0%} of the "
        f"{load['cores']} cores ({state})"
    )


def sao_online_command() -> str:
    """The ``sao-online`` script of the Python running this (the one the package is installed
    in), so a kept result is measured with this checkout."""
    script = shutil.which("sao-online", path=str(Path(sys.executable).parent))
    if script is None:
        raise KeepError(f"no sao-online script beside {sys.executable}; run `make venv` first")
    return script


def keep_result(
    name: str,
    data: Path,
    *,
    busy_ok: bool = False,
    command: Sequence[str] | None = None,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> Path:
    """Run the benchmark of kept result ``name`` and keep its output in ``data/<name>.json``.

    Args:
        name: a key of :data:`MEASURABLE`.
        data: the folder of kept results (``docs/performance``).
        busy_ok: keep a result measured while the machine is busy (its load is kept with it).
        command: the command line to run instead of ``sao-online`` with ``MEASURABLE[name]``
            (tests run a stand-in); the kept ``command`` names the benchmark either way.
        run: how to run it (``subprocess.run``'s signature).

    Returns:
        The path of the kept result. A kept result it replaces is in ``data/history/``.

    Raises:
        KeepError: an unknown name, a dirty tree, a busy machine, or a command that failed or
            printed something other than one JSON object.
    """
    if name not in MEASURABLE:
        raise KeepError(
            f"performance page: cannot measure {name!r}; measurable: {sorted(MEASURABLE)}"
        )
    if source_state()["dirty"]:
        raise KeepError(
            "performance page: the tree has uncommitted changes; a kept result names the commit "
            "that produced it, so commit or stash them first"
        )
    load_now = os.getloadavg()[0]
    if load_now >= QUIET_LOAD and not busy_ok:
        raise KeepError(
            f"performance page: the machine is busy (1-minute load average {load_now:.2f}, "
            f">= {QUIET_LOAD}); measure on a quiet machine, or pass --busy-ok to keep a result "
            "measured under load (its load is kept with it)"
        )
    arguments = MEASURABLE[name]
    line = list(command) if command is not None else [sao_online_command(), *arguments]
    with MachineWatch() as watch:
        finished = run(line, stdout=subprocess.PIPE, text=True, check=False)
    if finished.returncode != 0:
        raise KeepError(f"performance page: `{' '.join(line)}` failed (exit {finished.returncode})")
    try:
        result = json.loads(finished.stdout)
    except json.JSONDecodeError as error:
        raise KeepError(
            f"performance page: `{' '.join(line)}` printed no JSON object ({error})"
        ) from error
    machine_load = watch.summary()
    kept = {
        "command": " ".join(["sao-online", *arguments]),
        "provenance": provenance(),
        "machine_load": machine_load,
        "load": load_in_words(machine_load),
        "result": result,
    }
    path = data / f"{name}.json"
    if path.exists():
        history = data / "history"
        history.mkdir(exist_ok=True)
        number = 1
        while (history / f"{name}-{number}.json").exists():
            number += 1
        path.replace(history / f"{name}-{number}.json")
    path.write_text(json.dumps(kept, indent=1) + "\n")
    return path
