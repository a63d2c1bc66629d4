"""The asynchronous scheduler under random completion orders and worker deaths, without models.

``AsyncRuntime`` runs its real admission, collection, batching and training steps against a fake
pool whose workers finish each held episode with some probability per poll (and sometimes die),
and a fake training loop that only records what it trained at which version. Every schedule
must finish (no deadlock), train every planned episode exactly once, and never train an episode
more than ``max_staleness`` versions after the version it was admitted at.
"""

from __future__ import annotations

import random
from collections import namedtuple
from types import SimpleNamespace

import pytest

import sao_online.runtime.async_runtime as async_runtime
from sao_online.runtime.async_runtime import AsyncRuntime

Plan = namedtuple("Plan", "group_id member straddles_change")
_MAX_POLLS = 20_000


class Planner:
    def __init__(self, group_size: int) -> None:
        self.group_size, self.started, self.groups = group_size, 0, 0

    def can_start_group(self, budget: int) -> bool:
        return self.started + self.group_size <= budget

    def next_group(self) -> list[Plan]:
        group, self.groups = self.groups, self.groups + 1
        self.started += self.group_size
        return [Plan(group, member, False) for member in range(self.group_size)]


class RecordingLoop:
    """Trains by recording (plan, admitted version, trained version); moves the version."""

    def __init__(self, config: SimpleNamespace, group_size: int) -> None:
        self.ctx = SimpleNamespace(
            config=config,
            method=SimpleNamespace(group_size=group_size),
            learner=SimpleNamespace(version=0),
            planner=Planner(group_size),
            policy=None,
        )
        self.log = SimpleNamespace(log=lambda table, rows: None)
        self.episodes_logged = 0
        self.trained: list[tuple[Plan, int, int]] = []

    def wall_time(self) -> float:
        return 0.0

    def straddles(self, plans):
        return {}

    def train_on(self, trajectories, straddles, extra):
        for trajectory in trajectories:
            self.trained.append((trajectory.plan, trajectory.admitted, self.ctx.learner.version))
        self.ctx.learner.version += 1

    def checkpoint_due(self) -> bool:
        return False


class RandomPool:
    """Workers that finish each episode they hold with probability ``finish`` per poll."""

    def __init__(self, rng: random.Random, finish: float, die: float) -> None:
        self.rng, self.finish, self.die = rng, finish, die
        self.held: dict[int, list] = {}

    def launch(self, index, seed):
        self.held[index] = []

    def submit(self, index, tasks):
        self.held[index].extend(tasks)

    def receive(self, timeout):
        messages, dead = [], set()
        for index, tasks in self.held.items():
            if tasks and self.rng.random() < self.die:
                dead.add(index)
                continue
            still = []
            for ticket, plan, admitted in tasks:
                if self.rng.random() < self.finish:
                    trajectory = SimpleNamespace(
                        plan=plan, admitted=admitted, group_id=plan.group_id
                    )
                    messages.append((index, ("done", ticket, trajectory)))
                else:
                    still.append((ticket, plan, admitted))
            self.held[index] = still
        return messages, dead

    def publish(self, model, version):
        pass

    def close(self):
        pass


def run_schedule(
    seed: int,
    batch_size: int,
    max_staleness: int,
    group_size: int,
    workers: int,
    budget: int,
    die: float = 0.0,
) -> RecordingLoop:
    rng = random.Random(seed)
    config = SimpleNamespace(
        seed=0,
        budget=SimpleNamespace(episodes=budget),
        rollout=SimpleNamespace(batch_size=batch_size),
        runtime=SimpleNamespace(num_workers=workers, max_staleness=max_staleness),
    )
    loop = RecordingLoop(config, group_size)
    runtime = AsyncRuntime(loop, RandomPool(rng, finish=rng.uniform(0.05, 0.5), die=die))
    runtime.start()
    for _ in range(_MAX_POLLS):
        if runtime.finished:
            return loop
        runtime.step(timeout=0.0)
    raise AssertionError(
        f"deadlock at version {loop.ctx.learner.version}: {len(runtime.ready)} ready, "
        f"gate capacity {runtime.gate.capacity()}"
    )


@pytest.fixture(autouse=True)
def _no_dropped_rows(monkeypatch):
    # Dropped episodes are logged through the real row builder, which needs a real config.
    monkeypatch.setattr(async_runtime, "dropped_episode_record", lambda *args, **kwargs: {})


@pytest.mark.parametrize(
    ("batch_size", "max_staleness", "group_size", "workers", "die"),
    [
        (8, 4, 1, 2, 0.0),  # the defaults; hung in 22 of 40 seeds when only k = 1 was checked
        (4, 3, 1, 3, 0.0),
        (8, 4, 4, 2, 0.0),  # groups
        (4, 2, 2, 3, 0.0),
        (2, 0, 1, 2, 0.0),  # the synchronous schedule
        (4, 1, 2, 3, 0.05),  # workers dying: episodes dropped and issued again
        (8, 3, 4, 3, 0.03),
    ],
)
def test_random_schedules_finish_train_everything_once_and_respect_the_bound(
    batch_size, max_staleness, group_size, workers, die
):
    budget = 12 * batch_size
    for seed in range(25):
        loop = run_schedule(seed, batch_size, max_staleness, group_size, workers, budget, die)
        plans = [(plan.group_id, plan.member) for plan, _, _ in loop.trained]
        assert sorted(plans) == sorted(set(plans)) and len(plans) == budget
        worst = max(trained - admitted for _, admitted, trained in loop.trained)
        assert worst <= max_staleness, (seed, worst)
