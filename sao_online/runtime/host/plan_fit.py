"""What a plan of runs will cost this machine, estimated from the plan before anything starts,
and the refusal of a plan the machine cannot carry.

A plan is groups of runs that cost the same (one task and method, several seeds). Its estimate:

- **time**: each run's prior CPU seconds, ``episodes x max_episode_tokens x (A + B x layers x
  hidden^2) x w`` (``w`` = 1 for a method that never updates, 2 without a critic, 4 with one;
  the constants are fitted to measured costs, ``benchmark/costs.py`` says how), times a
  speed factor the caller may have measured on this machine, spread over the cores;
- **memory**: the runs at once (as many as the cores hold, the largest first), each a process of
  about ``BASE_PROCESS_BYTES`` plus the model's weights, gradients and Adam moments (again for a
  critic), the decoding caches of its slots and the learner's logits (one more process of weights
  and caches per rollout worker on the asynchronous backends); plus the plan's own bookkeeping
  (``BOOKKEEPING_BYTES_PER_RUN`` per run: jobs, result records, tables) and, where a bootstrap
  follows, its resampled arrays.

A plan longer than ``MAX_PLAN_SECONDS`` or larger than the machine's memory is refused before
any work, naming the option that made it so: a billion seeds ended, untested, in the kernel's
out-of-memory killer, after taking every byte of a shared machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sao_online.config import ConfigError
from sao_online.util.units import format_bytes, format_duration

#: Seconds per episode token of a run of ``frozen``: a fixed part (sampling, bookkeeping) and
#: one per layers x hidden^2 (the decoding matmuls). With these four constants the priors come
#: within 30% of every complete row of ``benchmarks/lite-sizing/costs.csv`` (a test checks).
RUN_SECONDS_PER_TOKEN = 1.9e-5
RUN_SECONDS_PER_TOKEN_WEIGHT = 5.7e-10
#: Seconds per token slot of a warm start's SFT batch (steps x batch x max_episode_tokens).
WARM_START_SECONDS_PER_TOKEN = 5.0e-6
WARM_START_SECONDS_PER_TOKEN_WEIGHT = 1.38e-9
#: Seconds a run's process takes before its first episode and after its last (imports, the
#: model and environments built, the result summarised), whatever its budget: measured at 3 to
#: 8 s on a 2-core machine; without it a plan of short runs was estimated at a tenth of its time.
RUN_START_SECONDS = 6.0

#: Resident memory of a run's process before its model: the interpreter, torch, pandas, pyarrow
#: and the environments (580 MB measured for a tiny sync run, model included).
BASE_PROCESS_BYTES = 600 * 2**20
#: Memory the parent holds per planned run: the job, its result record (phases, shifts, a
#: 48-bin curve) and its rows in the result tables.
BOOKKEEPING_BYTES_PER_RUN = 64 * 2**10
#: The longest plan accepted: past it a plan is split (``--first-seed``/``--seeds``) and pooled.
MAX_PLAN_SECONDS = 30 * 86400.0
#: The ranges of the numbers a plan is given: seeds per run, the largest seed, and cores per
#: usable core (more than that many runs at once only wait for each other).
MAX_SEEDS = 10_000
MAX_SEED = 2**32 - 1
PARALLEL_PER_CORE_LIMIT = 4
#: Bytes per float of the bootstrap's arrays, and the profile's thresholds (``scores.py``).
_FLOAT_BYTES = 8
_PROFILE_TAUS = 61


def check_count(option: str, value: Any, low: int, high: int) -> int:
    """``value`` if it is an integer in ``[low, high]``, else one line naming ``option``.

    Raises:
        ConfigError: ``--seeds: must be an integer in [1, 10000], got 0``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{option}: must be an integer in [{low}, {high}], got {value!r}")
    return value


