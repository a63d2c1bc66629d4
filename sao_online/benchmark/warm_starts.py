"""One warm start per task and warm-start seed wherever a benchmark's runs run.

A warm start is fitted on the machine that first needs it, and two machines fit the same config
to different weights (their floating point differs). A task's floor is the mean of its
``frozen`` runs from the same warm start, so every run of a task and warm-start seed must start
from the same weights: the runs record the weights id they started from, the scorecard refuses
a (task, warm-start seed) with two, and a suite's warm starts can be exported to a folder (one
sub-folder per task, and one per warm-start seed in it when the tier declares several:
``<task>/seed-<k>``) that another machine's benchmark starts from (``--warm-starts``).

A tier may declare several warm-start seeds (``warm_start_seeds``): the warm start is then a
random factor of the benchmark, as the run seed is, and each run seed starts from one of them
(:meth:`~sao_online.benchmark.suite.TierPlan.warm_start_seed`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.benchmark.suite import TierPlan
from sao_online.config import ConfigError

#: (task, warm-start seed): one warm start of a tier.
Unit = tuple[str, int]


def warm_start_overrides(warm_start_seed: int | None) -> list[str]:
    """The overrides that make a run start from the warm start of ``warm_start_seed`` (none:
    the config's own)."""
    return [] if warm_start_seed is None else [f"model.warm_start_seed={warm_start_seed}"]


def tier_warm_starts(plan: TierPlan) -> list[list[str]]:
    """The overrides of each warm-start seed the tier declares (one empty list: the configs')."""
    return [warm_start_overrides(seed) for seed in plan.warm_start_seeds] or [[]]


def _units(plan: TierPlan, overrides: list[str]) -> dict[Unit, tuple[Any, str]]:
    """Every (task, warm-start seed) of ``plan`` whose config uses a warm start: its config and
    its sub-folder in an exported folder."""
    units = {}
    for warm in tier_warm_starts(plan):
        for task in plan.tasks:
            config = task.load([*overrides, *warm])
            if not config.model.warm_start:
                continue
            seed = config.model.warm_start_seed
            folder = f"{task.name}/seed-{seed}" if plan.warm_start_seeds else task.name
            units[task.name, seed] = (config, folder)
    return units


def export_tier_warm_starts(
    plan: TierPlan, out: str | Path, overrides: list[str] | None = None
) -> dict[str, str]:
    """Fit (or reuse) the warm start of every task (and warm-start seed) of ``plan`` that uses
    one and export each to ``out/<task>`` (``out/<task>/seed-<k>`` when the tier declares
    warm-start seeds); return sub-folder -> weights id. Tasks that share a warm start get a copy
    each."""
    import torch

    from sao_online.learning.warm_start import export_warm_start, warm_start_weights

    torch.set_num_threads(1)  # as the benchmark fits them: the same weights on this machine
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"--export: {out} is not empty; name a new folder")
    exported = {}
    for config, folder in _units(plan, list(overrides or [])).values():
        exported[folder] = warm_start_weights(export_warm_start(config, out / folder))
    return exported


def shared_warm_starts(
    plan: TierPlan, folder: str | Path, overrides: list[str] | None = None
) -> tuple[dict[Unit, Path], list[str]]:
    """The exported warm starts in ``folder`` for the tasks (and warm-start seeds) of ``plan``,
    and the names of the sub-folders that are no task of it (a suite narrowed to some tasks
    leaves the others; a misspelt task shows here). A folder that holds none of the tier's
    tasks is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"--warm-starts: {folder} is not a folder")
    tasks = {task.name for task in plan.tasks}
    found = {path.name for path in sorted(folder.iterdir()) if path.is_dir()}
    if not found & tasks:
        raise ConfigError(
            f"--warm-starts: {folder} holds no warm start of this tier's tasks "
            f"({', '.join(sorted(tasks))}); it holds: {', '.join(sorted(found)) or 'nothing'}"
        )
    shared = {
        unit: folder / sub
        for unit, (_, sub) in _units(plan, list(overrides or [])).items()
        if (folder / sub).is_dir()
    }
    return shared, sorted(found - tasks)


def planned_warm_starts(
    plan: TierPlan, overrides: list[str], shared: dict[Unit, Path]
) -> dict[Unit, str | None]:
    """The weights id each (task, warm-start seed) will start from: its shared warm start when
    there is one, else the one cached here (None: not fitted yet)."""
    from sao_online.learning.warm_start import warm_start_path, warm_start_weights

    planned: dict[Unit, str | None] = {}
    for unit, (config, _) in _units(plan, overrides).items():
        if unit in shared:
            planned[unit] = warm_start_weights(shared[unit])
            continue
        path = warm_start_path(config)
        planned[unit] = warm_start_weights(path) if path.is_dir() else None
    return planned


def warm_start_unit(job: dict[str, Any], served: list | None = None) -> tuple[str, int | None]:
    """(task, warm-start seed) of a run job, or of one ``served`` pair of a warm-start job."""
    if served is not None:
        return served[0], served[1]
    return job["key"]["task"], job["key"].get("warm_start_seed")


def record_unit(record: dict[str, Any]) -> Unit:
    """The (task, warm-start seed) of a run's record (seed 0 for records kept before runs
    recorded it, when every run started from its config's, which was 0)."""
    key = record["key"]
    return key["task"], int(key.get("warm_start_seed") or 0)


