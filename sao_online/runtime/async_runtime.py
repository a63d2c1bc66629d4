"""The asynchronous runtime: admission, the group barrier and the learner, over any worker pool.

Roles:

- The main process owns the planner (the run's episode clock), the ``StalenessGate`` and the
  learner. Whenever the gate has room it admits plans and hands them to the least-loaded
  worker, remembering which worker holds which plan (a "ticket") and the learner version at
  admission.
- Workers (``rollout_worker.run_rollout_worker`` inside a process or a Ray actor; see
  ``WorkerPool``) sample with the newest published weights and return each trajectory as soon as
  it completes. No episode starts on weights older than the version it was admitted at; with
  ``runtime.in_flight_updates`` workers also take newer weights between decoding steps.
- Staleness: SAO trains on the first B completed trajectories; group methods buffer members
  until the whole group is in. Because a slow episode could otherwise be overtaken, the learner
  also waits before a step that would push any admitted episode past ``max_staleness`` and
  trains such "due" episodes first. With ``max_staleness`` 0 this is the synchronous schedule.
- Faults: a worker that dies is restarted; the plans it held are logged as dropped episodes
  (``dropped=True``, reward NaN), released from the gate and issued again, so the run still
  trains on its full budget. Ctrl-C stops the workers and saves a checkpoint that records the
  admitted-but-untrained plans; a resumed run issues them again.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from sao_online.runtime.context import dropped_episode_record
from sao_online.runtime.loop import RunInterrupted, TrainingLoop
from sao_online.runtime.planner import EpisodePlan, plan_from_dict, plan_to_dict
from sao_online.runtime.rollout_worker import Task
from sao_online.runtime.staleness import StalenessGate
from sao_online.types import Trajectory

POLL_SECONDS = 0.05
_SEED_STRIDE_WORKER = 7919  # distinct sampling streams per worker incarnation
_SEED_STRIDE_VERSION = 104729  # and per resumed session
_CHECKPOINT_KEY = "async"


class WorkerPool(Protocol):
    """How the runtime reaches its rollout workers (processes, Ray actors, ...).

    Workers are numbered 0..N-1; ``launch`` starts worker ``index`` (or replaces it, discarding
    whatever the old one held). Messages are those of ``rollout_worker.run_rollout_worker``.
    """

    def launch(self, index: int, seed: int) -> None:
        """Start worker ``index`` with a sampling stream seeded by ``seed``."""
        ...

    def submit(self, index: int, tasks: list[Task]) -> None:
        """Hand tasks to worker ``index``; a dead worker is reported by ``receive``, not here."""
        ...

    def receive(self, timeout: float) -> tuple[list[tuple[int, tuple]], set[int]]:
        """Wait up to ``timeout`` s; return (worker index, message) pairs and the dead workers."""
        ...

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Make ``model``'s weights, as ``version``, available to every worker."""
        ...

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        ...


@dataclass
class _Finished:
    """A completed trajectory waiting for training, with what admitted it."""

    trajectory: Trajectory
    plan: EpisodePlan
    admitted_version: int


