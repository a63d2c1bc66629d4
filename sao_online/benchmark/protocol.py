"""The protocol of a benchmark: what must be equal for two sets of runs to be pooled.

It records, per task, the resolved config every method starts from (schedule written out; the
seed and the logging settings left out: they do not change what is measured) and, per method,
its spec and its resolved ``algorithm`` section on every task. Seeds and machines are not part
of it: pooling seed sets and machines is what ``merge`` is for. Two protocols that differ are
refused with the difference named (``budget.episodes: 600 vs 1000``); a config field added after
one of them was recorded is no difference while the other holds it at its default.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

from sao_online.benchmark.results import CURVE_BINS, HALF_ORACLE
from sao_online.benchmark.suite import TierPlan
from sao_online.benchmark.time_scores import time_score_settings
from sao_online.config import (
    AlgorithmConfig,
    ConfigError,
    ConfigWarning,
    ExperimentConfig,
    with_added_fields,
)
from sao_online.config.sections import Section
from sao_online.rundir.provenance import stable_hash

#: The method whose reward is the floor (score 0) of the normalized score.
FLOOR_METHOD = "frozen"
#: A phase whose oracle reward exceeds the floor by less than this is not scored (reward units).
MIN_GAP = 0.05
PROTOCOL_FORMAT = 1


class ProtocolMismatch(ConfigError):
    """Runs measured under different protocols: they cannot be pooled into one scorecard."""


def _comparable(config: ExperimentConfig, schedule: dict[str, Any]) -> dict[str, Any]:
    data = config.to_dict()
    data["schedule"] = schedule
    data.pop("seed", None)
    data.pop("logging", None)
    return data


def method_labels(plan: TierPlan, specs: list[str], overrides: list[str]) -> dict[str, str]:
    """Method spec -> its label (the name of the Method it builds), checked on every task.

    Raises:
        ConfigError: a method unknown, refused by a task's config, or failing to build (named
            with the task), or two specs of one name.
    """
    from sao_online.jobs.methods import method_folders

    labels: dict[str, str] = {}
    for task in plan.tasks:
        base = task.load(overrides)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConfigWarning)
                folders = method_folders(base, specs)
        except ConfigError as error:
            raise ConfigError(f"task {task.name}: {error}") from None
        for spec, label in folders.items():
            if labels.setdefault(spec, label) != label:
                raise ConfigError(
                    f"--methods: {spec!r} makes a method named {labels[spec]!r} on one task "
                    f"and {label!r} on {task.name}"
                )
            if task.method_overrides(spec):
                _check_method_set(task, spec, label, base, overrides)
    return labels


def _check_method_set(task: Any, spec: str, label: str, base: Any, overrides: list[str]) -> None:
    """A method's own settings on a task (a tuned suite's) must load, build the same method
    and leave the warm start alone: the floor (``frozen``) starts from the task's.

    Raises:
        ConfigError: naming the task, the method and what is wrong.
    """
    from sao_online.algorithms import build_method
    from sao_online.jobs.methods import method_overrides
    from sao_online.learning.warm_start import warm_start_settings

    where = f"task {task.name}, method {spec}: its own settings"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConfigWarning)
            own = task.load([*overrides, *method_overrides(spec), *task.method_overrides(spec)])
        name = build_method(own).name
    except (ConfigError, ValueError) as error:
        raise ConfigError(f"{where}: {error}") from None
    if name != label:
        raise ConfigError(f"{where} make a method named {name!r}, not {label!r}")
    if own.model.warm_start and warm_start_settings(own) != warm_start_settings(base):
        raise ConfigError(
            f"{where} change its warm start, which its floor (frozen) shares: set them for the "
            "task, for every method"
        )


def protocol_of(plan: TierPlan, labels: dict[str, str], overrides: list[str]) -> dict[str, Any]:
    """The protocol of ``plan`` run with the methods ``labels`` (spec -> label)."""
    from sao_online.config.run_schedule import resolve_schedule
    from sao_online.environments import check_env_id
    from sao_online.jobs.methods import method_overrides

    tasks: dict[str, Any] = {}
    methods: dict[str, Any] = {
        label: {"spec": spec, "algorithm": {}} for spec, label in labels.items()
    }
    for task in plan.tasks:
        base = task.load(overrides)
        try:
            check_env_id(base.env.id)
            schedule = resolve_schedule(base).to_dict()
        except ValueError as error:
            raise ConfigError(f"task {task.name}: {error}") from None
        config = _comparable(base, schedule)
        tasks[task.name] = {
            "family": task.family,
            "cpus": task.cpus,
            "config": config,
            "config_hash": stable_hash(config),
        }
        if task.time_window is not None:  # absent where there is none, as before it existed
            tasks[task.name]["time_score"] = time_score_settings(task.time_window)
        for spec, label in labels.items():
            own = task.method_overrides(spec)
            algorithm = task.load([*overrides, *method_overrides(spec), *own]).algorithm
            methods[label]["algorithm"][task.name] = _comparable_algorithm(algorithm)
            if own:  # a tuned suite's settings of this method alone
                methods[label].setdefault("set", {})[task.name] = own
    return {
        "format": PROTOCOL_FORMAT,
        "suite": plan.suite,
        "tier": plan.tier,
        "score": {
            "floor": FLOOR_METHOD,
            "half_oracle": HALF_ORACLE,
            "min_gap": MIN_GAP,
            "curve_bins": CURVE_BINS,
        },
        "tasks": tasks,
        "methods": methods,
        # Several warm starts per task, run seed s paired with the s mod n-th ([]: the config's).
        "warm_start_seeds": list(plan.warm_start_seeds),
        **({"tuning": plan.tuned} if plan.tuned else {}),  # how `benchmark tune` chose
    }


def _comparable_algorithm(algorithm: Any) -> dict[str, Any]:
    return algorithm.model_dump()


def budget_matching(protocol: dict[str, Any]) -> str:
    """One sentence: what the suite's budgets match across methods (``budget.match`` of each
    task's config; one recorded before the field existed matched episodes)."""
    matches: dict[str, list[str]] = {}
    for name, task in protocol["tasks"].items():
        match = task["config"].get("budget", {}).get("match", "episodes")
        matches.setdefault(match, []).append(name)
    meaning = {
        "episodes": "episodes (a group method, G rollouts to a prompt, sees 1/G as many prompts)",
        "prompts": "prompts (a group method runs G times the episodes, on the same prompts)",
    }
    if len(matches) == 1:
        return f"Budgets are matched in {meaning[next(iter(matches))]}."
    parts = [
        f"in {match} on {', '.join(sorted(names))}" for match, names in sorted(matches.items())
    ]
    return f"Budgets are matched {'; '.join(parts)}."


