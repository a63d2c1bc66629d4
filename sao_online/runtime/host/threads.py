"""How many torch threads a process should use: the cores it may run on, minus the busy ones.

Torch's default is one thread per core of the machine. For the small ops of the suite's models
that is only right on an idle machine: when another process holds one of the cores, every
parallel op waits for its descheduled thread (on two cores a run fell to 1/15 of its speed). So
a run looks before it starts:

- the cores it may use: ``os.sched_getaffinity`` (a ``taskset`` / cgroup cpuset restriction
  counts, ``os.cpu_count`` would not see it);
- how busy each of them is: ``/proc/stat`` sampled twice, a fraction of a second apart (this
  process is idle meanwhile, so what is measured is everyone else); a core busier than
  ``BUSY_SHARE`` is taken;

and uses one thread per free core (at least one). The knob is ``runtime.torch_threads``
(``--threads`` on the command line): ``auto`` (the default) measures, a number is used as
given, within reason: more threads than usable cores is warned about (they wait for each other),
and more than ``THREADS_PER_CORE_LIMIT`` per usable core is refused before the run starts (1,000
threads on 2 cores made 32 tiny episodes take 46 s instead of under one). Where ``/proc/stat``
cannot be read (not Linux) the load average stands in for it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

BUSY_SHARE = 0.5
"""A core whose time was more than this share busy while sampling counts as taken."""
SAMPLE_SECONDS = 0.1  # ten scheduler ticks per core at 100 Hz: enough for a busy/idle call
AUTO = "auto"
THREADS_PER_CORE_LIMIT = 4
"""More torch threads than this per usable core is refused: the extra threads only wait."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask; all of them where unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def thread_count_problem(setting: int | str | None, cores: int | None = None) -> tuple[str, str]:
    """(level, message) about a ``runtime.torch_threads`` setting on ``cores`` usable cores.

    ``("", "")`` when it is fine (``auto`` always is), ``("warning", ...)`` above the cores,
    ``("error", ...)`` above ``THREADS_PER_CORE_LIMIT`` per core.
    """
    if setting is None or setting == AUTO or isinstance(setting, bool):
        return "", ""
    if not isinstance(setting, int):
        return "", ""  # resolve_threads names the type
    cores = cores or usable_cores()
    if setting > THREADS_PER_CORE_LIMIT * cores:
        return "error", (
            f"runtime.torch_threads: {setting} threads on {cores} usable core(s) only wait for "
            f"each other; use at most {cores} (or auto)"
        )
    if setting > cores:
        return "warning", (
            f"runtime.torch_threads={setting} is more than the {cores} core(s) this process may "
            f"use; the threads will wait for each other (auto picks the free cores)"
        )
    return "", ""


@dataclass(frozen=True)
class CoreCensus:
    """The cores this process may use and how busy each was while sampled.

    Attributes:
        usable: the cores in the process's affinity mask.
        busy_share: per usable core, the share of the sampling interval it was busy (None
            when per-core times could not be read).
        load_average: the 1-minute load average (what stands in when ``busy_share`` is None).
    """

    usable: tuple[int, ...]
    busy_share: dict[int, float] | None
    load_average: float

    @property
    def busy(self) -> int:
        """Usable cores taken by other work."""
        if self.busy_share is not None:
            return sum(share > BUSY_SHARE for share in self.busy_share.values())
        return min(len(self.usable), int(self.load_average + 0.5))

    @property
    def free(self) -> int:
        return max(1, len(self.usable) - self.busy)


def cpu_times(path: str = "/proc/stat") -> dict[int, tuple[int, int]]:
    """Per core, (busy, total) jiffies since boot."""
    times: dict[int, tuple[int, int]] = {}
    with open(path) as handle:
        for line in handle:
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            values = [int(value) for value in fields]
            # user nice system idle iowait irq softirq steal (guest time is inside user).
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            total = sum(values[:8])
            times[int(name[3:])] = (total - idle, total)
    return times


def busy_shares(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cores: tuple[int, ...]
) -> dict[int, float]:
    """Busy share of each core between two ``/proc/stat`` readings (0 for an unchanged core)."""
    shares = {}
    for core in cores:
        busy = after[core][0] - before[core][0]
        total = after[core][1] - before[core][1]
        shares[core] = busy / total if total > 0 else 0.0
    return shares


def census(sample_seconds: float = SAMPLE_SECONDS) -> CoreCensus:
    """Measure the cores this process may use and how busy they are."""
    usable = (
        tuple(sorted(os.sched_getaffinity(0)))
        if hasattr(os, "sched_getaffinity")
        else tuple(range(os.cpu_count() or 1))
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    try:
        before = cpu_times()
        time.sleep(sample_seconds)
        shares = busy_shares(before, cpu_times(), usable)
    except (OSError, ValueError, KeyError, IndexError):
        shares = None
    return CoreCensus(usable, shares, load)


def resolve_threads(setting: int | str | None) -> int:
    """Torch threads for a ``runtime.torch_threads`` setting: a positive int, or ``auto``/None.

    Raises:
        ValueError: neither a positive int nor ``auto``.
    """
    if setting is None or setting == AUTO:
        return census().free
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ValueError(
            f"runtime.torch_threads: expected a positive integer or 'auto', got {setting!r}"
        )
    return setting
