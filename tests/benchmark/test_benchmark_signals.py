"""``sao-online benchmark`` under SIGTERM: the signal reaches every run, no process of the
benchmark outlives it, a run stopped midway leaves no result behind, and ``--resume`` finishes
the benchmark exactly as an uninterrupted one (the processes are the real ones: the command,
its process server, one process per run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import signal_runs
from process_tree import descendants, kill_leftovers, running, runs_of
from signal_runs import TASK, benchmark_command, benchmark_run, environment, run_table, write_suite

pytestmark = pytest.mark.e2e

METHODS = ("frozen", "sao", "grpo")  # frozen, the score's floor, always runs first


def result_file(out: Path, method: str) -> Path:
    return out / "results" / "runs" / TASK / method / "seed-0.json"


def result(out: Path, method: str) -> dict:
    """A run's result record without what differs between two runs of it (time, provenance,
    the session that ran it)."""
    record = json.loads(result_file(out, method).read_text())
    record["run"].pop("seconds")
    for key in ("provenance", "provenance_id", "session"):
        record.pop(key)
    return record


def table(out: Path, method: str, name: str) -> pd.DataFrame:
    return run_table(benchmark_run(out, method), name)


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> Path:
    return signal_runs.reference(tmp_path_factory)


@pytest.fixture
def leftovers():
    """Processes a failing test found still running: killed afterwards, whatever the outcome."""
    found: dict[int, str] = {}
    yield found
    kill_leftovers(found)


def test_sigterm_stops_every_run_leaves_no_process_and_resume_is_exact(
    tmp_path, reference, leftovers
):
    suite, out = write_suite(tmp_path), tmp_path / "bench"
    command = benchmark_command(suite, out)
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w") as sink:
        process = subprocess.Popen(
            command,
            env=environment(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=sink,  # a file: children that outlive the command cannot hold the wait up
            start_new_session=True,  # the test's own process group never sees the signal
        )
    # sao (started with frozen, two at a time) has checkpointed and is still running.
    midway = benchmark_run(out, "sao") / "checkpoints" / "latest"
    try:
        while not midway.exists():
            assert process.poll() is None, stderr.read_text()
            time.sleep(0.05)
        leftovers.update(descendants(process.pid))
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=600)  # a hang guard, not a speed bound
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    said = stderr.read_text()
    assert process.returncode == 128 + signal.SIGTERM, said
    assert "sao-online benchmark: stopped by SIGTERM" in said
    # The benchmark waited for its runs and stopped its process server before it exited...
    tree = leftovers
    assert len(runs_of(tree)) >= 2, tree
    assert running(runs_of(tree)) == [], {pid: tree[pid] for pid in running(tree)}
    for _ in range(200):  # ...and multiprocessing's resource tracker leaves once it sees it go
        if not running(tree):
            break
        time.sleep(0.05)
    assert running(tree) == [], {pid: tree[pid] for pid in running(tree)}
    # The run stopped midway has a checkpoint and no result: --resume continues it.
    assert not result_file(out, "sao").exists()
    assert len(table(out, "sao", "updates")) < 12

    resumed = subprocess.run(
        [*command, "--resume"],
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for method in METHODS:
        assert result(out, method) == result(reference, method), method
        for name in ("updates", "episodes"):
            pd.testing.assert_frame_equal(table(out, method, name), table(reference, method, name))
    runs = pd.read_csv(out / "results" / "runs.csv")
    assert sorted(runs["method"]) == sorted(METHODS)
    # Both commands are on record: the stopped one with the runs it finished, then the resumed.
    sessions = json.loads((out / "results" / "benchmark.json").read_text())["sessions"]
    assert [session["ended"] for session in sessions] == ["stopped", "finished"]
    assert sum(session["runs"] for session in sessions) == len(METHODS)
    assert sessions[0]["runs"] < len(METHODS) and sessions[0]["cpu_seconds"] > 0
