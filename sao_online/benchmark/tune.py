"""``sao-online benchmark tune``: every method tuned alike, by a rule declared before the runs.

For each method (built-in or ``MODULE:FACTORY``) and task of a suite's tier, every point of the
same grid runs on tuning seeds disjoint from the evaluation seeds; the rule (``tuning_plan``)
picks each method's point per task mechanically, and the chosen settings are written as a suite
file that ``sao-online benchmark --suite OUT/suite.yaml`` runs as it is. The output folder::

    OUT/tuning.json                  the plan, recorded before any run: grid, seeds, rule, methods
    OUT/points/point-<i>/            grid point i as a benchmark (suite.yaml, results, scorecard)
    OUT/results/tuning.csv           every (task, method, point, seed) value the rule judged
    OUT/suite.yaml                   the tuned suite: each method's chosen point per task
    OUT/tuning.md, OUT/tuning.html   grid, chosen point and sensitivity per method and task

Each point is an ordinary benchmark, so ``--resume`` continues a tune as it continues a
benchmark, and ``frozen`` (the floor) runs at each point: the grid sets only how a method learns,
so its floor runs alike everywhere.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from sao_online.benchmark.clean_tree import check_clean_tree
from sao_online.benchmark.protocol import FLOOR_METHOD, differences, method_labels
from sao_online.benchmark.results import write_json_atomically
from sao_online.benchmark.runner import run_benchmark
from sao_online.benchmark.scorecard import read_tables
from sao_online.benchmark.scores import normalized_scores
from sao_online.benchmark.suite import TierPlan, plan_tier, read_suite
from sao_online.benchmark.tuning_plan import (
    TuningPlan,
    parse_grid,
    parse_seed_ranges,
    point_label,
    point_overrides,
    tuning_plan,
)
from sao_online.benchmark.tuning_tables import choose, write_tuning_report
from sao_online.config import ConfigError


def _say(message: str) -> None:
    print(f"tune: {message}", file=sys.stderr, flush=True)


def _keep_tasks(data: dict[str, Any], tasks: list[str], known: set[str]) -> None:
    """Drop from the suite ``data`` every task not in ``tasks``: from its tasks and from each
    tier's task settings and tuning grids."""
    unknown = [name for name in tasks if name not in known]
    if unknown or not tasks:
        raise ConfigError(
            f"tasks: {', '.join(unknown) or 'none given'}: not a task of the suite (its tasks: "
            f"{', '.join(sorted(known))})"
        )

    def kept(mapping: Any) -> Any:
        if not isinstance(mapping, dict):
            return mapping
        return {name: value for name, value in mapping.items() if name in tasks}

    data["tasks"] = kept(data.get("tasks"))
    for tier in (data.get("tiers") or {}).values():
        if not isinstance(tier, dict):
            continue
        if "tasks" in tier:
            tier["tasks"] = kept(tier["tasks"])
        if isinstance(tier.get("tuning"), dict) and "tasks" in tier["tuning"]:
            tier["tuning"]["tasks"] = kept(tier["tuning"]["tasks"])


def _relocated(value: str, source: Path, target: Path) -> str:
    """A file path written relative to the suite at ``source``, relative to ``target``'s folder
    instead (a bundled config's name, or a path to no file, as it is)."""
    path = Path(value)
    beside = path if path.is_absolute() else source.parent / path
    if not beside.is_file():
        return value
    return os.path.relpath(beside.resolve(), target.parent.resolve())


