"""A finished run, reduced to the small record the benchmark keeps: per phase, per shift, a
coarse reward curve, and where it came from.

These records (not the run directories) are the benchmark's data: the scorecard, ``merge`` and
the generated tables read only them, so a results folder a few hundred kilobytes large can be
kept in a repository and every figure and table rebuilt from it.

Per phase: the number of episodes, the mean reward and the mean oracle reward (the env's
expected oracle return under each episode's regime). Per shift k: the episodes (clock units)
after the shift until the run's smoothed reward first reaches ``half_oracle`` x the phase's
mean oracle reward (``recovery_metrics``' ``time_to_oracle_fraction``), right-censored at the
next shift or the end of the run. Dropped episodes (lost to a worker fault) are left out.
Per run, what it exercised (``sao_online.benchmark.exercised``: staleness, tokens masked,
clipped or truncated); with a time window, each shift on the seconds axis too
(``sao_online.benchmark.time_scores``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sao_online.benchmark.exercised import EXERCISED_COLUMNS, exercised
from sao_online.benchmark.time_scores import TIME_SHIFT_COLUMNS, time_shift_rows
from sao_online.util.code_identity import code_id

#: The fraction of the oracle's reward whose first crossing after a shift is reported.
HALF_ORACLE = 0.5
#: Bins of the coarse reward curve kept per run (for the per-family recovery figure).
CURVE_BINS = 48

RUN_COLUMNS = [
    "task",
    "family",
    "method",
    "method_spec",
    "seed",
    "tier",
    "episodes",
    "dropped_episodes",
    "updates",
    "seconds",
    "action_tokens",
    "config_hash",
    "warm_start",
    "warm_start_seed",
    "code_id",
    "provenance_id",
    *EXERCISED_COLUMNS,
]
PHASE_COLUMNS = [
    "task",
    "method",
    "seed",
    "phase",
    "phase_name",
    "start",
    "end",
    "episodes",
    "reward_mean",
    "oracle_mean",
]
SHIFT_COLUMNS = [
    "task",
    "method",
    "seed",
    "shift",
    "tau",
    "phase_before",
    "phase_after",
    "time_to_half_oracle",
    "censored",
    "time_available",
    *TIME_SHIFT_COLUMNS,  # on the seconds axis, for a task with a time window (else empty)
]
CURVE_COLUMNS = ["task", "method", "seed", "start", "end", "episodes", "reward_mean"]


def _finite(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def summarize_run(run_dir: str | Path, time_window: float | None = None) -> dict[str, Any]:
    """The phases, shifts, curve and run totals of the finished run in ``run_dir``.

    ``time_window`` (seconds): measure each shift on the seconds axis too, with that window
    (:func:`~sao_online.benchmark.time_scores.time_shift_rows`).

    Returns:
        ``{"run": {...}, "phases": [...], "shifts": [...], "curve": [...]}``, the rows of the
        result tables without their task, method and seed columns.
    """
    from sao_online.analysis import load_runs, recovery_metrics
    from sao_online.analysis.loading import read_table
    from sao_online.rundir.layout import read_config_file

    run_dir = Path(run_dir)
    config = read_config_file(run_dir / "config.yaml")
    episodes = load_runs(run_dir)
    dropped = episodes["dropped"].fillna(False).astype(bool) if "dropped" in episodes else False
    usable = episodes[~dropped & np.isfinite(episodes["reward"].astype(float))]
    names = list(config.get("phase_names") or [])
    phases = []
    for phase, rows in usable.groupby("phase", sort=True):
        phase = int(phase)
        phases.append(
            {
                "phase": phase,
                "phase_name": names[phase] if phase < len(names) else f"phase {phase}",
                "start": float(rows["world_time"].min()),
                "end": float(rows["world_time"].max()),
                "episodes": len(rows),
                "reward_mean": float(rows["reward"].mean()),
                "oracle_mean": _finite(rows["oracle_reward"].mean()),
            }
        )
    shifts = []
    metrics = recovery_metrics(episodes, oracle_fraction=HALF_ORACLE)
    timed = {} if time_window is None else time_shift_rows(episodes, time_window, HALF_ORACLE)
    for row in metrics.itertuples(index=False):
        shifts.append(
            {
                "shift": int(row.change_point),
                "tau": float(row.tau_clock),
                "phase_before": str(row.phase_before),
                "phase_after": str(row.phase_after),
                "time_to_half_oracle": _finite(row.time_to_oracle_fraction),
                "censored": bool(row.oracle_fraction_censored),
                "time_available": _finite(row.time_available),
                **timed.get(int(row.change_point), {}),
            }
        )
    budget = float((config.get("budget") or {}).get("episodes") or 0)
    horizon = budget if config.get("clock", "episodes") == "episodes" and budget else None
    horizon = horizon or float(usable["world_time"].max() + 1 if len(usable) else 1)
    edges = np.linspace(0.0, horizon, CURVE_BINS + 1)
    bins = np.clip(
        np.searchsorted(edges, usable["world_time"].to_numpy(float), "right") - 1, 0, CURVE_BINS - 1
    )
    curve = []
    for index in range(CURVE_BINS):
        rewards = usable["reward"].to_numpy(float)[bins == index]
        if len(rewards):
            curve.append(
                {
                    "start": float(edges[index]),
                    "end": float(edges[index + 1]),
                    "episodes": len(rewards),
                    "reward_mean": float(rewards.mean()),
                }
            )
    updates = read_table(run_dir, "updates")
    last = updates.iloc[-1] if updates is not None and len(updates) else None
    run = {
        "episodes": len(usable),
        "dropped_episodes": int(np.sum(dropped)) if not isinstance(dropped, bool) else 0,
        "updates": int(last["version"]) if last is not None else 0,
        "seconds": _finite(last["wall_time"]) if last is not None else None,
        "action_tokens": _finite(last["charts/action_tokens_total"])
        if last is not None and "charts/action_tokens_total" in last
        else None,
        **exercised(episodes, updates),
    }
    return {"run": run, "phases": phases, "shifts": shifts, "curve": curve}


#: What to do after a benchmark's write failed on a full disk.
RESULTS_ADVICE = "the results written before are whole: free some space and continue with --resume"


def _write_atomically(path: Path, write: Callable[[Any], None]) -> None:
    """``write(file)`` into a temporary file beside ``path``, then renamed to it: a reader
    sees the old file or the new one, never a part; on a full disk ``DiskFullError`` names
    ``path``."""
    from sao_online.rundir.disk_full import reporting_a_full_disk

    with reporting_a_full_disk(path, advice=RESULTS_ADVICE):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as file:
                write(file)
            os.chmod(temporary, 0o644)  # mkstemp makes it private; results are for reading
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def write_json_atomically(path: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` so that a reader never sees half a file."""
    _write_atomically(
        path, lambda file: json.dump(value, file, indent=1, sort_keys=True, default=str)
    )


