"""Which episodes start next: prompt and group ids, seeds, and the world clock reading.

The runtime owns one clock per run. With the default episodes clock, an episode started when
t episodes had started before it sees ``schedule.at(t)``. A group (G rollouts of one prompt)
shares one seed and one theta, read at the clock value of its first member; the clock then
advances by G, so methods are compared at matched episode counts. A group whose members' clock
readings [t, t + G - 1] contain a change point is flagged as straddling it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sao_online.drift_schedules import DriftState, Schedule


@dataclass(frozen=True)
class EpisodePlan:
    """Everything needed to start one episode anywhere (picklable)."""

    prompt_id: int
    group_id: int
    seed: int
    world_time: float
    state: DriftState
    straddles_change: bool = False
    evaluation: bool = False

    @property
    def reset_options(self) -> dict[str, Any]:
        return {"drift": dict(self.state.theta), "phase": self.state.phase}


@dataclass
class EpisodePlanner:
    """Hands out groups of episode plans in a fixed, seeded order.

    Args:
        schedule: the run's drift schedule.
        group_size: rollouts per prompt (1 for SAO).
        seed: run seed; episode seeds are drawn from it.
        clock_kind: the schedule's clock; for "episodes" the planner is the clock. Other
            clocks are read from ``external_time`` (set by the runtime before each call).
    """

    schedule: Schedule
    group_size: int
    seed: int
    clock_kind: str = "episodes"
    episodes_started: int = 0
    groups_started: int = 0
    external_time: float = 0.0

    def change_points(self, until: float) -> list[float]:
        return self.schedule.change_points(until=until)

    def can_start_group(self, budget: int) -> bool:
        """Whether a whole next group still fits in an episode budget (budgets are never exceeded)."""
        return self.episodes_started + self.group_size <= budget

    def next_group(self) -> list[EpisodePlan]:
        """The next group's plans (one plan for single-rollout methods)."""
        t = float(self.episodes_started) if self.clock_kind == "episodes" else self.external_time
        state = self.schedule.at(t)
        straddles = False
        if self.clock_kind == "episodes" and self.group_size > 1:
            last = t + self.group_size - 1
            straddles = any(t < cp <= last for cp in self.schedule.change_points(until=last))
        group_id = self.groups_started
        episode_seed = int(np.random.default_rng([self.seed, group_id]).integers(2**31 - 1))
        plans = [
            EpisodePlan(prompt_id=group_id, group_id=group_id, seed=episode_seed, world_time=t,
                        state=state, straddles_change=straddles)
            for _ in range(self.group_size)
        ]
        self.groups_started += 1
        self.episodes_started += self.group_size
        return plans

    def state_dict(self) -> dict[str, Any]:
        return {"episodes_started": self.episodes_started, "groups_started": self.groups_started}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.episodes_started = int(state["episodes_started"])
        self.groups_started = int(state["groups_started"])
