"""``sao-online bench contention``: how much speed a run keeps when another process holds a core.

Researchers run several experiments at once, so a run must not collapse when a core it was
counting on gets busy. This benchmark runs ``bench throughput``'s workload (GRPO, groups of 8,
64 completions per update, 32-token completions; sync backend) twice in one process:

- quiet: nothing else started by the benchmark;
- contended: a busy-loop process pinned to one of this process's cores (the highest-numbered
  one) runs for the whole measurement.

Both runs choose their torch threads the way every run does by default
(``runtime.torch_threads=auto``, see ``sao_online.runtime.host.threads``), so the contended run sees
the busy core and leaves it alone. ``kept_share`` is contended over quiet completions per
second; the target is at least 0.4. On a machine that other people load as well, "quiet" is
only as quiet as they leave it: both runs are reported with the threads they chose.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from sao_online.perf.throughput import WORKLOAD, measure

TARGET_KEPT_SHARE = 0.4
_BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"
_SETTLE_SECONDS = 0.5  # let the busy loop take its core before the run samples the cores


def _busy_core() -> int:
    return max(os.sched_getaffinity(0))


def run_contention_benchmark(
    quick: bool = False, *, episodes: int | None = None, overrides: list[str] | None = None
) -> dict[str, Any]:
    """Measure the throughput workload quiet and with one core held by a busy loop.

    Args:
        quick: 128 episodes (2 updates) per side instead of 384.
        episodes: override the episode budget of each side.
        overrides: extra ``KEY=VALUE`` config overrides applied last (tests shrink the model).

    Returns:
        ``quiet`` and ``contended`` (each ``bench throughput``'s per-backend numbers, with the
        torch threads the run chose), ``kept_share`` (contended over quiet completions per
        second), ``target_kept_share``, ``busy_core`` and the workload.
    """
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError("bench contention needs os.sched_setaffinity (Linux)")
    budget = episodes if episodes is not None else (128 if quick else 384)
    config_overrides = (
        WORKLOAD
        + [f"budget.episodes={budget}", "runtime.backend=sync", "runtime.torch_threads=auto"]
        + list(overrides or [])
    )
    threads_before = torch.get_num_threads()
    core = _busy_core()
    try:
        with tempfile.TemporaryDirectory(prefix="sao-bench-contention-") as folder:
            quiet = measure(config_overrides, Path(folder) / "quiet", threads=None)
            busy = subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(core)])
            try:
                time.sleep(_SETTLE_SECONDS)
                contended = measure(config_overrides, Path(folder) / "contended", threads=None)
            finally:
                busy.kill()
                busy.wait()
    finally:
        torch.set_num_threads(threads_before)
    kept = contended["completions_per_second"] / max(quiet["completions_per_second"], 1e-9)
    return {
        "workload": {
            "method": "grpo",
            "group_size": 8,
            "completions_per_update": 64,
            "max_completion_tokens": 32,
            "episodes": budget,
            "backend": "sync",
            "torch_threads": "auto",
            "usable_cores": len(os.sched_getaffinity(0)),
            "overrides": list(overrides or []),
        },
        "busy_core": core,
        "quiet": quiet,
        "contended": contended,
        "kept_share": round(kept, 3),
        "target_kept_share": TARGET_KEPT_SHARE,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