def method_weight(method: Any) -> int:
    """The prior's weight of a ``Method``: 1 never updates, 2 no critic, 4 a critic."""
    if not method.updates_policy:
        return 1
    return 4 if method.uses_critic else 2


def _model_weight(config: Any) -> int:
    return config.model.num_layers * config.model.hidden_size**2


def run_prior_seconds(config: Any, weight: int) -> float:
    """Estimated CPU seconds of a run of ``config``'s budget for a method of prior weight
    ``weight`` (the episodes alone; ``RUN_START_SECONDS`` comes on top of it)."""
    per_token = RUN_SECONDS_PER_TOKEN + RUN_SECONDS_PER_TOKEN_WEIGHT * _model_weight(config)
    return config.budget.episodes * config.rollout.max_episode_tokens * per_token * weight


def warm_start_prior_seconds(config: Any) -> float:
    """Estimated CPU seconds of building ``config``'s warm start."""
    model = config.model
    per_token = WARM_START_SECONDS_PER_TOKEN + WARM_START_SECONDS_PER_TOKEN_WEIGHT * (
        _model_weight(config)
    )
    slots = model.warm_start_steps * model.warm_start_batch_size
    return slots * config.rollout.max_episode_tokens * per_token


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a model that its memory follows."""

    parameters: int
    layers: int
    hidden: int
    vocab: int


_SIZE_IN_NAME = re.compile(r"(\d+(?:\.\d+)?)([mb])\b", re.IGNORECASE)


def model_shape(config: Any) -> ModelShape | None:
    """The policy's sizes: the tiny model's from its config (``layers x 16 hidden^2`` plus the
    byte embeddings), a model folder's from its ``config.json``, a packaged model's from the size
    in its name (``smollm2-135m``); None where none of these tells."""
    model = config.model
    if model.name == "tiny":
        vocab = 259
        layers, hidden = model.num_layers, model.hidden_size
        return ModelShape(layers * 16 * hidden**2 + vocab * hidden, layers, hidden, vocab)
    settings_file = Path(model.name) / "config.json"
    try:
        settings = json.loads(settings_file.read_text()) if settings_file.is_file() else None
    except (OSError, ValueError):
        settings = None
    if isinstance(settings, dict):
        try:
            hidden, layers = int(settings["hidden_size"]), int(settings["num_hidden_layers"])
            vocab = int(settings.get("vocab_size", 32000))
            width = int(settings.get("intermediate_size", 4 * hidden))
        except (KeyError, TypeError, ValueError):
            return None
        parameters = layers * (4 * hidden**2 + 3 * hidden * width) + vocab * hidden
        return ModelShape(parameters, layers, hidden, vocab)
    found = _SIZE_IN_NAME.search(Path(model.name).name)
    if found is None:
        return None
    parameters = int(float(found.group(1)) * (1e6 if found.group(2).lower() == "m" else 1e9))
    hidden = max(64, int((parameters / 30 / 12) ** 0.5))  # a 30-layer shape of that size
    return ModelShape(parameters, 30, hidden, 49152)


def run_memory_bytes(config: Any, uses_critic: bool, updates_policy: bool = True) -> int:
    """Estimated peak resident memory of one run of ``config`` (all of its processes)."""
    shape = model_shape(config)
    if shape is None:
        return BASE_PROCESS_BYTES
    rollout = config.rollout
    weights = shape.parameters * 4
    # Weights, gradients and Adam's two moments; the critic again; the KL's reference copy.
    learner = weights * (4 if updates_policy else 1) * (2 if uses_critic and updates_policy else 1)
    if config.regularizers.kl_coef > 0:
        learner += weights
    caches = rollout.num_slots * rollout.max_episode_tokens * shape.layers * shape.hidden * 2 * 4
    logits = rollout.batch_size * rollout.max_episode_tokens * shape.vocab * 4 * 2
    total = BASE_PROCESS_BYTES + learner + caches + logits
    if config.runtime.backend in ("local", "ray"):
        total += config.runtime.num_workers * (BASE_PROCESS_BYTES + weights + caches)
    return int(total)


def machine_memory_bytes() -> int | None:
    """This machine's memory (MemTotal, or the cgroup's limit where lower); None if unknown."""
    found: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            found.append(int(text))
    if not found and hasattr(os, "sysconf"):
        with contextlib.suppress(ValueError, OSError):
            found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return min(found) if found else None


@dataclass(frozen=True)
class RunGroup:
    """Runs that cost the same: one task and method at ``runs`` seeds.

    Attributes:
        name: how messages name it (``StyleShift sao``).
        config: the runs' config (any of its seeds).
        weight: the method's prior weight (:func:`method_weight`).
        uses_critic: whether the method trains a critic.
        updates_policy: False for a method that never updates (``frozen``).
        runs: how many runs.
        cpus: cores one run holds.
        share: the share of ``config``'s ``budget.episodes`` one run spends (more for a budget
            matched in prompts, less for a run that starts at a shift).
    """

    name: str
    config: Any
    weight: int
    uses_critic: bool
    updates_policy: bool
    runs: int
    cpus: int = 1
    share: float = 1.0


@dataclass(frozen=True)
class Bootstrap:
    """The bootstrap a plan ends with: ``reps`` resamples of ``scores`` per method (the largest
    number of scores a method has), ``stratum`` the largest stratum's."""

    reps: int
    scores: int
    stratum: int

    def bytes(self) -> int:
        per_rep = self.scores * _PROFILE_TAUS + 2 * self.stratum**2 + 2 * self.scores
        return self.reps * per_rep * _FLOAT_BYTES


