"""What ``benchmark tune`` runs, declared before it runs: the grid, the tuning seeds and the rule.

A suite's tier may declare it (the command line's ``--grid``, ``--rule``, ``--seeds`` and
``--first-seed`` replace what they name)::

    tiers:
      lite:
        tuning:
          seeds: 2                        # tuning seeds 100, 101: disjoint from the tier's
          first_seed: 100                 # evaluation seeds, or refused, naming them
          rule: mean-normalized-score
          grid: {optim.lr: [2.5e-4, 1.0e-3], regularizers.kl_coef: [0.03, 0.3]}
          tasks:
            ToolShift: {grid: {optim.lr: [1.0e-4, 2.5e-4], regularizers.kl_coef: [0.03, 0.3]}}

The grid is the same for every method, built-in or plug-in. It may set how a method learns
(``algorithm``, ``optim``, ``regularizers``), never the task, the model, its warm start or how
it samples: so the floor (``frozen``) is the same at every point, and every method is scored
against it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from sao_online.benchmark.suite import SuiteError, TierPlan, read_suite
from sao_online.config import ConfigError, short_repr
from sao_online.util.safe_yaml import YamlInputError, load_yaml_text

#: The choice rules, each what a grid point is judged by (the highest wins; the first listed
#: point on a tie). A run's value is its mean normalized score over the phases named; a point's
#: is the mean of its runs' over the tuning seeds.
RULES = {
    "mean-normalized-score": "every scored phase, the first (before any shift) included",
    "mean-post-shift-score": "the scored phases after a shift",
}
#: The config sections a grid may set: how a method learns.
TUNABLE = ("algorithm", "optim", "regularizers")
#: The fewest points a grid may have: fewer is a choice between settings, not a tuning.
MIN_POINTS = 4
_TUNING_KEYS = {"seeds", "first_seed", "rule", "grid", "tasks"}


@dataclass(frozen=True)
class TuningPlan:
    """The grid of each task, the tuning seeds and the choice rule."""

    rule: str
    seeds: tuple[int, ...]
    grids: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # task -> field -> values

    def points(self, task: str) -> list[dict[str, Any]]:
        """The grid points of ``task`` in declared order (the first field varies slowest)."""
        grid = self.grids[task]
        return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]

    def record(self) -> dict[str, Any]:
        """The plan as JSON data (``tuning.json``; a resumed tune must match it)."""
        return {"rule": self.rule, "seeds": list(self.seeds), "grids": self.grids}


def point_overrides(point: dict[str, Any]) -> list[str]:
    """A grid point as ``--set`` strings.

    Example:
        >>> point_overrides({"optim.lr": 0.001, "regularizers.kl_coef": 0.3})
        ['optim.lr=0.001', 'regularizers.kl_coef=0.3']
    """
    import json

    return [f"{name}={json.dumps(value)}" for name, value in point.items()]


def point_label(point: dict[str, Any]) -> str:
    """A grid point in one short line: ``optim.lr=0.001, regularizers.kl_coef=0.3``."""
    return ", ".join(f"{name}={value}" for name, value in point.items())


def parse_grid(options: list[str]) -> dict[str, list[Any]]:
    """``--grid FIELD=V1,V2`` options as field -> values (each value read as YAML, so
    ``optim.betas=[0.9,0.99],[0.8,0.9]`` gives two lists).

    Raises:
        ConfigError: an option without ``=`` or values, or a field given twice (named).
    """
    grid: dict[str, list[Any]] = {}
    for option in options:
        name, sep, raw = option.partition("=")
        name = name.strip()
        if not sep or not name or not raw.strip():
            raise ConfigError(f"--grid: expected FIELD=V1,V2,..., got {short_repr(option)}")
        if name in grid:
            raise ConfigError(f"--grid: {name} given twice")
        try:
            values = load_yaml_text(f"[{raw}]", f"--grid {name}")
        except YamlInputError as error:
            raise ConfigError(str(error)) from None
        grid[name] = values
    return grid


def _number(value: Any) -> Any:
    """``value``, or the number a string like ``1e-3`` spells (YAML 1.1 reads it as a string)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _check_grid(grid: Any, where: str) -> dict[str, list[Any]]:
    if not isinstance(grid, dict) or not grid:
        raise ConfigError(f"{where}: expected a mapping of field -> list of values")
    checked = {}
    for name, values in grid.items():
        if not isinstance(name, str) or name.split(".")[0] not in TUNABLE or "." not in name:
            raise ConfigError(
                f"{where}: {short_repr(name)}: a grid sets how a method learns, a field of "
                f"{', '.join(TUNABLE)} (the floor must be the same at every point)"
            )
        if name == "algorithm.name":
            raise ConfigError(f"{where}: algorithm.name picks the method; --methods lists them")
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.{name}: expected a list of values")
        if len({repr(v) for v in values}) != len(values):
            raise ConfigError(f"{where}.{name}: a value is listed twice in {short_repr(values)}")
        checked[name] = [_number(value) for value in values]
    points = 1
    for values in checked.values():
        points *= len(values)
    if points < MIN_POINTS:
        raise ConfigError(
            f"{where}: {points} grid point{'s' if points != 1 else ''}; a tuning needs "
            f"{MIN_POINTS} or more (e.g. two values of two fields)"
        )
    return checked


