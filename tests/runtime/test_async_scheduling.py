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

import pytest
from scheduler_fakes import (
    MAX_POLLS,
    RandomPool,
    RecordingLoop,
    make_config,
    run_schedule,
    scripted_run,
    trained_at,
    trajectory,
    waits,
)

import sao_online.runtime.scheduling.async_runtime as async_runtime
from sao_online.runtime.scheduling.async_runtime import AsyncRuntime

pytestmark = pytest.mark.usefixtures("fake_dropped_rows")


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


def test_a_worker_that_holds_episodes_and_goes_silent_is_restarted():
    """A worker hung outside any env call (which has its own deadline) once stalled the run
    forever: every wait of the runtime on its workers now has a deadline too."""
    clock = [0.0]
    config = make_config(budget=8, batch_size=2, max_staleness=1, workers=2, step_timeout=30.0)
    loop = RecordingLoop(config, group_size=1)
    pool = SilentWorkerPool(clock)
    runtime = AsyncRuntime(loop, pool, clock=lambda: clock[0])
    runtime.start()
    with pytest.warns(async_runtime.HungWorkerWarning, match=r"rollout worker 0 held \d+ episode"):
        for _ in range(MAX_POLLS):
            if runtime.finished:
                break
            runtime.step(timeout=0.0)
    assert runtime.finished and pool.launches.count(0) == 2 and runtime.restarts == 1
    # Restarted once it had been silent for more than step_timeout + the grace, not before.
    limit = 30.0 + async_runtime.WORKER_SILENCE_GRACE_SECONDS
    assert limit < clock[0] <= limit + 200.0
    plans = sorted(plan.group_id for plan, *_ in loop.trained)
    assert plans == list(range(8))  # every episode trained once, the silent worker's re-run
