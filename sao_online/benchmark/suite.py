"""A benchmark suite: a declared file of tasks, each an experiment config, with tiers of budgets.

A suite is YAML (``configs/suites/core.yaml`` is the built-in ``core``)::

    suite: my_suite
    description: What the suite measures.
    methods: [sao, grpo]                  # default --methods; frozen (the floor) is always run
    tasks:
      StyleShift:                         # the task's name (also its family unless given)
        config: ../style.yaml             # a config file (relative to this file), a
                                          # bundled config's name (tool_shift) or a mapping
        family: StyleShift                # the stratum of the aggregate (default: the name)
        cpus: 1                           # CPUs one run needs (default: from its runtime)
        set: {env.kwargs.sandbox: subprocess}   # overrides of every tier
      Mine:
        config: {env: {id: "my_tasks:my_tasks/CoinCall-v0"}, ...}   # a task from your module
    tiers:
      smoke:
        seeds: 1                          # default --seeds (and first_seed, default 0)
        methods: [sao]                    # default --methods of this tier
        set: {budget.episodes: 64}        # overrides of every task in this tier
        controls: true                    # a re-adaptation control per run and shift
        warm_start_seeds: [0, 1, 2]       # a warm start per seed; run seed s starts from the
                                          # one of warm_start_seeds[s mod 3]
        tasks:
          StyleShift:
            set: {model.warm_start_steps: 40}
            cpus: 1
            methods:                      # one method's own settings on this task
              sao: {set: {optim.lr: 1.0e-3}}
      async:
        extends: smoke                    # smoke's overrides first, then this tier's
        set: {runtime.backend: simulated}
        time_window: 600                  # virtual seconds after a shift the time score reads
        tasks:
          StyleShift: {time_window: 300}

Overrides are ``section.field: value`` pairs, as ``--set`` takes them; a ``schedule`` given as a
file name is read relative to the suite file. A tier that ``extends`` another runs the other's
overrides (its tier-wide ones, then each task's) and then its own, and takes the other's
``seeds``, ``first_seed``, ``methods``, ``controls``, ``warm_start_seeds`` and
``time_window`` unless it gives its own (not its ``tuning``, nor its tuned per-method settings:
a tuning is one tier's).
``time_window`` (a tier's, or one task's within a tier) turns on the time score of the tasks it
covers: runs are also scored over the first ``time_window`` seconds of the run's clock after
each shift (``sao_online.benchmark.time_scores``), which means something where time does (the
simulated runtime's virtual seconds). Every error names the file and the field.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from sao_online.config import ConfigError, ConfigWarning, ExperimentConfig, load_config, short_repr
from sao_online.config.bundled import bundled_configs, resolve_config
from sao_online.config.errors import key_text
from sao_online.config.names import check_method_name
from sao_online.util.safe_yaml import YamlInputError, load_yaml_file
from sao_online.util.suggestions import did_you_mean

TIERS = ("smoke", "lite", "async", "full")
_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SUITE_KEYS = {"suite", "description", "methods", "tasks", "tiers"}
_TASK_KEYS = {"config", "family", "cpus", "set"}
_TIER_KEYS = {
    "extends",
    "seeds",
    "first_seed",
    "methods",
    "set",
    "tasks",
    "controls",
    "time_window",
    "warm_start_seeds",
    "tuning",
    "tuned",
}
_TIER_TASK_KEYS = {"set", "cpus", "methods", "time_window"}
#: The longest time window a suite may declare (seconds): a year of virtual time.
MAX_TIME_WINDOW = 365 * 86400.0


class SuiteError(ConfigError):
    """A suite file that is missing, malformed, or names something that does not exist."""


@dataclass(frozen=True)
class TaskPlan:
    """One task of a suite at one tier: the config its runs start from and what they need."""

    name: str
    family: str
    config: str | dict[str, Any]  # a config file path, or the config mapping itself
    overrides: tuple[str, ...]  # ``key=value`` strings, as --set takes them
    cpus: int
    # Method spec -> overrides of that method alone on this task (a tuned suite's choices).
    method_sets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    time_window: float | None = None  # seconds after each shift the time score reads (None: off)

    def method_overrides(self, spec: str) -> list[str]:
        """The overrides the suite sets for method ``spec`` alone on this task."""
        return list(self.method_sets.get(spec, ()))

    def load(self, extra: list[str] | None = None) -> ExperimentConfig:
        """The task's validated config with its overrides (and ``extra``) applied."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConfigWarning)
            return load_config(self.config, [*self.overrides, *(extra or [])])


