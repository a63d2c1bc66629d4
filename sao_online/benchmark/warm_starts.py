"""One warm start per task wherever a benchmark's runs run.

A warm start is fitted on the machine that first needs it, and two machines fit the same config
to different weights (their floating point differs). A task's floor is the mean of its
``frozen`` runs, so every run of the task must start from the same weights: the runs record the
weights id they started from, the scorecard refuses a task with two, and a suite's warm starts
can be exported to a folder (one sub-folder per task) that another machine's benchmark starts
from (``--warm-starts``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sao_online.benchmark.suite import TierPlan
from sao_online.config import ConfigError


def export_tier_warm_starts(
    plan: TierPlan, out: str | Path, overrides: list[str] | None = None
) -> dict[str, str]:
    """Fit (or reuse) the warm start of every task of ``plan`` that uses one and export each to
    ``out/<task>``; return task -> weights id. Tasks that share a warm start get a copy each."""
    import torch

    from sao_online.pretrain import export_warm_start, warm_start_weights

    torch.set_num_threads(1)  # as the benchmark fits them: the same weights on this machine
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"--export: {out} is not empty; name a new folder")
    exported = {}
    for task in plan.tasks:
        config = task.load(overrides)
        if config.model.warm_start:
            exported[task.name] = warm_start_weights(export_warm_start(config, out / task.name))
    return exported


def shared_warm_starts(plan: TierPlan, folder: str | Path) -> tuple[dict[str, Path], list[str]]:
    """The exported warm starts in ``folder`` for the tasks of ``plan`` (sub-folders named as
    the tasks), and the names of the sub-folders that are no task of it (a suite narrowed to
    some tasks leaves the others; a misspelt task shows here). A folder that holds none of the
    tier's tasks is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"--warm-starts: {folder} is not a folder")
    tasks = {task.name for task in plan.tasks}
    found = {path.name: path for path in sorted(folder.iterdir()) if path.is_dir()}
    if not set(found) & tasks:
        raise ConfigError(
            f"--warm-starts: {folder} holds no warm start of this tier's tasks "
            f"({', '.join(sorted(tasks))}); it holds: {', '.join(found) or 'nothing'}"
        )
    shared = {name: path for name, path in found.items() if name in tasks}
    return shared, sorted(set(found) - tasks)


def planned_warm_starts(
    plan: TierPlan, overrides: list[str], shared: dict[str, Path]
) -> dict[str, str | None]:
    """The weights id each task's runs will start from: its shared warm start when there is
    one, else the one cached here (None: not fitted yet, or the task uses none)."""
    from sao_online.pretrain import warm_start_path, warm_start_weights

    planned: dict[str, str | None] = {}
    for task in plan.tasks:
        if task.name in shared:
            planned[task.name] = warm_start_weights(shared[task.name])
            continue
        config = task.load(overrides)
        path = warm_start_path(config) if config.model.warm_start else None
        planned[task.name] = warm_start_weights(path) if path and path.is_dir() else None
    return planned


def check_resumed_warm_starts(
    planned: dict[str, str | None], records: list[dict[str, Any]]
) -> None:
    """Refuse to continue a task whose finished runs (``records``) started from other weights
    than its next runs would (a warm start fitted on another machine)."""
    used: dict[str, set[str]] = {}
    for record in records:
        if record.get("warm_start"):
            used.setdefault(record["key"]["task"], set()).add(record["warm_start"])
    for task, weights in planned.items():
        if task in used and weights is not None and weights not in used[task]:
            raise ConfigError(
                f"--resume: task {task}'s finished runs started from the warm start "
                f"{', '.join(sorted(used[task]))}; its next runs would start from {weights}. "
                "Export the warm starts where they ran (`sao-online benchmark warm-starts "
                "--export FOLDER` with the same suite and tier) and pass --warm-starts FOLDER"
            )


def import_warm_starts(
    plan: TierPlan, overrides: list[str], shared: dict[str, Path], say: Callable[[str], None]
) -> None:
    """Make each task's shared warm start its cached one (checked by ``import_warm_start``)."""
    from sao_online.cache import warm_start_weights
    from sao_online.pretrain import import_warm_start

    for task in plan.tasks:
        if task.name not in shared:
            continue
        try:
            path = import_warm_start(task.load(overrides), shared[task.name])
        except ConfigError as error:
            raise ConfigError(f"--warm-starts: task {task.name}: {error}") from None
        say(f"{task.name}: warm start {warm_start_weights(path)} from {shared[task.name]}")