def warm_start_design(protocol: dict[str, Any]) -> str:
    """One sentence (with a leading space) on the tier's warm starts, when it declares several."""
    seeds = protocol.get("warm_start_seeds") or []
    if not seeds:
        return ""
    return (
        f" Warm starts are a random factor: {len(seeds)} per task (seeds "
        f"{', '.join(map(str, seeds))}), run seed s starting from the (s mod {len(seeds)})-th; "
        "each run's floor is the frozen runs' from its warm start, and the intervals draw warm "
        "starts before the runs within them."
    )


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat or {prefix: {}}
    return {prefix: value}


def differences(first: Any, second: Any, limit: int = 3) -> list[str]:
    """``key: a vs b`` for the dotted keys where two nested mappings differ (first ``limit``)."""
    flat_first, flat_second = _flatten(first), _flatten(second)
    found = []
    for key in sorted(set(flat_first) | set(flat_second)):
        a, b = flat_first.get(key, "(absent)"), flat_second.get(key, "(absent)")
        if a != b:
            found.append(f"{key}: {a!r} vs {b!r}")
    if len(found) > limit:
        found = [*found[:limit], f"and {len(found) - limit} more"]
    return found


def config_differences(
    first: dict[str, Any], second: dict[str, Any], section: type[Section] = ExperimentConfig
) -> list[str]:
    """:func:`differences` of two recorded configs (``section``: of one section alone), where a
    field one of them lacks and the other holds at its default is no difference: the field was
    added to the config after the one that lacks it was recorded, and its default is what ran
    then (:func:`~sao_online.config.with_added_fields`)."""
    if not (isinstance(first, dict) and isinstance(second, dict)):
        return differences(first, second)
    return differences(
        with_added_fields(first, second, section), with_added_fields(second, first, section)
    )