def check_resumed_warm_starts(
    planned: dict[Unit, str | None], records: list[dict[str, Any]]
) -> None:
    """Refuse to continue a task whose finished runs (``records``) started from other weights
    than its next runs of the same warm-start seed would (a warm start fitted on another
    machine)."""
    used: dict[Unit, set[str]] = {}
    for record in records:
        if record.get("warm_start"):
            used.setdefault(record_unit(record), set()).add(record["warm_start"])
    for (task, seed), weights in planned.items():
        if (task, seed) in used and weights is not None and weights not in used[task, seed]:
            which = f" (warm-start seed {seed})" if any(s for _, s in planned) else ""
            raise ConfigError(
                f"--resume: task {task}'s finished runs{which} started from the warm start "
                f"{', '.join(sorted(used[task, seed]))}; its next runs would start from "
                f"{weights}. Export the warm starts where they ran (`sao-online benchmark "
                "warm-starts --export FOLDER` with the same suite and tier) and pass "
                "--warm-starts FOLDER"
            )


def import_warm_starts(
    plan: TierPlan, overrides: list[str], shared: dict[Unit, Path], say: Callable[[str], None]
) -> None:
    """Make each shared warm start the cached one of its task and warm-start seed (checked by
    ``import_warm_start``)."""
    from sao_online.learning.warm_start import import_warm_start
    from sao_online.util.cache import warm_start_weights

    for unit, (config, _) in _units(plan, overrides).items():
        if unit not in shared:
            continue
        task, seed = unit
        try:
            path = import_warm_start(config, shared[unit])
        except ConfigError as error:
            raise ConfigError(f"--warm-starts: task {task}: {error}") from None
        which = f" (warm-start seed {seed})" if plan.warm_start_seeds else ""
        say(f"{task}{which}: warm start {warm_start_weights(path)} from {shared[unit]}")


def exported_table(folder: str | Path) -> pd.DataFrame:
    """The warm starts exported to ``folder`` (``<task>`` or ``<task>/seed-<k>`` sub-folders),
    a row each: the task, its warm-start seed, what it was fitted on (SFT steps,
    demonstrations), what that cost (seconds, on which CPU), and its first and last loss. (The
    weights id is in each one's ``warm_start.json``.)"""
    folder = Path(folder)
    summaries = sorted(folder.glob("*/warm_start.json")) + sorted(
        folder.glob("*/seed-*/warm_start.json")
    )
    if not summaries:
        raise ConfigError(f"warm starts: {folder} holds no exported warm start")
    rows = []
    for path in summaries:
        summary = json.loads(path.read_text())
        nested = path.parent.name.startswith("seed-")
        machine = summary.get("fitted_on") or {}
        rows.append(
            {
                "task": path.parents[1].name if nested else path.parent.name,
                "warm-start seed": int(path.parent.name.split("-", 1)[1]) if nested else "",
                "SFT steps": summary["steps"],
                "demonstrations": summary["demonstrations"],
                "seconds": round(summary["seconds"]),
                "CPU": machine.get("cpu_model", ""),
                "first loss": round(summary["loss_first"], 3),
                "last loss": round(summary["loss_last"], 3),
            }
        )
    return pd.DataFrame(rows)