def _relocate_sets(node: Any, source: Path, target: Path) -> None:
    """Rewrite the ``schedule`` files of every ``set`` mapping under ``node`` for ``target``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "set" and isinstance(value, dict) and isinstance(value.get("schedule"), str):
                value["schedule"] = _relocated(value["schedule"], source, target)
            _relocate_sets(value, source, target)


def write_suite(
    plan: TierPlan,
    target: Path,
    tier_edit: dict[str, Any],
    drop: tuple[str, ...] = (),
    only: list[str] | None = None,
) -> Path:
    """Write to ``target`` the suite ``plan`` came from, its file paths rewritten for the new
    place, without the tier's keys ``drop`` (``methods``: every task's own method settings),
    and with ``tier_edit`` merged into the tier (a ``tasks`` mapping merged task by task).
    ``only``: these of the suite's tasks alone (a pilot on some families), everywhere the suite
    names tasks.

    Raises:
        ConfigError: a name in ``only`` that is not a task of the plan.
    """
    data, source = read_suite(plan.source)
    data = json.loads(json.dumps(data))  # a deep copy of plain data
    for task in (data.get("tasks") or {}).values():
        if isinstance(task, dict) and isinstance(task.get("config"), str):
            task["config"] = _relocated(task["config"], source, target)
    _relocate_sets(data, source, target)
    tier = data.setdefault("tiers", {}).setdefault(plan.tier, {}) or {}
    data["tiers"][plan.tier] = tier
    for key in drop:
        tier.pop(key, None)
    if "methods" in drop:  # a suite tuned before: the grid, not its choices, sets the methods
        for entry in (tier.get("tasks") or {}).values():
            if isinstance(entry, dict):
                entry.pop("methods", None)
    for key, value in tier_edit.items():
        if key != "tasks":
            tier[key] = value
            continue
        tasks = tier.setdefault("tasks", {}) or {}
        tier["tasks"] = tasks
        for name, edit in value.items():
            entry = tasks.setdefault(name, {}) or {}
            tasks[name] = entry
            if edit.get("set"):
                entry.setdefault("set", {}).update(edit["set"])
            if "methods" in edit:
                entry["methods"] = edit["methods"]
    if only is not None:
        _keep_tasks(data, only, {task.name for task in plan.tasks})
    target.parent.mkdir(parents=True, exist_ok=True)
    plain = json.loads(json.dumps(data))  # values shared between tasks, written out each time
    target.write_text(
        f"# Written by `sao-online benchmark tune` from {source.name}.\n"
        + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, width=100)
    )
    return target


def _point_edit(tuning: TuningPlan, plan: TierPlan, index: int) -> dict[str, Any]:
    return {"tasks": {t.name: {"set": tuning.points(t.name)[index]} for t in plan.tasks}}


def run_tune(
    *,
    out: str | Path,
    suite: str | Path = "core",
    tier: str = "smoke",
    methods: list[str] | None = None,
    grid: list[str] | None = None,
    rule: str | None = None,
    seeds: int | None = None,
    first_seed: int | None = None,
    eval_seeds: str | None = None,
    overrides: list[str] | None = None,
    resume: bool = False,
    backend: str = "local",
    address: str | None = None,
    parallel: int | None = None,
    progress: bool = True,
    reps: int = 2000,
    warm_starts: str | Path | None = None,
    allow_dirty: bool = False,
) -> Path:
    """Tune every method of ``suite``'s tier on the same grid; write the tuned suite.

    Returns:
        The path of the tuned suite (``OUT/suite.yaml``).

    Raises:
        ConfigError: a bad grid, rule or seeds (tuning seeds among the evaluation seeds named),
            a grid point a task or method refuses, a folder that holds another tune (the
            difference named), or runs that failed.
    """
    out = Path(out)
    check_clean_tree(out, allow_dirty=allow_dirty)
    overrides = list(overrides or [])
    plan = plan_tier(suite, tier)
    tuning = tuning_plan(
        plan,
        grid=parse_grid(grid) if grid else None,
        rule=rule,
        seeds=seeds,
        first_seed=first_seed,
        eval_seeds=parse_seed_ranges(eval_seeds),
    )
    specs = [m.strip() for m in (methods or plan.methods) if m.strip()]
    if FLOOR_METHOD not in specs:
        specs = [FLOOR_METHOD, *specs]
    labels = method_labels(plan, specs, overrides)
    _check_points(plan, tuning, specs, overrides)
    record = {
        "suite": plan.suite,
        "tier": plan.tier,
        "methods": labels,
        "overrides": overrides,
        **tuning.record(),
    }
    recorded = out / "tuning.json"
    if recorded.exists() or (out / "points").exists():
        if not resume:
            raise ConfigError(f"--out: {out} holds a tune already; --resume continues it")
        if recorded.exists():
            saved = json.loads(recorded.read_text())
            found = differences(saved, record)
            if found:
                raise ConfigError(
                    f"--resume: {out} was tuned with another plan: " + "; ".join(found)
                )
    write_json_atomically(recorded, record)  # declared before any run
    count = len(tuning.points(plan.tasks[0].name))
    for index in range(count):
        folder = out / "points" / f"point-{index}"
        point_suite = write_suite(
            plan,
            folder / "suite.yaml",
            _point_edit(tuning, plan, index),
            drop=("controls", "tuning", "tuned", "methods"),
        )
        _say(f"point {index + 1} of {count}: " + _point_names(tuning, plan, index))
        run_benchmark(
            out=folder,
            suite=point_suite,
            tier=tier,
            methods=[spec for spec in specs if spec != FLOOR_METHOD],
            seeds=len(tuning.seeds),
            first_seed=tuning.seeds[0],
            overrides=overrides,
            resume=True,
            backend=backend,
            address=address,
            parallel=parallel,
            progress=progress,
            reps=min(reps, 500),
            warm_starts=warm_starts,
            allow_dirty=allow_dirty,
            controls=False,
        )
    values = rule_values(out, count, tuning.rule, labels)
    chosen = choose(values)
    write_tuning_report(out, plan, tuning, values, chosen)
    tuned = {
        "rule": tuning.rule,
        "seeds": list(tuning.seeds),
        "from": str(out),
        "grids": tuning.grids,
        "chosen": {
            task: {
                row.spec: {
                    "point": int(row.point),
                    "value": round(float(row.value), 4),
                    "sensitivity": round(float(row.sensitivity), 4),
                }
                for row in part.itertuples()
            }
            for task, part in chosen.groupby("task", sort=True)
        },
    }
    tasks = {
        task: {
            "methods": {
                row.spec: {"set": tuning.points(task)[int(row.point)]}
                for row in part.itertuples()
                if row.spec != FLOOR_METHOD
            }
        }
        for task, part in chosen.groupby("task", sort=True)
    }
    tuned_methods = [spec for spec in specs if spec != FLOOR_METHOD]
    edit = {"methods": tuned_methods, "tasks": tasks, "tuned": tuned}
    return write_suite(plan, out / "suite.yaml", edit, drop=("tuned",))


def rule_values(out: Path, count: int, rule: str, labels: dict[str, str]) -> pd.DataFrame:
    """Per (task, method, point, seed): the run's value under ``rule``, from the points'
    results (``out/points/point-<i>``); ``labels`` maps each method spec to its name."""
    specs = {label: spec for spec, label in labels.items()}
    frames = []
    for point in range(count):
        tables, benchmark = read_tables(out / "points" / f"point-{point}" / "results")
        settings = benchmark["protocol"]["score"]
        scores = normalized_scores(
            tables["phases"],
            tables["runs"],
            floor_method=settings["floor"],
            min_gap=settings["min_gap"],
        )
        if rule == "mean-post-shift-score":
            scores = scores[scores["phase"] >= 1]
        values = (
            scores.groupby(["task", "family", "method", "seed"], as_index=False)["score"]
            .mean()
            .rename(columns={"score": "value"})
        )
        frames.append(values.assign(point=point))
    values = pd.concat(frames, ignore_index=True)
    values.insert(3, "spec", values["method"].map(specs))
    return values[["task", "family", "method", "spec", "point", "seed", "value"]]


def _point_names(tuning: TuningPlan, plan: TierPlan, index: int) -> str:
    labels = {point_label(tuning.points(t.name)[index]) for t in plan.tasks}
    if len(labels) == 1:
        return labels.pop()
    return "; ".join(f"{t.name}: {point_label(tuning.points(t.name)[index])}" for t in plan.tasks)


def _check_points(
    plan: TierPlan, tuning: TuningPlan, specs: list[str], overrides: list[str]
) -> None:
    """Every grid point loads on every task for every method (one line naming what fails)."""
    from sao_online.jobs.methods import method_overrides

    for task in plan.tasks:
        for point in tuning.points(task.name):
            for spec in specs:
                try:
                    task.load([*overrides, *method_overrides(spec), *point_overrides(point)])
                except ConfigError as error:
                    raise ConfigError(
                        f"--grid: {point_label(point)} on task {task.name} for {spec}: {error}"
                    ) from None