def _same_settings(
    first: dict[str, Any], second: dict[str, Any], first_name: str, second_name: str
) -> Callable[[str], ProtocolMismatch]:
    """Check two protocols' format, tier and score settings; returns their refusal maker.

    Raises:
        ProtocolMismatch: naming the first of those that differs.
    """

    def refuse(what: str) -> ProtocolMismatch:
        return ProtocolMismatch(f"{first_name} and {second_name} differ in {what}")

    if first.get("format") != second.get("format"):
        raise refuse(f"format: {first.get('format')!r} vs {second.get('format')!r}")
    for field in ("tier", "score"):
        if first[field] != second[field]:
            raise refuse("; ".join(differences({field: first[field]}, {field: second[field]})))
    mine, theirs = first.get("warm_start_seeds", []), second.get("warm_start_seeds", [])
    if mine != theirs:  # recorded before tiers declared them: the configs' own
        raise refuse(f"warm_start_seeds: {mine} vs {theirs}")
    return refuse


def check_same_protocol(
    first: dict[str, Any], second: dict[str, Any], first_name: str, second_name: str
) -> dict[str, Any]:
    """The pooled protocol of two, or :class:`ProtocolMismatch` naming the first difference.

    Tier, score settings and tasks (each task's resolved config) must be equal; methods may
    differ in which are present, but a method in both must have been configured the same way
    on every task.
    """

    refuse = _same_settings(first, second, first_name, second_name)
    tasks_first, tasks_second = set(first["tasks"]), set(second["tasks"])
    if tasks_first != tasks_second:
        only = sorted(tasks_first ^ tasks_second)
        raise refuse(f"their tasks: {', '.join(only)} in only one of them")
    for name in sorted(tasks_first):
        a, b = first["tasks"][name], second["tasks"][name]
        if a["family"] != b["family"]:
            raise refuse(f"task {name}: family: {a['family']!r} vs {b['family']!r}")
        if a.get("time_score") != b.get("time_score"):
            found = differences(
                {"time_score": a.get("time_score")}, {"time_score": b.get("time_score")}
            )
            raise refuse(f"task {name}: " + "; ".join(found))
        if a["config_hash"] != b["config_hash"]:
            found = config_differences(a["config"], b["config"])
            if found:
                raise refuse(f"task {name}: " + "; ".join(found))
    methods = copy.deepcopy(first["methods"])
    for label, method in second["methods"].items():
        if label not in methods:
            methods[label] = copy.deepcopy(method)
            continue
        mine = methods[label]
        if mine["spec"] != method["spec"]:
            raise refuse(f"method {label}: spec {mine['spec']!r} vs {method['spec']!r}")
        for task, algorithm in method["algorithm"].items():
            found = config_differences(mine["algorithm"].get(task), algorithm, AlgorithmConfig)
            if found:
                raise refuse(f"method {label} on task {task}: algorithm " + "; ".join(found))
            ours, theirs = mine.get("set", {}).get(task, []), method.get("set", {}).get(task, [])
            if ours != theirs:
                raise refuse(f"method {label} on task {task}: its own settings {ours} vs {theirs}")
    return {**first, "methods": methods}


