"""The asynchronous scheduler under random completion orders and worker deaths, without models.

``AsyncRuntime`` runs its real admission, collection, batching and training steps against a fake
pool whose workers start each held episode on the newest published weights and finish it with
some probability per poll (and sometimes die), and a fake training loop that only records what
it trained at which version. Every schedule must finish (no deadlock), train every planned
episode exactly once, and never train a token more than ``max_staleness`` versions after the
version that sampled it (nor, counting from admission, an episode after the version it was
admitted at), whether the learner waits for stragglers or requeues them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from types import SimpleNamespace

import pytest

import sao_online.runtime.async_runtime as async_runtime
from sao_online.runtime import stragglers
from sao_online.runtime.async_runtime import AsyncRuntime
from sao_online.runtime.rollout_worker import Interrupt


@dataclass(frozen=True)
class Plan:
    group_id: int
    member: int
    straddles_change: bool = False
    attempt: int = 0

    def again(self) -> Plan:
        return replace(self, attempt=self.attempt + 1)


_MAX_POLLS = 20_000


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
    for _ in range(_MAX_POLLS):
        if runtime.finished:
            loop.runtime = runtime
            return loop
        runtime.step(timeout=0.0)
    raise AssertionError(
        f"deadlock at version {loop.ctx.learner.version}: {len(runtime.ready)} ready, "
        f"gate capacity {runtime.gate.capacity()}"
    )


@pytest.fixture(autouse=True)
def _dropped_rows_name_their_plan(monkeypatch):
    # Dropped episodes are logged through the real row builder, which needs a real config.
    monkeypatch.setattr(
        async_runtime,
        "dropped_episode_record",
        lambda config, plan, index, **kwargs: {"plan": plan, **kwargs},
    )


SCHEDULES = [
    (8, 4, 1, 2, 0.0),  # the defaults; hung in 22 of 40 seeds when only k = 1 was checked
    (4, 3, 1, 3, 0.0),
    (8, 4, 4, 2, 0.0),  # groups
    (4, 2, 2, 3, 0.0),
    (2, 0, 1, 2, 0.0),  # the synchronous schedule
    (4, 1, 2, 3, 0.05),  # workers dying: episodes dropped and issued again
    (8, 3, 4, 3, 0.03),
]
OPTIONS = [
    {"stragglers": "wait", "staleness_from": "admission"},
    {"stragglers": "wait", "staleness_from": "tokens"},
    {"stragglers": "requeue", "staleness_from": "tokens"},
    {"stragglers": "requeue", "staleness_from": "admission"},
]


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: f"{o['stragglers']}-{o['staleness_from']}"
)
@pytest.mark.parametrize(("batch_size", "max_staleness", "group_size", "workers", "die"), SCHEDULES)
def test_random_schedules_finish_train_everything_once_and_respect_the_bound(
    batch_size, max_staleness, group_size, workers, die, options
):
    budget = 12 * batch_size
    for seed in range(12):
        loop = run_schedule(
            seed, batch_size, max_staleness, group_size, workers, budget, die, **options
        )
        plans = [(plan.group_id, plan.member) for plan, *_ in loop.trained]
        assert sorted(plans) == sorted(set(plans)) and len(plans) == budget
        # The gate counted every trained episode once and nothing else (discarded group
        # members and stopped stragglers gave their places back).
        assert loop.runtime.gate.accepted == budget and loop.runtime.gate.running == 0
        worst_token = max(trained - oldest for _, _, trained, oldest in loop.trained)
        assert worst_token <= max_staleness, (seed, worst_token)
        if options["staleness_from"] == "admission":
            worst = max(trained - admitted for _, admitted, trained, _ in loop.trained)
            assert worst <= max_staleness, (seed, worst)
        # Every dropped episode is logged once, with its reason, and was run again: the run
        # trains its budget exactly.
        reasons = [row["reason"] for row in loop.logged]
        assert reasons.count("stale") == loop.runtime.requeued
        assert len(reasons) == loop.runtime.dropped
        if options["stragglers"] == "wait":
            assert loop.runtime.requeued == 0
        dropped = {(row["plan"].group_id, row["plan"].member) for row in loop.logged}
        assert dropped <= set(plans)
        rerun = [
            plan.attempt for plan, *_ in loop.trained if (plan.group_id, plan.member) in dropped
        ]
        assert all(attempt >= 1 for attempt in rerun)


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
    monkeypatch.setattr(async_runtime, "perf_counter", lambda: clock[0])
    loop = RecordingLoop(make_config(budget=6, batch_size=2, max_staleness=1, **options), 1)
    extras = []
    train_on = loop.train_on
    monkeypatch.setattr(
        loop, "train_on", lambda t, s, extra: (extras.append(extra), train_on(t, s, extra))
    )
    runtime = AsyncRuntime(loop, ScriptedPool(script, clock))
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


@pytest.mark.parametrize("staleness_from", ["admission", "tokens"])
def test_learner_waits_are_logged_by_cause(monkeypatch, staleness_from):
    # B = 2, max_staleness 1: tickets 0-3 are admitted at version 0 and start on it. Poll 1
    # finishes 0 and 1 (update 1). Poll 2 finishes 3 and 4 while 2 is still running: two are
    # ready, but 2 is due (sampled from version 0, the learner is at 1), so the bound holds the
    # step back through polls 3 and 4 until 2 arrives. Poll 2 itself was spent waiting for
    # episodes. Counting from tokens changes nothing here: every episode started on the
    # version it was admitted at.
    loop, extras = scripted_run(
        monkeypatch,
        [[("start", 0), ("start", 1), ("start", 2), ("start", 3), 0, 1], [3, 4], [], [2], [5]],
        polls=5,
        staleness_from=staleness_from,
    )
    # Update 1: nothing was waited for before it (the first poll precedes any look at a batch).
    # Update 2 (tickets 2 and 3): 2 s held back by the bound, 1 s waiting for episodes.
    # Update 3 (tickets 4 and 5): 1 s waiting for episode 5.
    assert waits(extras) == [(0.0, 0.0), (2.0, 1.0), (0.0, 1.0)]
    assert trained_at(loop) == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2)]


@pytest.mark.parametrize(
    ("staleness_from", "second_update"), [("admission", [2, 3]), ("tokens", [3, 4])]
)
def test_an_episode_that_queued_at_its_worker_counts_from_the_weights_it_started_on(
    monkeypatch, staleness_from, second_update
):
    # As above, but ticket 2 queues at its worker and starts only in poll 2, on version 1 (the
    # learner trained 0 and 1 meanwhile). Counting from admission (version 0) the learner must
    # wait for it before update 2; counting from its tokens (version 1) it trains 3 and 4 at
    # once, and 2 stays within the bound at update 3 (sampled from 1, trained at 2).
    loop, extras = scripted_run(
        monkeypatch,
        [[("start", 0), ("start", 1), ("start", 3), 0, 1], [("start", 2), 3, 4], [], [2], [5]],
        polls=5,
        staleness_from=staleness_from,
    )
    assert sorted(plan.group_id for plan, _, v, _ in loop.trained if v == 1) == second_update
    held_back = 0.0 if staleness_from == "tokens" else 2.0
    assert waits(extras)[1] == (held_back, 1.0)
    # Tickets 2 and 5 started after the learner had moved past their admission.
    started_late = [extra["charts/episodes_started_after_admission"] for extra in extras]
    assert sum(started_late) == 2.0
    assert max(trained - oldest for _, _, trained, oldest in loop.trained) <= 1


def test_requeue_stops_the_straggler_the_learner_would_wait_for_and_runs_it_again(monkeypatch):
    # The first schedule above with stragglers requeued: in poll 2, with 3 and 4 ready, ticket 2
    # (due) gets an Interrupt and its plan is issued again (ticket 6, attempt 1) instead of
    # holding the learner back: update 2 trains 3 and 4 at once. The worker reports the
    # interrupted episode at poll 3 (its dropped row is logged then); polls 3-4 finish 5 and 6.
    loop, extras = scripted_run(
        monkeypatch,
        [[("start", 0), ("start", 1), ("start", 2), ("start", 3), 0, 1], [3, 4], [5, 6]],
        polls=3,
        stragglers="requeue",
    )
    assert waits(extras) == [(0.0, 0.0), (0.0, 1.0), (0.0, 1.0)]
    assert trained_at(loop) == [(0, 0), (1, 0), (2, 2), (3, 1), (4, 1), (5, 2)]
    rerun = next(plan for plan, *_ in loop.trained if plan.group_id == 2)
    assert rerun.attempt == 1
    # One dropped row, for the first run of plan 2, with what its worker said it spent.
    [row] = loop.logged
    assert row["plan"].group_id == 2 and row["plan"].attempt == 0
    assert row["reason"] == "stale" and row["spent"].oldest_version == 0
    assert loop.runtime.requeued == 1 and loop.runtime.dropped == 1
    assert extras[2]["charts/requeued_stale_total"] == 1.0
    assert loop.runtime.finished


class AlwaysSlowPool(RandomPool):
    """Group 0 finishes only once every other episode is done and its own run has waited five
    polls; everything else finishes at the first poll (an env that is always slow for one
    prompt)."""

    def __init__(self) -> None:
        super().__init__(random.Random(0), finish=1.0, die=0.0)
        self.age: dict[int, int] = {}

    def receive(self, timeout):
        messages = []
        for index, tasks in self.held.items():
            messages += [(index, report) for report in self.reports[index]]
            self.reports[index] = []
            still = []
            for task in tasks:
                ticket, plan, admitted, _ = task
                task[3] = admitted
                self.age[ticket] = self.age.get(ticket, 0) + 1
                slow = plan.group_id == 0 and (len(tasks) > 1 or self.age[ticket] < 5)
                if slow:
                    still.append(task)
                else:
                    messages.append((index, ("done", ticket, trajectory(plan, admitted))))
            self.held[index] = still
        return messages, set()


def test_an_episode_requeued_twice_is_waited_for_the_third_time():
    loop = RecordingLoop(
        make_config(budget=16, batch_size=2, max_staleness=1, stragglers="requeue"), 1
    )
    runtime = AsyncRuntime(loop, AlwaysSlowPool())
    runtime.start()
    for _ in range(_MAX_POLLS):
        if runtime.finished:
            break
        runtime.step(timeout=0.0)
    assert runtime.finished
    assert sorted(plan.group_id for plan, *_ in loop.trained) == list(range(16))
    [slow] = [plan for plan, *_ in loop.trained if plan.group_id == 0]
    assert slow.attempt == stragglers.MAX_REQUEUES == 2
    assert [row["plan"].attempt for row in loop.logged] == [0, 1]
    assert max(trained - admitted for _, admitted, trained, _ in loop.trained) <= 1


class SilentWorkerPool(RandomPool):
    """Worker 0's first incarnation holds its episodes and never answers (hung); every other
    worker finishes what it holds at once. Each poll takes ten fake seconds."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__(random.Random(0), finish=1.0, die=0.0)
        self.clock, self.launches = clock, []

    def launch(self, index, seed):
        super().launch(index, seed)
        self.launches.append(index)

    def receive(self, timeout):
        self.clock[0] += 10.0
        messages = []
        for index, tasks in self.held.items():
            if index == 0 and self.launches.count(0) == 1:
                continue  # hung: holds its episodes, sends nothing
            for ticket, plan, admitted, _ in tasks:
                messages.append((index, ("done", ticket, trajectory(plan, admitted))))
            self.held[index] = []
        return messages, set()


