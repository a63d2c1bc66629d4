"""The uninterrupted run both stop-signal tests resume to, built once per session.

``sao-online compare`` and ``sao-online benchmark`` run one config to the same records: each
run's updates and episodes tables are equal, times aside. So the signal tests of both commands
(``tests/cli/test_compare_signals.py``, ``tests/benchmark/test_benchmark_signals.py``) compare
against one reference: a benchmark of ``sao``, ``grpo`` and the floor ``frozen`` on a short
StyleShift, run once by whichever test asks first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from built_once import built_once
from machine_time import without_machine_time
from tiny_model import model_section

#: The benchmark's one task; a comparison runs the same config as its experiment.
TASK = "Styles"
#: Columns that measure time, which two runs never share.


def config(episodes: int = 96) -> dict:
    """12 updates at 96 episodes, a checkpoint every 2: a run signalled early stops between them."""
    return {
        "model": model_section(),
        "rollout": {
            "batch_size": 8,
            "num_slots": 8,
            "max_turns": 1,
            "max_action_tokens": 8,
            "max_episode_tokens": 96,
        },
        "runtime": {"backend": "sync"},
        "budget": {"episodes": episodes},
        "logging": {"checkpoint_every": 2, "flush_every": 8, "transcripts_every": 0},
        "schedule": {
            "parameters": {
                "preferred": {"kind": "abrupt", "values": ["cute", "chuunibyou"], "at": [0, 48]}
            }
        },
    }


def environment(folder: Path) -> dict[str, str]:
    """The commands' environment: one thread, a warm-start cache of their own."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "SAO_ONLINE_CACHE": str(folder / "cache")}


def sao_online() -> str:
    return str(Path(sys.executable).parent / "sao-online")


def write_suite(folder: Path) -> Path:
    """A suite of the one task at the config above, its smoke tier one seed."""
    suite = folder / "suite.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "suite": "signals",
                "methods": ["sao", "grpo"],
                "tasks": {TASK: {"config": config()}},
                "tiers": {"smoke": {"seeds": 1}},
            }
        )
    )
    return suite


def benchmark_command(suite: Path, out: Path) -> list[str]:
    options = ["--suite", str(suite), "--out", str(out), "--parallel", "2", "--reps", "50"]
    return [sao_online(), "benchmark", *options]


def benchmark_run(out: Path, method: str) -> Path:
    """The run folder of ``method``'s seed 0 in a benchmark's output folder."""
    return out / "runs" / TASK / method / "seed-0"


def run_table(run: Path, name: str) -> pd.DataFrame:
    """A run's ``updates`` or ``episodes`` table, its time columns left out, in order."""
    folder = run / f"{name}.parquet"
    frame = pd.concat(pd.read_parquet(part) for part in sorted(folder.glob("part-*.parquet")))
    frame = without_machine_time(frame)
    key = "version" if name == "updates" else "episode"
    return frame.sort_values(key).reset_index(drop=True)


def reference(tmp_path_factory) -> Path:
    """The uninterrupted benchmark's output folder, built once per session."""

    def run(folder: Path) -> None:
        subprocess.run(
            benchmark_command(write_suite(folder), folder / "bench"),
            env=environment(folder),
            check=True,
            capture_output=True,
            timeout=900,
        )

    return built_once(tmp_path_factory, "signals-reference", run) / "bench"
