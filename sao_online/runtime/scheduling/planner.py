"""Which episodes start next: prompt and group ids, seeds, and the run clock's reading.

The runtime owns one clock per run (the schedule's ``clock``):

- ``episodes`` (default): the planner is the clock. An episode started when t episodes had
  started before it sees ``schedule.at(t)``. A group (G rollouts of one prompt) shares one seed
  and one theta, read at the clock value of its first member; the clock then advances by G, so
  methods are compared at matched episode counts. A group whose members' readings
  [t, t + G - 1] contain a change point is flagged as straddling it. With ``per_prompt``
  (``budget.match: prompts``) the clock reads the prompts started instead and the budget counts
  prompts: group k reads t = k, whatever G, so methods are compared at matched prompts.
- ``steps`` (env steps of the episodes trained on so far), ``versions`` (the learner's version)
  and ``seconds`` (wall time of the run, resumed sessions added up): the planner reads the
  clock when it plans a group; the training loop moves it (``TrainingLoop``). Every member of a
  group gets that reading; a group is flagged as straddling when a change point falls between
  that reading and the clock's reading when the whole group reaches the learner.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from sao_online.config import ExperimentConfig
from sao_online.drift_schedules import DriftState, Schedule
from sao_online.drift_schedules.clocks import Clock


@dataclass(frozen=True)
class EpisodePlan:
    """Everything needed to start one episode anywhere (picklable).

    ``attempt`` counts how often the episode was issued again after it was lost (a worker
    fault) or stopped as a straggler (``runtime.stragglers: requeue``): 0 the first time. A run
    again keeps the prompt (the same ``seed``); only what depends on the attempt, such as
    simulated env latency, is drawn afresh.
    """

    prompt_id: int
    group_id: int
    seed: int
    world_time: float
    state: DriftState
    straddles_change: bool = False
    evaluation: bool = False
    attempt: int = 0

    def again(self) -> EpisodePlan:
        """The same episode, to be run once more (the next attempt)."""
        return replace(self, attempt=self.attempt + 1)

    @property
    def reset_options(self) -> dict[str, Any]:
        return {"drift": dict(self.state.theta), "phase": self.state.phase}


def plan_to_dict(plan: EpisodePlan) -> dict[str, Any]:
    """A plan as plain data (checkpoints are JSON: nothing in them can name code to run)."""
    return asdict(plan)


def plan_from_dict(data: dict[str, Any]) -> EpisodePlan:
    """The plan ``plan_to_dict`` wrote.

    Raises:
        ValueError: the data is not a plan's fields.
    """
    try:
        state = DriftState(phase=int(data["state"]["phase"]), theta=dict(data["state"]["theta"]))
        return EpisodePlan(
            prompt_id=int(data["prompt_id"]),
            group_id=int(data["group_id"]),
            seed=int(data["seed"]),
            world_time=float(data["world_time"]),
            state=state,
            straddles_change=bool(data["straddles_change"]),
            evaluation=bool(data["evaluation"]),
            attempt=int(data.get("attempt", 0)),  # absent in checkpoints of older versions
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"checkpoint: malformed pending episode plan ({error})") from None


def run_episodes(budget: int, group_size: int, *, match: str, start: int = 0) -> int:
    """The episodes a run spends: ``budget`` (episodes, or prompts with ``match`` 'prompts'),
    from the clock reading ``start``, in whole groups of ``group_size``.

    Example:
        >>> run_episodes(600, 4, match="prompts", start=400)
        800
    """
    if match == "prompts":
        return max(0, budget - start) * group_size
    left = max(0, budget - start)
    return left - left % group_size


def run_episodes_of(config: ExperimentConfig) -> int:
    """The episodes a run of ``config`` spends (its method's group size, ``budget.match`` and
    ``budget.start`` counted)."""
    from sao_online.algorithms import build_method

    budget = config.budget
    group_size = build_method(config).group_size
    return run_episodes(budget.episodes, group_size, match=budget.match, start=budget.start)


@dataclass
class EpisodePlanner:
    """Hands out groups of episode plans in a fixed, seeded order.

    Args:
        schedule: the run's drift schedule.
        group_size: rollouts per prompt (1 for SAO).
        seed: run seed; episode seeds are drawn from it.
        clock: the run clock for schedules on steps, versions or seconds (None, or an
            episodes clock: the planner counts episodes itself).
        per_prompt: the budget counts prompts and the episodes clock reads prompts started
            (``budget.match: prompts``).
    """

    schedule: Schedule
    group_size: int
    seed: int
    clock: Clock | None = None
    per_prompt: bool = False
    episodes_started: int = 0
    groups_started: int = 0

    def __post_init__(self) -> None:
        if self.per_prompt and not self.counts_episodes:
            raise ValueError(
                "budget.match: 'prompts' needs a schedule on the episodes clock, not "
                f"{self.clock.name}"
            )

    @property
    def counts_episodes(self) -> bool:
        """Whether the run's clock is the episode count (kept by the planner itself)."""
        return self.clock is None or self.clock.name == "episodes"

    def start_at(self, t: int) -> None:
        """Start the run at the episodes clock's reading ``t``: its first group is the one a run
        from 0 starts there (the same prompt and regime), and the budget it spends runs on from
        ``t``. Call it before the first group (``budget.start``).

        Raises:
            ValueError: a clock other than episodes, or ``t`` inside a group (not a multiple of
                the group size when the clock counts episodes).
        """
        if not self.counts_episodes:
            raise ValueError(f"budget.start: needs the episodes clock, not {self.clock.name}")
        if self.per_prompt:
            self.groups_started, self.episodes_started = t, t * self.group_size
            return
        if t % self.group_size:
            raise ValueError(
                f"budget.start: {t} falls inside a group of {self.group_size}; start at a "
                "multiple of the group size"
            )
        self.groups_started, self.episodes_started = t // self.group_size, t

    def episodes_to_run(self, budget: int) -> int:
        """The episodes a run started now runs to spend ``budget`` (episodes, or prompts when
        ``per_prompt``) in whole groups."""
        return run_episodes(
            budget,
            self.group_size,
            match="prompts" if self.per_prompt else "episodes",
            start=self.groups_started if self.per_prompt else self.episodes_started,
        )

    def now(self) -> float:
        """The reading the next group would get."""
        if not self.counts_episodes:
            return self.clock.now()
        return float(self.groups_started if self.per_prompt else self.episodes_started)

    def can_start_group(self, budget: int) -> bool:
        """Whether a whole next group still fits in the budget (never exceeded): episodes, or
        prompts when ``per_prompt``."""
        if self.per_prompt:
            return self.groups_started + 1 <= budget
        return self.episodes_started + self.group_size <= budget

    def next_group(self) -> list[EpisodePlan]:
        """The next group's plans (one plan for single-rollout methods)."""
        t = self.now()
        state = self.schedule.at(t)
        straddles = False
        if self.counts_episodes and not self.per_prompt and self.group_size > 1:
            last = t + self.group_size - 1
            straddles = any(t < cp <= last for cp in self.schedule.change_points(until=last))
        group_id = self.groups_started
        episode_seed = int(np.random.default_rng([self.seed, group_id]).integers(2**31 - 1))
        plans = [
            EpisodePlan(
                prompt_id=group_id,
                group_id=group_id,
                seed=episode_seed,
                world_time=t,
                state=state,
                straddles_change=straddles,
            )
            for _ in range(self.group_size)
        ]
        self.groups_started += 1
        self.episodes_started += self.group_size
        return plans

    def straddles(self, plan: EpisodePlan) -> bool:
        """Whether ``plan``'s group straddles a change point, asked when it reaches the learner."""
        if self.counts_episodes:
            return plan.straddles_change
        now = self.clock.now()
        return any(
            plan.world_time < point <= now for point in self.schedule.change_points(until=now)
        )

    def state_dict(self) -> dict[str, Any]:
        return {"episodes_started": self.episodes_started, "groups_started": self.groups_started}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.episodes_started = int(state["episodes_started"])
        self.groups_started = int(state["groups_started"])