def test_a_worker_that_holds_episodes_and_goes_silent_is_restarted(monkeypatch):
    """A worker hung outside any env call (which has its own deadline) once stalled the run
    forever: every wait of the runtime on its workers now has a deadline too."""
    clock = [0.0]
    monkeypatch.setattr(async_runtime, "monotonic", lambda: clock[0])
    config = make_config(budget=8, batch_size=2, max_staleness=1, workers=2, step_timeout=30.0)
    loop = RecordingLoop(config, group_size=1)
    pool = SilentWorkerPool(clock)
    runtime = AsyncRuntime(loop, pool)
    runtime.start()
    with pytest.warns(async_runtime.HungWorkerWarning, match=r"rollout worker 0 held \d+ episode"):
        for _ in range(_MAX_POLLS):
            if runtime.finished:
                break
            runtime.step(timeout=0.0)
    assert runtime.finished and pool.launches.count(0) == 2 and runtime.restarts == 1
    # Restarted once it had been silent for more than step_timeout + the grace, not before.
    limit = 30.0 + async_runtime.WORKER_SILENCE_GRACE_SECONDS
    assert limit < clock[0] <= limit + 200.0
    plans = sorted(plan.group_id for plan, *_ in loop.trained)
    assert plans == list(range(8))  # every episode trained once, the silent worker's re-run