@dataclass(frozen=True)
class TierPlan:
    """What a suite runs at one tier: its tasks, default methods and default seeds."""

    suite: str
    tier: str
    description: str
    tasks: tuple[TaskPlan, ...]
    methods: tuple[str, ...]
    seeds: int
    first_seed: int
    source: str = field(default="")  # the suite file
    controls: bool = False  # a re-adaptation control per learning run and shift
    tuned: dict[str, Any] | None = None  # how ``benchmark tune`` chose the method settings
    warm_start_seeds: tuple[int, ...] = ()  # several warm starts per task (empty: the config's)

    def warm_start_seed(self, seed: int) -> int | None:
        """The warm-start seed the runs of run seed ``seed`` start from: ``warm_start_seeds[seed
        mod n]``, so every seed set of n consecutive seeds meets each warm start once (None: the
        task config's own ``model.warm_start_seed``)."""
        if not self.warm_start_seeds:
            return None
        return self.warm_start_seeds[seed % len(self.warm_start_seeds)]


def builtin_suites() -> list[str]:
    """Names of the suites shipped with the package (``configs/suites/*.yaml``)."""
    folder = resources.files("sao_online.configs") / "suites"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def suite_path(suite: str | Path) -> Path:
    """The file of a built-in suite name (``core``) or of a path to a suite YAML.

    Raises:
        SuiteError: neither a built-in suite nor an existing file.
    """
    candidate = Path(suite)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        if not candidate.is_file():
            raise SuiteError(f"--suite: no suite file {candidate}")
        return candidate
    folder = resources.files("sao_online.configs") / "suites"
    builtin = folder / f"{suite}.yaml"
    if not builtin.is_file():
        raise SuiteError(
            f"--suite: {short_repr(str(suite))} is neither a built-in suite "
            f"({', '.join(builtin_suites())}) nor a YAML file"
        )
    return Path(str(builtin))