def worker_slots(config: Any) -> int:
    """Engine slots per worker: its share of the (max_staleness + 1) * B episodes the gate allows
    in flight (a slot waiting for a slow environment costs nothing to decode)."""
    runtime = config.runtime
    batch_size = config.rollout.batch_size
    share = -(-(runtime.max_staleness + 1) * batch_size // runtime.num_workers)
    return min(config.rollout.num_slots, max(batch_size, share))


class AsyncRuntime:
    """Drives workers, admission, the group barrier and the learner for one run.

    Args:
        loop: the run's ``TrainingLoop`` (already restored when resuming).
        pool: the rollout workers; the runtime launches them and closes the pool at the end.
        pending_plans: admitted-but-untrained plans of an interrupted session, issued first.
    """

    def __init__(self, loop: TrainingLoop, pool: WorkerPool,
                 pending_plans: list[EpisodePlan] | None = None) -> None:
        self.loop = loop
        self.pool = pool
        self.config = loop.ctx.config
        self.num_workers = self.config.runtime.num_workers
        self.batch_size = self.config.rollout.batch_size
        self.group_size = loop.ctx.method.group_size
        self.max_staleness = self.config.runtime.max_staleness
        version = loop.ctx.learner.version
        self.gate = StalenessGate(self.batch_size, self.max_staleness)
        # Every earlier update consumed B accepted trajectories.
        self.gate.load_state_dict({"version": version, "accepted": version * self.batch_size})
        self.retry: deque[EpisodePlan] = deque(pending_plans or [])
        self.ready: list[_Finished] = []
        self.group_buffer: dict[int, list[_Finished]] = defaultdict(list)
        # Per worker: ticket -> (plan, admitted version) of the plans it holds.
        self.outstanding: list[dict[int, tuple[EpisodePlan, int]]] = [
            {} for _ in range(self.num_workers)]
        self.next_ticket = 0
        self.incarnations = 0
        self.restarts = 0
        self.dropped = 0
        self.session_version = version

    # -- workers ------------------------------------------------------------------------------

    def _launch(self, index: int) -> None:
        seed = (self.config.seed + _SEED_STRIDE_WORKER * self.incarnations
                + _SEED_STRIDE_VERSION * self.session_version)
        self.incarnations += 1
        self.pool.launch(index, seed)

    def _replace_dead_worker(self, index: int) -> None:
        """Drop the dead worker's plans (logged, released, issued again) and start another."""
        self.restarts += 1
        if self.restarts > 10 * self.num_workers:
            raise RuntimeError(f"rollout workers died {self.restarts} times; giving up")
        rows = []
        for plan, _ in self.outstanding[index].values():
            self.gate.finish(1, accepted=False)
            rows.append(dropped_episode_record(self.config, plan, self.loop.episodes_logged,
                                               wall_time=self.loop.wall_time()))
            self.loop.episodes_logged += 1
            self.retry.append(plan)
        self.outstanding[index] = {}
        self.dropped += len(rows)
        if rows:
            self.loop.log.log("episodes", rows)
        self._launch(index)

    # -- admission ----------------------------------------------------------------------------

    def _admit(self) -> None:
        planner = self.loop.ctx.planner
        budget = self.config.budget.episodes
        version = self.loop.ctx.learner.version
        assigned: dict[int, list[Task]] = defaultdict(list)
        while True:
            if self.retry:
                needed = 1
            elif planner.can_start_group(budget):
                needed = self.group_size
            else:
                break
            if not self.gate.try_acquire(needed):
                break
            plans = [self.retry.popleft()] if self.retry else planner.next_group()
            for plan in plans:
                index = min(range(self.num_workers), key=lambda k: len(self.outstanding[k]))
                ticket = self.next_ticket
                self.next_ticket += 1
                self.outstanding[index][ticket] = (plan, version)
                assigned[index].append((ticket, plan, version))
        for index, tasks in assigned.items():
            self.pool.submit(index, tasks)

    # -- results ------------------------------------------------------------------------------

    def _collect(self, timeout: float) -> None:
        messages, dead = self.pool.receive(timeout)
        # A worker's last results (or its error report) count even if it died after sending them.
        for index, message in messages:
            self._handle(index, message)
        for index in sorted(dead):
            self._replace_dead_worker(index)

    def _handle(self, index: int, message: tuple) -> None:
        if message[0] == "error":
            raise RuntimeError(f"rollout worker {index} failed:\n{message[1]}")
        _, ticket, trajectory = message
        if ticket not in self.outstanding[index]:
            return  # already dropped
        plan, admitted_version = self.outstanding[index].pop(ticket)
        self.gate.finish(1, accepted=True)
        finished = _Finished(trajectory, plan, admitted_version)
        if self.group_size == 1:
            self.ready.append(finished)
            return
        members = self.group_buffer[plan.group_id]
        members.append(finished)
        if len(members) == self.group_size:  # the group barrier
            self.ready.extend(self.group_buffer.pop(plan.group_id))

    # -- training -----------------------------------------------------------------------------

    def _all_outstanding(self) -> list[tuple[EpisodePlan, int]]:
        return [entry for held in self.outstanding for entry in held.values()]

    def _next_batch(self) -> list[_Finished] | None:
        """The next batch to train on, or None when the learner must wait."""
        version = self.loop.ctx.learner.version
        # Training now makes anything admitted at or before this version staler than allowed.
        due_version = version - self.max_staleness
        outstanding = self._all_outstanding()
        buffered = [item for members in self.group_buffer.values() for item in members]
        if any(admitted <= due_version for _, admitted in outstanding):
            return None
        if any(item.admitted_version <= due_version for item in buffered):
            return None
        exhausted = (
            not outstanding
            and not self.retry
            and not self.group_buffer
            and not self.loop.ctx.planner.can_start_group(self.config.budget.episodes)
        )
        if len(self.ready) < self.batch_size and not (exhausted and self.ready):
            return None
        # Stable: oldest admission first, completion order otherwise (groups stay contiguous).
        oldest_in_group: dict[int, int] = {}
        for item in self.ready:
            group = item.plan.group_id
            oldest_in_group[group] = min(oldest_in_group.get(group, item.admitted_version),
                                         item.admitted_version)
        # A group is as old as its oldest member, so a retried member never splits its group.
        self.ready.sort(key=lambda item: oldest_in_group[item.plan.group_id])
        batch, rest = self.ready[: self.batch_size], self.ready[self.batch_size :]
        # After this batch the learner trains k more batches (versions v+1 .. v+k) before
        # anything admitted at or before due_version + k would pass the bound, so at most k B of
        # those may be left untrained, for every k up to max_staleness. Training now when that
        # fails (fresh episodes that finished first would take older ones' places) would later
        # force a batch to leave a due episode behind; wait for the stragglers instead. Checking
        # only k = 1 is not enough: with max_staleness >= 2 the older episodes pile up until no
        # batch is allowed and the gate, full, admits nothing (a deadlock).
        untrained = ([item.admitted_version for item in rest]
                     + [admitted for _, admitted in outstanding]
                     + [item.admitted_version for item in buffered])
        for k in range(1, self.max_staleness + 1):
            if sum(admitted <= due_version + k for admitted in untrained) > k * self.batch_size:
                return None
        self.ready = rest
        return batch

    def _train(self, batch: list[_Finished]) -> None:
        ctx = self.loop.ctx
        self.loop.train_on(
            [item.trajectory for item in batch],
            self.loop.straddles([item.plan for item in batch]),
            {
                "charts/ready_waiting": float(len(self.ready)),
                "charts/episodes_running": float(len(self._all_outstanding())),
                "charts/dropped_total": float(self.dropped),
                "charts/worker_restarts": float(self.restarts),
            },
        )
        self.pool.publish(ctx.policy, ctx.learner.version)
        self.gate.set_version(ctx.learner.version)
        if self.loop.checkpoint_due():
            self.loop.checkpoint(self.checkpoint_extra())

    def _finished(self) -> bool:
        return (
            not self.ready
            and not self.retry
            and not self.group_buffer
            and not self._all_outstanding()
            and not self.loop.ctx.planner.can_start_group(self.config.budget.episodes)
        )

    def checkpoint_extra(self) -> dict[str, Any]:
        """Plans admitted but not trained on yet: a resumed session issues them again."""
        pending = [plan for plan, _ in self._all_outstanding()] + list(self.retry)
        pending += [item.plan for members in self.group_buffer.values() for item in members]
        pending += [item.plan for item in self.ready]
        return {_CHECKPOINT_KEY: {"pending_plans": [plan_to_dict(plan) for plan in pending]}}

    def run(self) -> None:
        """Run until the budget is trained on; Ctrl-C leaves a resumable checkpoint."""
        try:
            for index in range(self.num_workers):
                self._launch(index)
            while not self._finished():
                self._admit()
                self._collect(POLL_SECONDS)
                while (batch := self._next_batch()) is not None:
                    self._train(batch)
                    self._admit()
            self.pool.close()
            self.loop.checkpoint(self.checkpoint_extra())
        except RunInterrupted:  # after an update: a consistent point to checkpoint
            self.pool.close()
            self.loop.checkpoint(self.checkpoint_extra())
            raise
        finally:
            self.pool.close()


def pending_plans(state: dict[str, Any] | None) -> list[EpisodePlan]:
    """The admitted-but-untrained plans recorded in a checkpoint of an asynchronous run."""
    if not state:
        return []
    return [plan_from_dict(plan) for plan in state.get(_CHECKPOINT_KEY, {}).get("pending_plans", [])]


def run_async(loop: TrainingLoop, state: dict[str, Any] | None = None) -> None:
    """Run with the config's asynchronous backend: ``local`` (worker processes) or ``ray``.

    Args:
        loop: the run's training loop (already restored when resuming).
        state: the checkpoint it was restored from; its plans admitted but not trained on are
            issued again first.
    """
    ctx = loop.ctx
    backend = ctx.config.runtime.backend
    if backend == "local":
        from sao_online.runtime.local import ProcessWorkerPool as pool_class
    elif backend == "ray":
        from sao_online.runtime.ray_backend import RayWorkerPool as pool_class
    else:
        raise ValueError(f"runtime.backend: {backend!r} is not an asynchronous backend")
    pool = pool_class(ctx.config, ctx.policy, ctx.learner.version)
    try:
        runtime = AsyncRuntime(loop, pool, pending_plans(state))
    except BaseException:
        pool.close()  # run() closes it from here on
        raise
    runtime.run()
