"""A benchmark session's core use counts the CPU time of every process it started: the jobs,
forked by the process server, and the programs they wait for (as a run waits for its sandbox's),
measured by real processes burning known CPU time (no wall-clock bound anywhere)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from tqdm import tqdm

from sao_online.benchmark.local_runner import CoreUse
from sao_online.jobs.pool import InOrder, process_cpu_seconds, run_scheduled

GRANDCHILD_CPU = 0.3
OWN_CPU = 0.2
BURN = "import time\nwhile time.process_time() < {seconds}:\n    sum(i * i for i in range(1000))\n"


def _burn(job: dict, progress) -> dict:
    """A job: a program it waits for burns GRANDCHILD_CPU seconds, then it burns OWN_CPU more."""
    subprocess.run([sys.executable, "-c", BURN.format(seconds=GRANDCHILD_CPU)], check=True)
    start = time.process_time()  # this process alone, not its children
    while time.process_time() < start + OWN_CPU:
        sum(i * i for i in range(1000))
    return {"result": job["name"], "cpu_seconds": process_cpu_seconds()}


@pytest.mark.e2e
def test_the_session_counts_the_cpu_time_of_the_jobs_and_of_what_they_waited_for():
    jobs = [{"name": f"job-{k}"} for k in range(3)]
    measured: dict[str, float] = {}
    before = CoreUse.now()
    failures = run_scheduled(
        InOrder(jobs, parallel=2),
        bar=tqdm(disable=True),
        target=_burn,
        on_result=lambda name, outcome: measured.update({name: outcome["cpu_seconds"]}),
    )
    use = CoreUse.now().since(before)
    assert failures == []
    # Each job measured itself with the program it waited for (which burned outside it).
    assert sorted(measured) == ["job-0", "job-1", "job-2"]
    assert all(seconds >= GRANDCHILD_CPU + OWN_CPU for seconds in measured.values())
    # The session's count holds every job's: they were forked by the process server, which
    # the loop stopped and waited for at its end, so their time reached this process.
    assert use["cpu_seconds"] >= sum(measured.values()) - 0.1  # the snapshot rounds to 0.1 s
    assert use["cores"] >= 1 and use["seconds"] > 0
    # Not <= 1: a child's CPU time is counted when it is reaped, including what it burned
    # before the window opened (the process server's start-up), which a 2 s window can show.
    assert use["core_share"] > 0
    assert use["other_share"] is None or 0 <= use["other_share"] <= 1


def test_core_use_between_two_snapshots_is_computed_by_hand():
    earlier = CoreUse(wall=100.0, cpu=10.0, machine_busy=1000.0, cores=(0, 1))
    later = CoreUse(wall=110.0, cpu=25.0, machine_busy=1018.0, cores=(0, 1))
    # 15 CPU s over 2 cores x 10 s; the cores were busy 18 s, 3 of them others'.
    assert later.since(earlier) == {
        "seconds": 10.0,
        "cores": 2,
        "cpu_seconds": 15.0,
        "core_share": 0.75,
        "other_share": 0.15,
    }
    unknown = CoreUse(wall=110.0, cpu=25.0, machine_busy=None, cores=(0, 1))
    assert unknown.since(earlier)["other_share"] is None