def _mapping(value: Any, where: str, keys: set[str] | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SuiteError(f"{where}: expected a mapping, got {short_repr(value)}")
    if keys is not None:
        unknown = sorted(key_text(key) for key in value if key not in keys)
        if unknown:
            joint = "." if ":" in where else ": "  # "suite f.yaml: tasks.A.gpu", "suite f.yaml: x"
            raise SuiteError(
                f"{where}{joint}{unknown[0]}: unknown key; known keys: {', '.join(sorted(keys))}"
            )
    return value


def _methods(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part for part in value.split(",")]
    if not isinstance(value, list) or not value:
        raise SuiteError(f"{where}: expected a list of method names, got {short_repr(value)}")
    names = [str(name).strip() for name in value]
    if not all(names):
        raise SuiteError(f"{where}: an empty method name in {short_repr(value)}")
    for name in names:
        try:
            check_method_name(name)
        except ValueError as error:
            raise SuiteError(f"{where}: {error}") from None
    return tuple(names)


def _count(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SuiteError(f"{where}: expected an integer >= {minimum}, got {short_repr(value)}")
    return value


def _overrides(values: Any, where: str, folder: Path) -> list[str]:
    """``section.field: value`` pairs as ``--set`` strings (values written as JSON, i.e. YAML)."""
    overrides = []
    for key, value in _mapping(values, where).items():
        if not isinstance(key, str) or not key or key.startswith(".") or ".." in key:
            raise SuiteError(f"{where}: {short_repr(key)} is not a section.field name")
        if key == "schedule" and isinstance(value, str):  # a file next to the suite
            path = Path(value)
            value = str(path if path.is_absolute() else (folder / path).resolve())
        overrides.append(f"{key}={json.dumps(value)}")
    return overrides


def _task_config(value: Any, where: str, folder: Path) -> str | dict[str, Any]:
    """A task's config: a mapping, a file relative to the suite, or a bundled config's name."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        raise SuiteError(f"{where}: expected a config file, a bundled config's name or a mapping")
    path = Path(value)
    beside_suite = path if path.is_absolute() else (folder / path).resolve()
    if beside_suite.is_file():
        return str(beside_suite)
    if beside_suite.exists():  # a folder, a FIFO, a device: never read
        raise SuiteError(f"{where}: {beside_suite} is not a regular file")
    if path.is_absolute() or path.is_file():
        raise SuiteError(f"{where}: no config file {beside_suite}")
    try:  # ``demo``, ``tool_shift.yaml``: the configs shipped with the package
        return str(resolve_config(value))
    except FileNotFoundError:
        names = list(bundled_configs())
        raise SuiteError(
            f"{where}: no config file {beside_suite}, nor a bundled config "
            f"{short_repr(value)}{did_you_mean(value.removesuffix('.yaml'), names)}; bundled "
            f"configs: {', '.join(names)}"
        ) from None


def _default_cpus(config: ExperimentConfig) -> int:
    """CPUs one run uses: the learner's torch threads (one, as the benchmark runs it, unless
    ``runtime.torch_threads`` says how many), plus one per rollout worker on the backends whose
    workers are processes or actors (local, ray)."""
    threads = config.runtime.torch_threads
    learner = threads if isinstance(threads, int) else 1
    if config.runtime.backend in ("sync", "simulated"):  # one process: the workers are simulated
        return learner
    return learner + config.runtime.num_workers


def read_suite(suite: str | Path) -> tuple[dict[str, Any], Path]:
    """The suite file's mapping and its path, checked at the top level."""
    path = suite_path(suite)
    try:
        data = load_yaml_file(path, "suite file")
    except YamlInputError as error:
        raise SuiteError(str(error)) from None
    data = _mapping(data, f"suite {path.name}", _SUITE_KEYS)
    if not data.get("tasks"):
        raise SuiteError(f"suite {path.name}: tasks: a suite needs at least one task")
    return data, path


def _time_window(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SuiteError(f"{where}: expected a number of seconds, got {short_repr(value)}")
    if not 0 < value <= MAX_TIME_WINDOW:
        raise SuiteError(f"{where}: must be in (0, {MAX_TIME_WINDOW:g}] seconds, got {value}")
    return float(value)


def _tier_chain(tiers: dict[str, Any], tier: str, where: str) -> list[tuple[str, dict[str, Any]]]:
    """``tier`` and the tiers it extends, as (name, mapping), the furthest ancestor first."""
    chain: list[tuple[str, dict[str, Any]]] = []
    name: Any = tier
    while True:
        data = _mapping(tiers.get(name), f"{where}: tiers.{name}", _TIER_KEYS)
        chain.insert(0, (name, data))
        if "extends" not in data:
            return chain
        parent = data["extends"]
        if parent not in TIERS:
            raise SuiteError(
                f"{where}: tiers.{name}.extends: must be one of {', '.join(TIERS)}, got "
                f"{short_repr(parent)}"
            )
        if any(parent == seen for seen, _ in chain):
            path = " -> ".join([*(seen for seen, _ in reversed(chain)), parent])
            raise SuiteError(f"{where}: tiers.{name}.extends: a cycle ({path})")
        name = parent


def _inherited(
    chain: list[tuple[str, dict[str, Any]]], key: str, default: Any, where: str
) -> tuple[Any, str]:
    """The value of ``key`` in the nearest tier of ``chain`` that gives it, and where it is."""
    for name, data in reversed(chain):
        if key in data:
            return data[key], f"{where}: tiers.{name}.{key}"
    return default, f"{where}: {key}"


def plan_tier(suite: str | Path, tier: str) -> TierPlan:
    """Resolve ``tier`` of ``suite`` into the tasks to run, each config loaded and checked.

    Raises:
        SuiteError: a malformed suite (the file and field named), an unknown tier or one the
            suite does not declare (a suite's own tiers are what its runs are; an undeclared one
            would silently run the task configs at their full size), or a task whose config
            does not load at this tier (its error, prefixed by the task).
    """
    data, path = read_suite(suite)
    name = str(data.get("suite") or path.stem)
    where = f"suite {path.name}"
    if tier not in TIERS:
        raise SuiteError(f"--tier: must be one of {', '.join(TIERS)}, got {short_repr(tier)}")
    tiers = _mapping(data.get("tiers"), f"{where}: tiers", set(TIERS))
    chain = _tier_chain(tiers, tier, where)
    methods = _methods(*_inherited(chain, "methods", data.get("methods", ["sao", "grpo"]), where))
    seeds = _count(*_inherited(chain, "seeds", 3, where), 1)
    first_seed = _count(*_inherited(chain, "first_seed", 0, where), 0)
    window, window_where = _inherited(chain, "time_window", None, where)
    tier_window = None if window is None else _time_window(window, window_where)
    tasks_data = _mapping(data["tasks"], f"{where}: tasks")
    layers = []  # per tier of the chain: its own overrides, and its tasks' mappings
    for tier_name, tier_data in chain:
        tier_where = f"{where}: tiers.{tier_name}"
        tier_tasks = _mapping(tier_data.get("tasks"), f"{tier_where}.tasks")
        for task_name in tier_tasks:
            if task_name not in tasks_data:
                raise SuiteError(
                    f"{tier_where}.tasks.{task_name}: not a task of the suite "
                    f"({', '.join(map(str, tasks_data))})"
                )
        layers.append(
            (
                tier_where,
                _overrides(tier_data.get("set"), f"{tier_where}.set", path.parent),
                tier_tasks,
            )
        )
    tasks = []
    for task_name, task_data in tasks_data.items():
        task_where = f"{where}: tasks.{task_name}"
        if not isinstance(task_name, str) or not _TASK_NAME.match(task_name):
            raise SuiteError(
                f"{where}: tasks: {short_repr(task_name)} cannot name a task (letters, digits, "
                "'_', '-' and '.', starting with a letter or digit)"
            )
        task_data = _mapping(task_data, task_where, _TASK_KEYS)
        if "config" not in task_data:
            raise SuiteError(f"{task_where}.config: missing (a config file or mapping)")
        overrides = _overrides(task_data.get("set"), f"{task_where}.set", path.parent)
        cpus_value, cpus_where = task_data.get("cpus"), f"{task_where}.cpus"
        time_window = tier_window
        for tier_where, tier_overrides, tier_tasks in layers:
            own_where = f"{tier_where}.tasks.{task_name}"
            own = _mapping(tier_tasks.get(task_name), own_where, _TIER_TASK_KEYS)
            overrides += [
                *tier_overrides,
                *_overrides(own.get("set"), f"{own_where}.set", path.parent),
            ]
            if "cpus" in own:
                cpus_value, cpus_where = own["cpus"], f"{own_where}.cpus"
            if "time_window" in own:
                time_window = _time_window(own["time_window"], f"{own_where}.time_window")
        overrides.append(f"experiment={task_name}")
        family = task_data.get("family", task_name)
        if not isinstance(family, str) or not _TASK_NAME.match(family):
            raise SuiteError(f"{task_where}.family: expected a name, got {short_repr(family)}")
        plan = TaskPlan(
            name=task_name,
            family=family,
            config=_task_config(task_data["config"], f"{task_where}.config", path.parent),
            overrides=tuple(overrides),
            cpus=1,
        )
        try:
            config = plan.load()
        except ConfigError as error:
            raise SuiteError(f"{where}: task {task_name} at tier {tier}: {error}") from None
        cpus = _default_cpus(config) if cpus_value is None else _count(cpus_value, cpus_where, 1)
        # A method's own settings are the tier's own (a tuned tier's choices), never inherited:
        # settings tuned at one tier are not the tuning of another.
        own_where = f"{where}: tiers.{tier}.tasks.{task_name}"
        own = _mapping(layers[-1][2].get(task_name), own_where, _TIER_TASK_KEYS)
        method_sets = _method_sets(own.get("methods"), f"{own_where}.methods", path)
        tasks.append(
            TaskPlan(
                plan.name,
                plan.family,
                plan.config,
                plan.overrides,
                cpus,
                method_sets=method_sets,
                time_window=time_window,
            )
        )
    if tier not in tiers:  # checked last: a malformed task is named first
        declared = ", ".join(str(t) for t in tiers) or "none"
        raise SuiteError(
            f"{where}: tiers: no tier {tier} (the suite declares {declared}); a tier says what "
            f"a run of the suite is (seeds, budgets): pass --tier with one of them, or declare "
            f"it (tiers: {{{tier}: {{seeds: 1}}}} runs the task configs as they are)"
        )
    description = str(data.get("description") or "")
    controls, controls_where = _inherited(chain, "controls", False, where)
    if not isinstance(controls, bool):
        raise SuiteError(f"{controls_where}: expected true or false")
    warm_start_seeds, seeds_where = _inherited(chain, "warm_start_seeds", [], where)
    if (
        not isinstance(warm_start_seeds, list)
        or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in warm_start_seeds
        )
        or len(set(warm_start_seeds)) != len(warm_start_seeds)
    ):
        raise SuiteError(
            f"{seeds_where}: expected a list of distinct integers >= 0, "
            f"got {short_repr(warm_start_seeds)}"
        )
    tuned = chain[-1][1].get("tuned")  # the tier's own, as its methods' settings are
    if tuned is not None and not (
        isinstance(tuned, dict) and isinstance(tuned.get("seeds"), list) and "rule" in tuned
    ):
        raise SuiteError(
            f"{where}: tiers.{tier}.tuned: expected the record `benchmark tune` writes (its "
            "rule and tuning seeds)"
        )
    return TierPlan(
        name,
        tier,
        description,
        tuple(tasks),
        methods,
        seeds,
        first_seed,
        source=str(path),
        controls=controls,
        warm_start_seeds=tuple(warm_start_seeds),
        tuned=tuned,
    )


def _method_sets(value: Any, where: str, path: Path) -> dict[str, tuple[str, ...]]:
    """``methods: {SPEC: {set: {...}}}`` of a tier's task: each method's own overrides."""
    sets = {}
    for spec, entry in _mapping(value, where).items():
        _methods([spec], f"{where}.{spec}")  # a method's name, or MODULE:FACTORY
        entry = _mapping(entry, f"{where}.{spec}", {"set"})
        sets[str(spec)] = tuple(_overrides(entry.get("set"), f"{where}.{spec}.set", path.parent))
    return sets