def tuning_plan(
    plan: TierPlan,
    *,
    grid: dict[str, list[Any]] | None = None,
    rule: str | None = None,
    seeds: int | None = None,
    first_seed: int | None = None,
    eval_seeds: list[int] | None = None,
) -> TuningPlan:
    """The tuning of ``plan``'s tier: its suite's ``tuning`` section, with what the command
    line gives in its place.

    Raises:
        ConfigError: no grid, an unknown rule, a grid field outside ``TUNABLE``, or tuning
            seeds that overlap the evaluation seeds (the tier's and ``eval_seeds``; named).
    """
    data, path = read_suite(plan.source)
    where = f"suite {path.name}: tiers.{plan.tier}.tuning"
    section = ((data.get("tiers") or {}).get(plan.tier) or {}).get("tuning") or {}
    if not isinstance(section, dict):
        raise SuiteError(f"{where}: expected a mapping")
    unknown = sorted(set(section) - _TUNING_KEYS)
    if unknown:
        raise SuiteError(f"{where}.{unknown[0]}: unknown key; known keys: {sorted(_TUNING_KEYS)}")
    rule = rule or section.get("rule", "mean-normalized-score")
    if rule not in RULES:
        raise ConfigError(f"--rule: must be one of {', '.join(RULES)}, got {short_repr(rule)}")
    count = seeds if seeds is not None else section.get("seeds", 2)
    first = first_seed if first_seed is not None else section.get("first_seed", 1000)
    for name, value, low in (("--seeds", count, 1), ("--first-seed", first, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name}: expected an integer >= {low}, got {short_repr(value)}")
    tuning_seeds = tuple(range(first, first + count))
    evaluation = {*range(plan.first_seed, plan.first_seed + plan.seeds), *(eval_seeds or [])}
    overlap = sorted(set(tuning_seeds) & evaluation)
    if overlap:
        raise ConfigError(
            f"tuning seeds {', '.join(map(str, overlap))} are evaluation seeds too (the tier "
            f"evaluates {plan.first_seed}-{plan.first_seed + plan.seeds - 1}"
            + (
                f", --eval-seeds adds {', '.join(map(str, sorted(eval_seeds)))}"
                if eval_seeds
                else ""
            )
            + "): tune on disjoint seeds (--first-seed)"
        )
    task_sections = section.get("tasks") or {}
    grids = {}
    for task in plan.tasks:
        if grid is not None:
            grids[task.name] = _check_grid(grid, "--grid")
            continue
        own = (task_sections.get(task.name) or {}).get("grid")
        source = own if own is not None else section.get("grid")
        if source is None:
            raise ConfigError(
                f"--grid: none given, and {where} declares no grid for task {task.name}"
            )
        label = f"{where}.tasks.{task.name}.grid" if own is not None else f"{where}.grid"
        grids[task.name] = _check_grid(source, label)
    counts = {len(TuningPlan(rule, tuning_seeds, grids).points(name)) for name in grids}
    if len(counts) > 1:
        raise ConfigError(
            f"{where}: the tasks' grids have {sorted(counts)} points: every task needs the same "
            "count, so every method and family gets the same tuning budget"
        )
    return TuningPlan(rule, tuning_seeds, grids)


def parse_seed_ranges(text: str | None) -> list[int]:
    """``0-5,8`` as [0, 1, 2, 3, 4, 5, 8].

    Raises:
        ConfigError: a part that is not N or N-M with N <= M.
    """
    if not text:
        return []
    seeds: list[int] = []
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError:
            raise ConfigError(f"--eval-seeds: expected N or N-M, got {short_repr(part)}") from None
        if first < 0 or last < first:
            raise ConfigError(f"--eval-seeds: expected N or N-M with N <= M, got {part!r}")
        seeds += range(first, last + 1)
    return seeds
