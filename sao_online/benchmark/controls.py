"""Re-adaptation controls: for each shift, the same method started fresh in the new regime.

A post-shift score is high for a method that learns fast from any start. To separate "recovers
from having learned the old regime" from "learns fast", each run of a learning method gets, per
shift k at the clock reading tau_k, a control run: the same task, method, seed and warm start,
started from the warm start at tau_k (``budget.start``) with the budget the run has left, on the
prompts and regimes the run met from tau_k on. Its phase k covers the run's phase-k episodes
exactly, so re-adaptation = the run's phase-k score - the control's (``readaptation.py``).

``frozen`` gets no control: its policy at every shift is the warm start, so its control would be
the run itself.

The output folder gains::

    OUT/runs/<task>/<method>/seed-<k>/control-<shift>/       the control runs' directories
    OUT/results/controls/<task>/<method>/seed-<k>/shift-<shift>.json   each control's record
    OUT/results/controls.csv                                 one row per control and phase
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.benchmark.protocol import FLOOR_METHOD
from sao_online.benchmark.results_files import COLUMNS, read_record
from sao_online.config import ConfigError, ExperimentConfig

CONTROL_COLUMNS = list(COLUMNS["controls"])


def shift_starts(config: ExperimentConfig, group_size: int) -> list[int]:
    """The clock reading each shift of ``config``'s schedule happens at within its budget (shift
    k at index k - 1), as ``budget.start`` values.

    Raises:
        ConfigError: a schedule not on the episodes clock, or a shift inside a group (matched
            in episodes, a control must start where a group of ``group_size`` starts).
    """
    from sao_online.config.run_schedule import resolve_schedule

    schedule = resolve_schedule(config)
    if schedule.clock != "episodes":
        raise ConfigError(
            f"controls: need a schedule on the episodes clock, not {schedule.clock} (a control "
            "starts at the shift's clock reading)"
        )
    budget = config.budget.episodes
    starts = []
    for point in schedule.change_points(until=budget):
        start = math.ceil(point)
        if not 0 < start < budget:
            continue
        if config.budget.match == "episodes" and start % group_size:
            raise ConfigError(
                f"controls: the shift at {start} falls inside a group of {group_size}; move it "
                "to a multiple of the group size, or match budgets in prompts"
            )
        starts.append(start)
    return starts


def control_jobs(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One control job per run job of a learning method (``jobs`` as the runner plans them)
    and per shift of its schedule; each starts at the shift and spends the run's budget."""
    from sao_online.algorithms import build_method
    from sao_online.config import load_config
    from sao_online.runtime.scheduling.planner import run_episodes_of

    controls = []
    starts: dict[tuple[str, str], list[int]] = {}
    for job in jobs:
        key = job["key"]
        if key["method"] == FLOOR_METHOD:
            continue
        if (key["task"], key["method"]) not in starts:
            config = load_config(job["config"], job["overrides"])
            group_size = build_method(config).group_size
            try:
                starts[key["task"], key["method"]] = shift_starts(config, group_size)
            except ConfigError as error:
                raise ConfigError(f"task {key['task']}, {key['method']}: {error}") from None
        for shift, start in enumerate(starts[key["task"], key["method"]], start=1):
            overrides = [*job["overrides"], f"budget.start={start}"]
            controls.append(
                {
                    **job,
                    "name": f"{job['name']}/control-{shift}",
                    "overrides": overrides,
                    "out": str(Path(job["out"]) / f"control-{shift}"),
                    "key": {**key, "control": shift, "start": start},
                    "budget": run_episodes_of(load_config(job["config"], overrides)),
                    "variant": f"control-{shift}",
                }
            )
    return controls


def control_path(out: Path, key: dict[str, Any]) -> Path:
    """Where the record of the control ``key`` (a run's key with ``control``) is kept."""
    folder = out / "results" / "controls" / key["task"] / key["method"] / f"seed-{key['seed']}"
    return folder / f"shift-{key['control']}.json"


def read_controls(out: Path) -> list[dict[str, Any]]:
    """Every control record under ``out/results/controls``, each checked (a damaged or foreign
    file is a ``ResultsError`` naming it)."""
    folder = out / "results" / "controls"
    if not folder.is_dir():
        return []
    return [read_record(path) for path in sorted(folder.rglob("shift-*.json"))]


def control_table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """The control records as ``controls.csv``: one row per control and phase it reached."""
    rows = []
    for record in sorted(
        records,
        key=lambda r: (r["key"]["task"], r["key"]["method"], r["key"]["seed"], r["key"]["control"]),
    ):
        key = record["key"]
        for phase in record["phases"]:
            rows.append(
                {
                    "task": key["task"],
                    "method": key["method"],
                    "seed": key["seed"],
                    "shift": key["control"],
                    "start": key["start"],
                    **{name: phase[name] for name in CONTROL_COLUMNS[5:10]},
                    "warm_start": record.get("warm_start"),
                    "provenance_id": record["provenance_id"],
                }
            )
    return pd.DataFrame(rows, columns=CONTROL_COLUMNS)