def write_table_atomically(frame: pd.DataFrame, path: Path) -> None:
    """Write a result table as CSV (formula-like text neutralised, as ``write_csv`` does) so
    that a reader never sees half a file."""
    from sao_online.analysis.report_render import spreadsheet_safe

    _write_atomically(path, lambda file: spreadsheet_safe(frame).to_csv(file, index=False))


def result_tables(results: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """The per-run records as the four tables kept in ``results/`` (runs, phases, shifts, curves).

    Each record is ``{"key": {task, family, method, method_spec, seed, tier}, "run": ...,
    "phases": ..., "shifts": ..., "curve": ..., "config_hash": ..., "provenance_id": ...}``.
    """
    runs, phases, shifts, curves = [], [], [], []
    for record in sorted(
        results, key=lambda r: (r["key"]["task"], r["key"]["method"], r["key"]["seed"])
    ):
        key = record["key"]
        ident = {"task": key["task"], "method": key["method"], "seed": key["seed"]}
        runs.append(
            {
                **key,
                **record["run"],
                "config_hash": record["config_hash"],
                # The weights id of the warm start it started from (None: none, or not recorded).
                "warm_start": record.get("warm_start"),
                "warm_start_seed": key.get("warm_start_seed"),
                # The code it ran (benchmark.json's ``code`` holds each id's identity).
                "code_id": code_id(record.get("code")),
                "provenance_id": record["provenance_id"],
            }
        )
        phases += [{**ident, **row} for row in record["phases"]]
        shifts += [{**ident, **row} for row in record["shifts"]]
        curves += [{**ident, **row} for row in record["curve"]]
    return {
        "runs": pd.DataFrame(runs, columns=RUN_COLUMNS),
        "phases": pd.DataFrame(phases, columns=PHASE_COLUMNS),
        "shifts": pd.DataFrame(shifts, columns=SHIFT_COLUMNS),
        "curves": pd.DataFrame(curves, columns=CURVE_COLUMNS),
    }
