"""A benchmark checked before anything runs: every option in its range, the suite's tier
planned, the methods built on every task (a user's modules first in a child process, under a
deadline), the protocol written out, and the plan's time and memory estimated and refused when
the machine cannot carry it. Nothing is written and no run starts here; ``--dry-run`` stops
after it and prints the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sao_online.benchmark.controls import shift_starts
from sao_online.benchmark.protocol import FLOOR_METHOD, method_labels, protocol_of
from sao_online.benchmark.suite import TierPlan, plan_tier
from sao_online.benchmark.warm_starts import tier_warm_starts
from sao_online.config import ConfigError
from sao_online.config.names import check_method_name
from sao_online.runtime.host.plan_fit import (
    MAX_SEED,
    MAX_SEEDS,
    PARALLEL_PER_CORE_LIMIT,
    Bootstrap,
    PlanEstimate,
    PlanFlags,
    RunGroup,
    check_count,
    check_plan_fits,
    estimate_plan,
    method_weight,
    warm_start_prior_seconds,
)
from sao_online.runtime.host.threads import usable_cores
from sao_online.runtime.scheduling.planner import run_episodes_of

BACKENDS = ("local", "ray")
MAX_REPS = 1_000_000


@dataclass
class PreparedBenchmark:
    """A benchmark checked and planned: what ``run_benchmark`` runs, what ``--dry-run`` shows."""

    out: Path
    plan: TierPlan
    labels: dict[str, str]  # method spec -> label (the Method's name)
    seeds: list[int]
    overrides: list[str]
    protocol: dict[str, Any]
    backend: str
    address: str | None
    cores: int
    reps: int
    estimate: PlanEstimate
    warm_starts: str | Path | None = None
    controls: bool = False  # a re-adaptation control per learning run and shift
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """The plan in a few lines: tasks, methods, seeds, runs and the estimate."""
        seeds = self.seeds
        seed_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}..{seeds[-1]}"
        return "\n".join(
            [
                f"suite {self.plan.suite}, tier {self.plan.tier}: "
                f"{len(self.plan.tasks)} tasks ({', '.join(t.name for t in self.plan.tasks)})",
                f"methods: {', '.join(self.labels.values())}; seeds {seed_text}",
                f"estimate: {self.estimate.summary()}",
                f"output: {self.out}",
            ]
        )


def method_specs(methods: list[str] | None, plan: TierPlan) -> list[str]:
    """The method specs a benchmark runs: ``methods`` (default the tier's), each name's form
    checked (built on each task later), and the floor ``frozen`` first unless given.

    Raises:
        ConfigError: no method, or a malformed name (a suggestion for a typo).
    """
    specs = [m.strip() for m in (methods or plan.methods) if m.strip()]
    if not specs:
        raise ConfigError("--methods: no method given")
    for spec in specs:
        try:
            check_method_name(spec)
        except ValueError as error:
            raise ConfigError(f"--methods: {error}") from None
    if FLOOR_METHOD not in specs:
        specs = [FLOOR_METHOD, *specs]  # the floor of the normalized score is always measured
    return specs


def check_run_options(
    *,
    seeds: int | None,
    first_seed: int | None,
    backend: str,
    address: str | None,
    parallel: int | None,
    reps: int = 2000,
) -> None:
    """Refuse a benchmark's options that no suite makes valid (None: the tier's default), each
    number in its range.

    Raises:
        ConfigError: the option and what is wrong with it, in one line.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"--backend: must be local or ray, got {backend!r}")
    if address is not None and backend != "ray":
        raise ConfigError("--address: applies to --backend ray only")
    if parallel is not None:
        check_count("--parallel", parallel, 1, PARALLEL_PER_CORE_LIMIT * usable_cores())
    check_count("--reps", reps, 1, MAX_REPS)
    if seeds is not None:
        check_count("--seeds", seeds, 1, MAX_SEEDS)
    if first_seed is not None:
        check_count("--first-seed", first_seed, 0, MAX_SEED)


def _check_plugins(plan: TierPlan, specs: list[str], overrides: list[str]) -> None:
    """Load the user's modules (methods, environments) in a child under a deadline."""
    from sao_online.runtime.host.plugin_probe import check_plugins_load, env_loads, method_loads

    loads = []
    for task in plan.tasks:
        config = task.load(overrides).to_dict()
        loads += env_loads([config["env"]["id"]], f"task {task.name}: env.id", config)
        loads += method_loads(config, specs, "--methods")
    check_plugins_load(loads)


