"""Fakes for driving ``AsyncRuntime`` without models: plans, a planner, a training loop that
records what it trained at which version, and worker pools that finish episodes at random or as
a script says. Used by ``test_async_scheduling`` and ``test_straggler_scheduling``."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from types import SimpleNamespace

from sao_online.runtime.scheduling.async_runtime import AsyncRuntime
from sao_online.runtime.workers.rollout_worker import Interrupt


@dataclass(frozen=True)
class Plan:
    group_id: int
    member: int
    straddles_change: bool = False
    attempt: int = 0

    def again(self) -> Plan:
        return replace(self, attempt=self.attempt + 1)


MAX_POLLS = 20_000


def make_config(
    *,
    budget: int,
    batch_size: int,
    max_staleness: int,
    workers: int = 1,
    stragglers: str = "wait",
    staleness_from: str = "tokens",
    step_timeout: float = 600.0,
) -> SimpleNamespace:
    return SimpleNamespace(
        seed=0,
        budget=SimpleNamespace(episodes=budget),
        rollout=SimpleNamespace(batch_size=batch_size),
        runtime=SimpleNamespace(
            num_workers=workers,
            max_staleness=max_staleness,
            stragglers=stragglers,
            staleness_from=staleness_from,
        ),
        env=SimpleNamespace(step_timeout=step_timeout),
    )


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
    """Trains by recording (plan, admitted version, trained version, oldest token version);
    moves the version. Logged rows (dropped episodes) are kept in ``logged``."""

    def __init__(self, config: SimpleNamespace, group_size: int) -> None:
        self.ctx = SimpleNamespace(
            config=config,
            method=SimpleNamespace(group_size=group_size),
            learner=SimpleNamespace(version=0),
            planner=Planner(group_size),
            policy=None,
        )
        self.logged: list[dict] = []
        self.log = SimpleNamespace(log=lambda table, rows: self.logged.extend(rows))
        self.episodes_logged = 0
        self.trained: list[tuple[Plan, int, int, int]] = []

    def wall_time(self) -> float:
        return 0.0

    def straddles(self, plans):
        return {}

    def train_on(self, trajectories, straddles, extra):
        version = self.ctx.learner.version
        for trajectory in trajectories:
            self.trained.append(
                (trajectory.plan, trajectory.admitted, version, trajectory.oldest_version)
            )
        self.ctx.learner.version += 1

    def checkpoint_due(self) -> bool:
        return False


def trajectory(plan, admitted, oldest_version=None):
    oldest = admitted if oldest_version is None else oldest_version
    return SimpleNamespace(
        plan=plan, admitted=admitted, group_id=plan.group_id, oldest_version=oldest
    )


class RandomPool:
    """Workers that start each held episode on the newest published weights (reporting it) and
    then finish it with probability ``finish`` per poll; an interrupt stops an episode at once."""

    def __init__(self, rng: random.Random, finish: float, die: float) -> None:
        self.rng, self.finish, self.die = rng, finish, die
        self.held: dict[int, list] = {}  # index -> [ticket, plan, admitted, started version]
        self.reports: dict[int, list] = {}  # index -> messages owed at the next poll
        self.version = 0

    def launch(self, index, seed):
        self.held[index], self.reports[index] = [], []

    def submit(self, index, orders):
        for order in orders:
            if isinstance(order, Interrupt):
                stopped = [task for task in self.held[index] if task[0] == order.ticket]
                self.held[index] = [task for task in self.held[index] if task[0] != order.ticket]
                for ticket, plan, admitted, started in stopped:
                    spent = None if started is None else trajectory(plan, admitted, started)
                    self.reports[index].append(("interrupted", ticket, spent))
            else:
                self.held[index].append([*order, None])

    def receive(self, timeout):
        messages, dead = [], set()
        for index, tasks in self.held.items():
            if tasks and self.rng.random() < self.die:
                dead.add(index)
                continue
            messages += [(index, report) for report in self.reports[index]]
            self.reports[index] = []
            still = []
            for task in tasks:
                ticket, plan, admitted, started = task
                if started is None:
                    task[3] = started = self.version
                    messages.append((index, ("started", ticket, started)))
                if self.rng.random() < self.finish:
                    messages.append((index, ("done", ticket, trajectory(plan, admitted, started))))
                else:
                    still.append(task)
            self.held[index] = still
        return messages, dead

    def publish(self, model, version):
        self.version = version

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
    **options,
) -> RecordingLoop:
    rng = random.Random(seed)
    config = make_config(
        budget=budget,
        batch_size=batch_size,
        max_staleness=max_staleness,
        workers=workers,
        **options,
    )
    loop = RecordingLoop(config, group_size)
    runtime = AsyncRuntime(loop, RandomPool(rng, finish=rng.uniform(0.05, 0.5), die=die))
    runtime.start()
    for _ in range(MAX_POLLS):
        if runtime.finished:
            loop.runtime = runtime
            return loop
        runtime.step(timeout=0.0)
    raise AssertionError(
        f"deadlock at version {loop.ctx.learner.version}: {len(runtime.ready)} ready, "
        f"gate capacity {runtime.gate.capacity()}"
    )


class ScriptedPool(RandomPool):
    """At each poll: the tickets the script names as ("start", t) start on the newest weights,
    those named as t finish (starting first if they had not); each poll takes one fake second.
    Interrupted episodes are reported at the next poll."""

    def __init__(self, script: list[list], clock: list[float]) -> None:
        super().__init__(random.Random(0), finish=0.0, die=0.0)
        self.script, self.clock = script, clock

    def receive(self, timeout):
        self.clock[0] += 1.0
        events = self.script.pop(0) if self.script else []
        starting = {event[1] for event in events if isinstance(event, tuple)}
        finishing = {event for event in events if not isinstance(event, tuple)}
        messages = []
        for index, tasks in self.held.items():
            messages += [(index, report) for report in self.reports[index]]
            self.reports[index] = []
            for task in tasks:
                ticket, plan, admitted, started = task
                if started is None and ticket in starting | finishing:
                    task[3] = self.version
                    messages.append((index, ("started", ticket, self.version)))
                if ticket in finishing:
                    messages.append((index, ("done", ticket, trajectory(plan, admitted, task[3]))))
            self.held[index] = [task for task in tasks if task[0] not in finishing]
        return messages, set()


def scripted_run(monkeypatch, script, polls, **options):
    """Runs ``polls`` scheduling rounds on a scripted pool; returns the loop and each update's
    extra metrics."""
    clock = [0.0]
    loop = RecordingLoop(make_config(budget=6, batch_size=2, max_staleness=1, **options), 1)
    extras = []
    train_on = loop.train_on
    monkeypatch.setattr(
        loop, "train_on", lambda t, s, extra: (extras.append(extra), train_on(t, s, extra))
    )
    runtime = AsyncRuntime(loop, ScriptedPool(script, clock), clock=lambda: clock[0])
    runtime.start()
    for _ in range(polls):
        runtime.step(timeout=0.0)
    loop.runtime = runtime
    return loop, extras


def waits(extras):
    return [
        (extra["charts/learner_wait_bound_seconds"], extra["charts/learner_wait_episodes_seconds"])
        for extra in extras
    ]


def trained_at(loop):
    return sorted((plan.group_id, version) for plan, _, version, _ in loop.trained)
