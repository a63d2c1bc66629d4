"""How the asynchronous scheduler treats stragglers under a tight bound, on scripted and
always-slow workers: counting a queued episode's staleness from the weights it started on, and
requeueing the episode the learner would wait for (``runtime.staleness_from``,
``runtime.stragglers``)."""

from __future__ import annotations

import random

import pytest
from scheduler_fakes import (
    MAX_POLLS,
    RandomPool,
    RecordingLoop,
    make_config,
    scripted_run,
    trained_at,
    trajectory,
    waits,
)

from sao_online.runtime.scheduling import stragglers
from sao_online.runtime.scheduling.async_runtime import AsyncRuntime

pytestmark = pytest.mark.usefixtures("fake_dropped_rows")


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
    for _ in range(MAX_POLLS):
        if runtime.finished:
            break
        runtime.step(timeout=0.0)
    assert runtime.finished
    assert sorted(plan.group_id for plan, *_ in loop.trained) == list(range(16))
    [slow] = [plan for plan, *_ in loop.trained if plan.group_id == 0]
    assert slow.attempt == stragglers.MAX_REQUEUES == 2
    assert [row["plan"].attempt for row in loop.logged] == [0, 1]
    assert max(trained - admitted for _, admitted, trained, _ in loop.trained) <= 1