def restricted(protocol: dict[str, Any], tasks: set[str]) -> dict[str, Any]:
    """``protocol`` with only ``tasks``: their configs, and each method's algorithm on them."""
    narrowed = copy.deepcopy(protocol)
    narrowed["tasks"] = {
        name: narrowed["tasks"][name] for name in narrowed["tasks"] if name in tasks
    }
    for method in narrowed["methods"].values():
        method["algorithm"] = {
            name: algorithm for name, algorithm in method["algorithm"].items() if name in tasks
        }
        if "set" in method:
            method["set"] = {name: own for name, own in method["set"].items() if name in tasks}
    if "tuning" in narrowed:  # how the kept tasks' settings were chosen, not the others'
        for part in ("grids", "chosen", "from_by_task"):
            if part not in narrowed["tuning"]:
                continue
            own = narrowed["tuning"][part]
            narrowed["tuning"][part] = {name: v for name, v in own.items() if name in tasks}
        if narrowed["tuning"].get("from_by_task"):
            narrowed["tuning"]["from"] = _where_in_words(narrowed["tuning"]["from_by_task"])
    return narrowed


def joined(
    first: dict[str, Any], second: dict[str, Any], first_name: str, second_name: str
) -> dict[str, Any]:
    """The protocol of ``first``'s tasks and ``second``'s (which it must not have) together.

    Tier and score settings must be equal; a method in both must have the same spec.

    Raises:
        ProtocolMismatch: naming the first difference.
    """

    refuse = _same_settings(first, second, first_name, second_name)
    shared = sorted(set(first["tasks"]) & set(second["tasks"]))
    if shared:
        raise ProtocolMismatch(f"{first_name} and {second_name} both hold {', '.join(shared)}")
    result = copy.deepcopy(first)
    result["tasks"].update(copy.deepcopy(second["tasks"]))
    for label, method in second["methods"].items():
        mine = result["methods"].setdefault(label, {"spec": method["spec"], "algorithm": {}})
        if mine["spec"] != method["spec"]:
            raise refuse(f"method {label}: spec {mine['spec']!r} vs {method['spec']!r}")
        mine["algorithm"].update(copy.deepcopy(method["algorithm"]))
        if method.get("set"):
            mine.setdefault("set", {}).update(copy.deepcopy(method["set"]))
    tuning = _joined_tuning(first.get("tuning"), second.get("tuning"), refuse)
    if tuning is not None:
        result["tuning"] = tuning
    return result


def _joined_tuning(
    first: dict[str, Any] | None,
    second: dict[str, Any] | None,
    refuse: Callable[[str], ProtocolMismatch],
) -> dict[str, Any] | None:
    """The record of how both sides' settings were chosen (``benchmark tune``'s): one rule and
    tuning seeds for every task, each task's grid and choices from its own side, and where each
    task was tuned (``from_by_task``; ``from`` says it in words). Tasks tuned beside tasks
    that were not are refused: the scorecard would call every task tuned."""
    if first is None and second is None:
        return None
    if first is None or second is None:
        tuned = "the first" if first is not None else "the second"
        raise refuse(f"tuning: only {tuned} was tuned by `benchmark tune`")
    for field in ("rule", "seeds"):
        if first.get(field) != second.get(field):
            raise refuse(f"tuning.{field}: {first.get(field)!r} vs {second.get(field)!r}")
    result = copy.deepcopy(first)
    for part in ("grids", "chosen"):
        result.setdefault(part, {}).update(copy.deepcopy(second.get(part, {})))
    where = {**_tuned_where(first), **_tuned_where(second)}
    result["from"] = _where_in_words(where)
    result["from_by_task"] = where
    return result


def _where_in_words(where: dict[str, str]) -> str:
    """``tune``, or ``a for T, U; b for V`` where tasks were tuned in different folders."""
    folders = sorted(set(where.values()))
    if len(folders) == 1:
        return folders[0]
    return "; ".join(
        f"{folder} for {', '.join(sorted(t for t in where if where[t] == folder))}"
        for folder in folders
    )


def _tuned_where(tuning: dict[str, Any]) -> dict[str, str]:
    """Task -> the folder its tune was kept in."""
    if "from_by_task" in tuning:
        return dict(tuning["from_by_task"])
    return {task: str(tuning.get("from", "")) for task in tuning.get("grids", {})}