def warn_about_budgets(
    plan: TierPlan, labels: dict[str, str], overrides: list[str], controls: bool = False
) -> None:
    """Warn once per problem of the tier's budgets (``runtime.envs.budget_warnings``): a task
    with no shift inside its budget, a method whose critic-only warm-up takes more than a
    quarter of a task's first phase (the tasks listed together), and, with ``controls``, more
    than a quarter of a phase its controls are scored on (a run reaches the shift with its
    critic trained; its control starts with the warm-up, which its re-adaptation then counts)."""
    import warnings

    from sao_online.algorithms import build_method
    from sao_online.config.run_schedule import resolve_schedule
    from sao_online.jobs.methods import method_overrides
    from sao_online.runtime.envs import (
        CRITIC_WARMUP_SHARE,
        BudgetWarning,
        budget_warnings,
        critic_warmup_share,
    )

    shares: dict[str, list[str]] = {}
    in_controls: dict[str, list[str]] = {}
    for task in plan.tasks:
        schedule = resolve_schedule(task.load(overrides))
        for spec, label in labels.items():
            config = task.load([*overrides, *method_overrides(spec), *task.method_overrides(spec)])
            method = build_method(config)
            for message in budget_warnings(config, schedule, None):  # said per task
                if spec == next(iter(labels)):
                    warnings.warn(f"task {task.name}: {message}", BudgetWarning, stacklevel=3)
            share = critic_warmup_share(config, schedule, method)
            if share is not None and share > CRITIC_WARMUP_SHARE:
                shares.setdefault(label, []).append(f"{task.name} {share:.0%}")
            if controls and share is not None:  # a share: the method has a critic warm-up
                for shift, phase_share in _control_warmup_shares(config, method):
                    if phase_share > CRITIC_WARMUP_SHARE:
                        in_controls.setdefault(label, []).append(
                            f"{task.name} shift {shift} {phase_share:.0%}"
                        )
    for label, tasks in shares.items():
        warnings.warn(
            f"algorithm.critic_warmup_steps: {label} trains only its critic for more than a "
            f"quarter of the first phase ({', '.join(tasks)}); its policy stands still "
            "meanwhile: lower algorithm.critic_warmup_steps (--set) for budgets this small",
            BudgetWarning,
            stacklevel=3,
        )
    for label, phases in in_controls.items():
        warnings.warn(
            f"controls: {label}'s controls train only their critic for more than a quarter of "
            f"the phase they are scored on ({', '.join(phases)}), while its runs reach each "
            "shift with a trained critic: its re-adaptation counts the warm-up against the fresh "
            "start; --set algorithm.critic_warmup_steps=0 removes it from runs and controls alike",
            BudgetWarning,
            stacklevel=3,
        )


def _control_warmup_shares(config: Any, method: Any) -> list[tuple[int, float]]:
    """Per shift k (1-based) a control of ``config`` starts at: the share of its scored phase
    (the shift to the next one, or the budget's end) that its critic-only warm-up takes."""
    try:
        starts = shift_starts(config, method.group_size)
    except ConfigError:  # refused, naming it, when the controls are planned
        return []
    warmup = config.algorithm.critic_warmup_steps * config.rollout.batch_size
    ends = [*starts[1:], config.budget.episodes]
    return [
        (shift, warmup / (end - start))
        for shift, (start, end) in enumerate(zip(starts, ends, strict=True), start=1)
    ]


def _phases(protocol: dict[str, Any], task: str) -> int:
    """How many phases a task's budget holds (its schedule's shifts within it, plus one)."""
    from sao_online.drift_schedules import ScheduleError, load_schedule

    config = protocol["tasks"][task]["config"]
    try:
        schedule = load_schedule(config["schedule"])
        budget = config["budget"]["episodes"]
        return len(schedule.change_points(until=float(budget))) + 1
    except (ScheduleError, ValueError, KeyError, TypeError):
        return 2