@dataclass(frozen=True)
class PlanEstimate:
    """What a plan costs, by estimate (see the module)."""

    runs: int
    cpu_seconds: float
    wall_seconds: float
    cores: int
    at_once: int
    runs_memory: int
    largest_run: tuple[str, int]
    longest_run: tuple[str, float]
    bookkeeping_memory: int
    bootstrap_memory: int
    machine_memory: int | None
    notes: list[str] = field(default_factory=list)

    @property
    def memory(self) -> int:
        return self.runs_memory + self.bookkeeping_memory + self.bootstrap_memory

    def summary(self) -> str:
        """``"48 runs: about 2.5 h on 2 cores (5.0 h of CPU), at most about 3.1 GB of memory"``."""
        return (
            f"{self.runs} run{'s' if self.runs != 1 else ''}: about "
            f"{format_duration(self.wall_seconds)} on {self.cores} "
            f"core(s) ({format_duration(self.cpu_seconds)} of CPU), at most about "
            f"{format_bytes(self.memory)} of memory"
        )


def estimate_plan(
    groups: Sequence[RunGroup],
    *,
    cores: int,
    speed: float = 1.0,
    extra_cpu_seconds: float = 0.0,
    bootstrap: Bootstrap | None = None,
    machine_memory: int | None = None,
) -> PlanEstimate:
    """The time and memory ``groups`` take on ``cores`` cores.

    Args:
        groups: the plan's runs.
        cores: the cores the runs share.
        speed: measured seconds per prior second on this machine (1 where nothing is measured).
        extra_cpu_seconds: work besides the runs (warm starts to build).
        bootstrap: the bootstrap that follows the runs, if any.
        machine_memory: bytes to compare against; this machine's when None.
    """
    cores = max(1, cores)
    runs = sum(group.runs for group in groups)
    cpu = extra_cpu_seconds
    longest = ("", 0.0)
    for group in groups:
        one = run_prior_seconds(group.config, group.weight) * group.share * speed
        one += RUN_START_SECONDS
        cpu += one * group.runs
        longest = max(longest, (group.name, one), key=lambda item: item[1])
    by_size = sorted(
        (
            (run_memory_bytes(group.config, group.uses_critic, group.updates_policy), group)
            for group in groups
        ),
        key=lambda item: -item[0],
    )
    free, at_once, runs_memory = cores, 0, 0
    for memory, group in by_size:  # the largest runs first, as many as the cores hold
        if free <= 0:
            break
        count = min(group.runs, max(1, free // max(1, group.cpus)))
        at_once += count
        runs_memory += count * memory
        free -= count * max(1, group.cpus)
    largest = (by_size[0][1].name, by_size[0][0]) if by_size else ("", 0)
    return PlanEstimate(
        runs=runs,
        cpu_seconds=cpu,
        wall_seconds=cpu / cores,
        cores=cores,
        at_once=at_once,
        runs_memory=runs_memory,
        largest_run=largest,
        longest_run=longest,
        bookkeeping_memory=runs * BOOKKEEPING_BYTES_PER_RUN,
        bootstrap_memory=bootstrap.bytes() if bootstrap else 0,
        machine_memory=machine_memory if machine_memory is not None else machine_memory_bytes(),
    )


@dataclass(frozen=True)
class PlanFlags:
    """The options a refusal names for each way a plan can be too large.

    Attributes:
        runs: what multiplies the runs (``--seeds``).
        size: what sizes one run (``the task's budget.episodes and model (--set)``).
        parallel: what sets the runs at once (``--parallel``).
        reps: what sets the bootstrap (``--reps``), if there is one.
    """

    runs: str
    size: str
    parallel: str
    reps: str = "--reps"


def check_plan_fits(estimate: PlanEstimate, flags: PlanFlags) -> None:
    """Refuse a plan longer than ``MAX_PLAN_SECONDS`` or larger than the machine's memory.

    Raises:
        ConfigError: one line naming the option that made the plan too large.
    """
    what = f"{estimate.runs} run{'s' if estimate.runs != 1 else ''}"
    most = format_duration(MAX_PLAN_SECONDS)
    name, longest = estimate.longest_run
    if longest > MAX_PLAN_SECONDS:
        raise ConfigError(
            f"{flags.size}: one run of {name} takes about {format_duration(longest)} by "
            f"estimate (its episodes x tokens x model size), more than the {most} a plan may "
            "take; use a smaller model or budget"
        )
    if estimate.wall_seconds > MAX_PLAN_SECONDS:
        raise ConfigError(
            f"{flags.runs}: the plan ({what}) takes about "
            f"{format_duration(estimate.wall_seconds)} on {estimate.cores} core(s) by estimate, "
            f"more than the {most} a plan may take; lower {flags.runs}, or run the plan in parts "
            "and pool them"
        )
    limit = estimate.machine_memory
    if limit is None or estimate.memory <= limit:
        return
    have = format_bytes(limit)
    name, largest = estimate.largest_run
    if largest > limit:
        raise ConfigError(
            f"{flags.size}: one run of {name} needs about {format_bytes(largest)} of memory by "
            f"estimate, more than this machine's {have}; use a smaller model or fewer slots"
        )
    if estimate.bookkeeping_memory > max(estimate.runs_memory, estimate.bootstrap_memory):
        raise ConfigError(
            f"{flags.runs}: the plan ({what}) needs about "
            f"{format_bytes(estimate.bookkeeping_memory)} of memory to keep track of by "
            f"estimate, more than this machine's {have}; lower {flags.runs}"
        )
    if estimate.bootstrap_memory > estimate.runs_memory:
        raise ConfigError(
            f"{flags.reps}: the bootstrap needs about {format_bytes(estimate.bootstrap_memory)} "
            f"of memory by estimate, more than this machine's {have}; lower {flags.reps} (or "
            f"{flags.runs}: the bootstrap compares every pair of a family's scores)"
        )
    raise ConfigError(
        f"{flags.parallel}: {estimate.at_once} runs at once need about "
        f"{format_bytes(estimate.runs_memory)} of memory by estimate, more than this machine's "
        f"{have}; lower {flags.parallel}"
    )
