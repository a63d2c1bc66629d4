"""Invariants of the asynchronous runtime that tie it to the synchronous one.

What the max_staleness-0 test proves: with one worker, max_staleness 0 and in-flight updates
off, the local backend admits exactly one batch per learner version, the worker samples it
with the published weights of that version from the same per-run sampling stream (worker 0 is
seeded with the run seed), all B episodes start together as in ``run_sync``, and so the logged
episodes and update metrics equal the synchronous run's (tolerance 1e-6; the two processes run
the same float32 kernels with one thread each).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tiny_model import tiny_overrides

from sao_online.config import load_config
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.launch import run_experiment

pytestmark = pytest.mark.e2e

TINY = tiny_overrides(
    "algorithm.critic_warmup_steps=0",
)


def read_table(run_dir: str | Path, table: str) -> pd.DataFrame:
    return RunLog(run_dir).read(table)


def comparable_columns(frame: pd.DataFrame) -> list[str]:
    """Numeric columns that do not measure time."""
    return [
        c
        for c in frame.columns
        if frame[c].dtype.kind in "fib"
        and "wall" not in c
        and c != "finished_time"  # when the episode finished, in the run's wall seconds
        and "seconds" not in c
        and "charts/ready" not in c
        and "charts/episodes_running" not in c
    ]


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_max_staleness_zero_reproduces_the_synchronous_run(tmp_path, backend):
    # With ray the run starts (and afterwards shuts down) its own private Ray instance.
    common = TINY + [
        "budget.episodes=24",
        "runtime.num_workers=1",
        "runtime.max_staleness=0",
        "runtime.in_flight_updates=false",
    ]
    run_experiment(
        load_config(None, common + ["runtime.backend=sync"]), tmp_path / "sync", threads=1
    )
    run_experiment(
        load_config(None, common + [f"runtime.backend={backend}"]), tmp_path / "local", threads=1
    )
    if backend == "ray":
        import ray

        assert not ray.is_initialized()
    for table in ("episodes", "updates"):
        sync, local = read_table(tmp_path / "sync", table), read_table(tmp_path / "local", table)
        assert len(sync) == len(local) > 0
        columns = comparable_columns(sync)
        assert "reward" in columns or "losses/total" in columns
        pd.testing.assert_frame_equal(
            sync[columns], local[columns], check_exact=False, atol=1e-6, rtol=0
        )
    episodes = read_table(tmp_path / "local", "episodes")
    assert (episodes["staleness"] == 0).all()
    assert episodes["policy_version"].tolist() == [v for v in range(3) for _ in range(8)]