def estimate_benchmark(
    plan: TierPlan,
    labels: dict[str, str],
    seeds: int,
    overrides: list[str],
    protocol: dict[str, Any],
    cores: int,
    reps: int,
    controls: bool = False,
) -> PlanEstimate:
    """The plan's time and memory (``runtime.host.plan_fit``): every task x method x seed (and
    with ``controls`` each learning run's control per shift), the warm starts not cached here,
    and the scorecard's bootstrap."""
    from sao_online.algorithms import build_method
    from sao_online.jobs.methods import method_overrides
    from sao_online.learning.warm_start import warm_start_path

    groups = []
    warm: dict[Path, float] = {}
    for task in plan.tasks:
        for warm_start in tier_warm_starts(plan):  # each warm-start seed the tier declares
            base = task.load([*overrides, *warm_start])
            if base.model.warm_start:
                path = warm_start_path(base)
                if not (path / "warm_start.json").exists():
                    warm[path] = warm_start_prior_seconds(base)
        for spec, label in labels.items():
            own = [*method_overrides(spec), *task.method_overrides(spec)]  # a tuned suite's too
            config = task.load([*overrides, *own])
            method = build_method(config)
            starts = [0]  # the run, then its controls, each from a shift on
            if controls and label != FLOOR_METHOD:
                try:
                    starts += shift_starts(config, method.group_size)
                except ConfigError as error:
                    raise ConfigError(f"task {task.name}, {label}: {error}") from None
            for shift, start in enumerate(starts):
                part = task.load([*overrides, *own, f"budget.start={start}"]) if shift else config
                groups.append(
                    RunGroup(
                        name=f"{task.name} {label}" + (f" control {shift}" if shift else ""),
                        config=config,
                        weight=method_weight(method),
                        uses_critic=method.uses_critic,
                        updates_policy=method.updates_policy,
                        runs=seeds,
                        cpus=task.cpus,
                        share=run_episodes_of(part) / config.budget.episodes,
                    )
                )
    phases = {task.name: _phases(protocol, task.name) for task in plan.tasks}
    families: dict[str, int] = {}
    for task in plan.tasks:
        families[task.family] = families.get(task.family, 0) + phases[task.name] * seeds
    bootstrap = Bootstrap(
        reps=reps,
        scores=sum(phases.values()) * seeds,
        stratum=max(families.values(), default=0),
    )
    return estimate_plan(
        groups, cores=cores, extra_cpu_seconds=sum(warm.values()), bootstrap=bootstrap
    )


def prepare_benchmark(
    *,
    out: str | Path,
    suite: str | Path = "core",
    tier: str = "smoke",
    methods: list[str] | None = None,
    seeds: int | None = None,
    first_seed: int | None = None,
    overrides: list[str] | None = None,
    backend: str = "local",
    address: str | None = None,
    parallel: int | None = None,
    reps: int = 2000,
    warm_starts: str | Path | None = None,
    controls: bool | None = None,
) -> PreparedBenchmark:
    """Check every input of a benchmark and plan it; write nothing, start no run.

    ``controls`` (default: the tier's ``controls``) plans a re-adaptation control per learning
    run and shift.

    Raises:
        ConfigError: the first input that is wrong or too large (named: the option, the suite's
            field, the task, the method).
    """
    check_run_options(
        seeds=seeds,
        first_seed=first_seed,
        backend=backend,
        address=address,
        parallel=parallel,
        reps=reps,
    )
    overrides = list(overrides or [])
    plan = plan_tier(suite, tier)
    if overrides:  # every task must still load with them
        for task in plan.tasks:
            try:
                task.load(overrides)
            except ConfigError as error:
                raise ConfigError(f"--set: task {task.name}: {error}") from None
    seeds = plan.seeds if seeds is None else seeds
    first_seed = plan.first_seed if first_seed is None else first_seed
    if first_seed + seeds - 1 > MAX_SEED:
        raise ConfigError(
            f"--first-seed: seeds {first_seed}..{first_seed + seeds - 1} pass the largest seed, "
            f"{MAX_SEED}"
        )
    tuned_on = sorted(
        set(range(first_seed, first_seed + seeds)) & set((plan.tuned or {}).get("seeds", []))
    )
    if tuned_on:
        raise ConfigError(
            f"--seeds/--first-seed: this suite's settings were tuned (in "
            f"{plan.tuned.get('from')}) on seeds {', '.join(map(str, tuned_on))} among these: "
            "evaluate on others"
        )
    specs = method_specs(methods, plan)
    _check_plugins(plan, specs, overrides)
    labels = method_labels(plan, specs, overrides)
    protocol = protocol_of(plan, labels, overrides)
    cores = max(1, parallel or usable_cores())
    controls = plan.controls if controls is None else controls
    estimate = estimate_benchmark(
        plan, labels, seeds, overrides, protocol, cores, reps, controls=controls
    )
    check_plan_fits(
        estimate,
        PlanFlags(
            runs="--seeds",
            size="the tasks' budget.episodes and model (--set)" if overrides else "--tier",
            parallel="--parallel",
            reps="--reps",
        ),
    )
    warn_about_budgets(plan, labels, overrides, controls)  # a plan that runs: what it misses
    return PreparedBenchmark(
        out=Path(out),
        plan=plan,
        labels=labels,
        seeds=list(range(first_seed, first_seed + seeds)),
        overrides=overrides,
        protocol=protocol,
        backend=backend,
        address=address,
        cores=cores,
        reps=reps,
        estimate=estimate,
        warm_starts=warm_starts,
        controls=controls,
    )
