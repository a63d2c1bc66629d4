"""``sao-online compare`` under SIGINT, SIGTERM and SIGKILL: the signal reaches every run, no
process of the comparison outlives it, and ``--resume`` finishes the runs exactly as they run
uninterrupted (the reference, shared with the benchmark's signal test: ``tests/signal_runs.py``).

SIGTERM once killed ``compare`` alone: its runs and their process server kept training as
orphans, holding their run directories' locks. The process trees here are the real ones
(``compare`` -> its process server -> one process per run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import signal_runs
import yaml
from process_tree import descendants, kill_leftovers, running, runs_of
from signal_runs import benchmark_run, environment, run_table

pytestmark = pytest.mark.e2e

METHODS = ("sao", "grpo")


def write_config(folder: Path, episodes: int) -> Path:
    """The signal tests' config as an experiment of its own (the reference's task's config)."""
    config = folder / "compare.yaml"
    config.write_text(yaml.safe_dump({"experiment": "signals", **signal_runs.config(episodes)}))
    return config


def compare_command(config: Path, out: Path, *extra: str) -> list[str]:
    return [
        str(Path(sys.executable).parent / "sao-online"),
        "compare",
        str(config),
        "--methods",
        ",".join(METHODS),
        "--seeds",
        "1",
        "--parallel",
        "2",
        "--out",
        str(out),
        *extra,
    ]


def interrupt(config: Path, out: Path, signum: int, tree: dict[int, str]) -> tuple[int, str]:
    """Start a comparison, send ``signum`` once a run has a checkpoint, wait for it to end.

    The first checkpoint, not every run's: the runs share the cores unevenly (SAO's critic makes
    its updates dearer), so waiting for the slowest let the fastest finish its whole budget
    first on a loaded machine, and nothing was left to interrupt.

    ``tree`` gets the processes it had when signalled. Returns (exit code, stderr)."""
    stderr = out.parent / f"stderr-{signum}.txt"
    with open(stderr, "w") as sink:
        process = subprocess.Popen(
            compare_command(config, out),
            env=environment(out.parent),
            stdout=subprocess.DEVNULL,
            stderr=sink,  # a file: children that outlive compare cannot hold the wait up
            start_new_session=True,  # the test's own process group never sees the signal
        )
    latest = [out / "signals" / method / "seed-0" / "checkpoints" / "latest" for method in METHODS]
    try:
        while not any(path.exists() for path in latest):
            assert process.poll() is None, stderr.read_text()
            time.sleep(0.05)
        tree.update(descendants(process.pid))
        process.send_signal(signum)
        process.wait(timeout=600)  # a hang guard, not a speed bound
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode, stderr.read_text()


@pytest.fixture
def leftovers():
    """Processes a failing test found still running: killed afterwards, whatever the outcome."""
    found: dict[int, str] = {}
    yield found
    kill_leftovers(found)


def table(out: Path, method: str, name: str) -> pd.DataFrame:
    return run_table(out / "signals" / method / "seed-0", name)


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> Path:
    """The benchmark both signal tests resume to: ``compare`` runs its sao and grpo runs alike."""
    return signal_runs.reference(tmp_path_factory)


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [
        (signal.SIGTERM, 128 + signal.SIGTERM, "sao-online compare: stopped by SIGTERM"),
        (signal.SIGINT, 128 + signal.SIGINT, "sao-online compare: interrupted"),
    ],
)
def test_a_stop_signal_reaches_every_run_and_resume_is_exact(
    tmp_path, reference, leftovers, signum, code, said
):
    config = write_config(tmp_path, episodes=96)
    out = tmp_path / "runs"
    tree = leftovers
    returncode, stderr = interrupt(config, out, signum, tree)
    assert returncode == code, stderr
    assert said in stderr
    # compare waited for its runs and stopped its process server before it exited...
    assert len(runs_of(tree)) >= 2, tree
    assert running(runs_of(tree)) == [], {pid: tree[pid] for pid in running(tree)}
    # ...and multiprocessing's resource tracker leaves once it sees compare gone.
    for _ in range(200):
        if not running(tree):
            break
        time.sleep(0.05)
    assert running(tree) == [], {pid: tree[pid] for pid in running(tree)}
    for method in METHODS:  # stopped mid-run (a run signalled early may have no update yet)
        parts = (out / "signals" / method / "seed-0" / "updates.parquet").glob("part-*.parquet")
        assert sum(len(pd.read_parquet(part)) for part in parts) < 12
    subprocess.run(
        compare_command(config, out, "--resume"),
        env=environment(tmp_path),
        check=True,
        capture_output=True,
        timeout=900,
    )
    for method in METHODS:
        for name in ("updates", "episodes"):
            expected = run_table(benchmark_run(reference, method), name)
            pd.testing.assert_frame_equal(table(out, method, name), expected)


def test_a_killed_compare_takes_its_runs_with_it(tmp_path, leftovers):
    """SIGKILL cannot be passed on: each run sees its parent gone and ends itself."""
    config = write_config(tmp_path, episodes=100_000)  # far more than the time the test waits
    out = tmp_path / "runs"
    tree = leftovers
    returncode, _ = interrupt(config, out, signal.SIGKILL, tree)
    assert returncode == -signal.SIGKILL
    assert len(runs_of(tree)) >= 2, tree
    for _ in range(600):  # the runs would go on for many minutes if nothing ended them
        if not running(tree):
            break
        time.sleep(0.05)
    assert running(tree) == [], {pid: tree[pid] for pid in running(tree)}
