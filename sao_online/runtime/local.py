"""The ``local`` runtime: rollout workers in processes, the learner in the main process.

Roles:

- The main process owns the planner (the run's episode clock), the ``StalenessGate`` and the
  learner. Whenever the gate has room it admits plans and hands them to the least-loaded
  worker, remembering which worker holds which plan (a "ticket") and the learner version at
  admission.
- Each worker (spawn context, one torch thread) builds its own policy and engine, copies the
  published weights from shared memory (``SharedWeights``) and runs its plans with continuous
  batching, sending each trajectory back as soon as it completes.
- Weights: with ``runtime.in_flight_updates`` a worker takes a newer version between decoding
  steps (tokens carry the version that sampled them); without it only while its engine is idle.
  Either way no episode starts on weights older than the version it was admitted at.
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

import contextlib
import multiprocessing.connection
import pickle
import queue
import signal
import threading
import time
import traceback
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.multiprocessing

from sao_online.config import load_config
from sao_online.pretrain import base_policy
from sao_online.rollout import RolloutEngine
from sao_online.runtime.context import build_engine, dropped_episode_record, plan_to_request
from sao_online.runtime.loop import RunInterrupted, TrainingLoop
from sao_online.runtime.planner import EpisodePlan
from sao_online.runtime.staleness import StalenessGate
from sao_online.runtime.weights import SharedWeights
from sao_online.types import Trajectory

_POLL_SECONDS = 0.05
_STOP_JOIN_SECONDS = 3.0
_SEED_STRIDE_WORKER = 7919  # distinct sampling streams per worker incarnation
_SEED_STRIDE_VERSION = 104729  # and per resumed session


# ------------------------------------------------------------------------------------- worker


def _worker_main(
    incarnation: int,
    seed: int,
    config_dict: dict[str, Any],
    weights: SharedWeights,
    tasks: Any,
    results: Any,
    stop: Any,
    in_flight: bool,
    num_slots: int,
) -> None:
    """Body of one rollout-worker process (module level so spawn can import it).

    Receives pickled lists of (ticket, plan, admitted_version) on ``tasks``; sends pickled
    ("done", ticket, trajectory) or ("error", text) on ``results`` through a sender thread so a
    busy learner never stalls decoding.
    """
    # Ctrl-C reaches the whole process group; only the main process reacts to it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    outbox: queue.Queue[bytes | None] = queue.Queue()

    def send_all() -> None:
        while (message := outbox.get()) is not None:
            try:
                results.send_bytes(message)
            except OSError:  # the main process is gone
                return

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    try:
        config = load_config(config_dict)
        policy, tokenizer = base_policy(config)
        policy.eval()
        engine = build_engine(config, policy, tokenizer, seed=seed, num_slots=num_slots)
        engine.policy_version = weights.load_into(policy)
        queued: deque[tuple[int, EpisodePlan, int]] = deque()
        tickets_by_group: dict[int, deque[int]] = defaultdict(deque)
        running = 0

        def refresh(current: RolloutEngine) -> None:
            if weights.version > current.policy_version:
                current.policy_version = weights.load_into(policy)

        def source():
            nonlocal running
            if stop.is_set():
                return None
            if not queued and tasks.poll(_POLL_SECONDS if running == 0 else 0):
                queued.extend(pickle.loads(tasks.recv_bytes()))
            if not queued:
                return None
            ticket, plan, admitted_version = queued[0]
            if admitted_version > engine.policy_version:
                if in_flight or running == 0:
                    refresh(engine)
                if admitted_version > engine.policy_version:
                    return None  # in-flight updates off: wait until the running episodes end
            queued.popleft()
            tickets_by_group[plan.group_id].append(ticket)
            running += 1
            return plan_to_request(config, plan)

        if in_flight:
            engine.on_decode_step = refresh
        while not stop.is_set():
            for trajectory in engine.run(source):
                running -= 1
                ticket = tickets_by_group[trajectory.group_id].popleft()
                outbox.put(pickle.dumps(("done", ticket, trajectory)))
                if stop.is_set():
                    break
    except BaseException:  # noqa: BLE001  (report anything, then exit non-zero)
        outbox.put(pickle.dumps(("error", f"worker {incarnation}:\n{traceback.format_exc()}")))
        outbox.put(None)
        sender.join(timeout=_STOP_JOIN_SECONDS)
        raise SystemExit(1) from None
    outbox.put(None)
    sender.join(timeout=_STOP_JOIN_SECONDS)


# --------------------------------------------------------------------------------------- main


@dataclass
class _WorkerHandle:
    """The main process's view of one worker process."""

    incarnation: int
    process: Any
    tasks: Any  # Connection, main -> worker
    results: Any  # Connection, worker -> main
    outstanding: dict[int, tuple[EpisodePlan, int]] = field(default_factory=dict)


@dataclass
class _Finished:
    """A completed trajectory waiting for training, with what admitted it."""

    trajectory: Trajectory
    plan: EpisodePlan
    admitted_version: int


class LocalRuntime:
    """Drives workers, admission, the group barrier and the learner for one run.

    Args:
        loop: the run's ``TrainingLoop`` (already restored when resuming).
        pending_plans: admitted-but-untrained plans of an interrupted session, issued first.
    """

    def __init__(self, loop: TrainingLoop, pending_plans: list[EpisodePlan] | None = None) -> None:
        self.loop = loop
        ctx = loop.ctx
        self.config = ctx.config
        runtime = self.config.runtime
        self.batch_size = self.config.rollout.batch_size
        self.group_size = ctx.method.group_size
        self.max_staleness = runtime.max_staleness
        self.in_flight = runtime.in_flight_updates
        # The gate keeps up to (max_staleness + 1) * B episodes in flight; each worker gets slots
        # for its share of them (a slot waiting for a slow environment costs nothing to decode).
        in_flight_share = -(-(self.max_staleness + 1) * self.batch_size // runtime.num_workers)
        self.num_slots = min(self.config.rollout.num_slots, max(self.batch_size, in_flight_share))
        self.context = torch.multiprocessing.get_context("spawn")
        version = ctx.learner.version
        self.gate = StalenessGate(self.batch_size, self.max_staleness)
        # Every earlier update consumed B accepted trajectories.
        self.gate.load_state_dict({"version": version, "accepted": version * self.batch_size})
        self.weights = SharedWeights(ctx.policy, self.context, version=version)
        self.stop = self.context.Event()
        self.retry: deque[EpisodePlan] = deque(pending_plans or [])
        self.ready: list[_Finished] = []
        self.group_buffer: dict[int, list[_Finished]] = defaultdict(list)
        self.next_ticket = 0
        self.incarnations = 0
        self.restarts = 0
        self.dropped = 0
        self.session_version = version
        self.workers: list[_WorkerHandle] = []

    # -- workers ------------------------------------------------------------------------------

    def _start_worker(self) -> _WorkerHandle:
        incarnation = self.incarnations
        self.incarnations += 1
        seed = (
            self.config.seed
            + _SEED_STRIDE_WORKER * incarnation
            + _SEED_STRIDE_VERSION * self.session_version
        )
        task_reader, task_writer = self.context.Pipe(duplex=False)
        result_reader, result_writer = self.context.Pipe(duplex=False)
        process = self.context.Process(
            target=_worker_main,
            name=f"sao-rollout-{incarnation}",
            daemon=True,
            args=(
                incarnation,
                seed,
                self.config.to_dict(),
                self.weights,
                task_reader,
                result_writer,
                self.stop,
                self.in_flight,
                self.num_slots,
            ),
        )
        process.start()
        # Close our copies of the child's ends: a dead worker then reads as EOF / broken pipe.
        task_reader.close()
        result_writer.close()
        return _WorkerHandle(incarnation, process, task_writer, result_reader)

    def _stop_workers(self) -> None:
        self.stop.set()
        deadline = time.time() + _STOP_JOIN_SECONDS
        for worker in self.workers:
            worker.process.join(timeout=max(0.0, deadline - time.time()))
        for worker in self.workers:
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=_STOP_JOIN_SECONDS)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.tasks.close()
            worker.results.close()

    def _replace_dead_worker(self, index: int) -> None:
        """Drop the dead worker's plans (logged, released, issued again) and start another."""
        worker = self.workers[index]
        worker.process.join(timeout=_STOP_JOIN_SECONDS)
        self.restarts += 1
        if self.restarts > 10 * self.config.runtime.num_workers:
            raise RuntimeError(f"rollout workers died {self.restarts} times; giving up")
        rows = []
        for plan, _ in worker.outstanding.values():
            self.gate.finish(1, accepted=False)
            rows.append(
                dropped_episode_record(
                    self.config, plan, self.loop.episodes_logged, wall_time=self.loop.wall_time()
                )
            )
            self.loop.episodes_logged += 1
            self.retry.append(plan)
        self.dropped += len(rows)
        if rows:
            self.loop.log.log("episodes", rows)
        worker.tasks.close()
        worker.results.close()
        self.workers[index] = self._start_worker()

    # -- admission ----------------------------------------------------------------------------

    def _admit(self) -> None:
        planner = self.loop.ctx.planner
        budget = self.config.budget.episodes
        version = self.loop.ctx.learner.version
        assigned: dict[int, list[tuple[int, EpisodePlan, int]]] = defaultdict(list)
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
                index = min(
                    range(len(self.workers)), key=lambda k: len(self.workers[k].outstanding)
                )
                ticket = self.next_ticket
                self.next_ticket += 1
                self.workers[index].outstanding[ticket] = (plan, version)
                assigned[index].append((ticket, plan, version))
        for index, tasks in assigned.items():
            # A worker that died meanwhile is caught by the liveness check, which reissues these.
            with contextlib.suppress(OSError):
                self.workers[index].tasks.send_bytes(pickle.dumps(tasks))

    # -- results ------------------------------------------------------------------------------

    def _collect(self, timeout: float) -> None:
        by_connection = {id(worker.results): index for index, worker in enumerate(self.workers)}
        readable = multiprocessing.connection.wait(
            [worker.results for worker in self.workers], timeout=timeout
        )
        dead: set[int] = set()
        for connection in readable:
            index = by_connection[id(connection)]
            worker = self.workers[index]
            try:
                while worker.results.poll():
                    self._handle(worker, pickle.loads(worker.results.recv_bytes()))
            except (EOFError, OSError):
                dead.add(index)
        for index, worker in enumerate(self.workers):
            if index in dead or not worker.process.is_alive():
                self._replace_dead_worker(index)

    def _handle(self, worker: _WorkerHandle, message: tuple) -> None:
        if message[0] == "error":
            raise RuntimeError(f"a rollout worker failed: {message[1]}")
        _, ticket, trajectory = message
        if ticket not in worker.outstanding:
            return  # already dropped
        plan, admitted_version = worker.outstanding.pop(ticket)
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

    def _outstanding(self) -> list[tuple[EpisodePlan, int]]:
        return [entry for worker in self.workers for entry in worker.outstanding.values()]

    def _next_batch(self) -> list[_Finished] | None:
        """The next batch to train on, or None when the learner must wait."""
        version = self.loop.ctx.learner.version
        # Training now makes anything admitted at or before this version staler than allowed.
        due_version = version - self.max_staleness
        outstanding = self._outstanding()
        if any(admitted <= due_version for _, admitted in outstanding):
            return None
        if any(
            item.admitted_version <= due_version
            for members in self.group_buffer.values()
            for item in members
        ):
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
        # Everything admitted at or before next_due must be in the very next batch. Training now
        # while more than B of those are untrained (fresh episodes that finished first would
        # take their places) would leave some to be trained one version too stale; wait for the
        # stragglers instead. The gate admits at most 2 B of them, so the wait always ends.
        next_due = due_version + 1
        left_due = sum(item.admitted_version <= next_due for item in rest)
        left_due += sum(admitted <= next_due for _, admitted in outstanding)
        left_due += sum(
            item.admitted_version <= next_due
            for members in self.group_buffer.values()
            for item in members
        )
        if left_due > self.batch_size:
            return None
        self.ready = rest
        return batch

    def _train(self, batch: list[_Finished]) -> None:
        ctx = self.loop.ctx
        straddles = {item.plan.group_id: item.plan.straddles_change for item in batch}
        self.loop.train_on(
            [item.trajectory for item in batch],
            straddles,
            {
                "charts/ready_waiting": float(len(self.ready)),
                "charts/episodes_running": float(len(self._outstanding())),
                "charts/dropped_total": float(self.dropped),
                "charts/worker_restarts": float(self.restarts),
            },
        )
        self.weights.publish(ctx.policy, ctx.learner.version)
        self.gate.set_version(ctx.learner.version)
        if self.loop.checkpoint_due():
            self.loop.checkpoint(self.checkpoint_extra())

    def _finished(self) -> bool:
        return (
            not self.ready
            and not self.retry
            and not self.group_buffer
            and not self._outstanding()
            and not self.loop.ctx.planner.can_start_group(self.config.budget.episodes)
        )

    def checkpoint_extra(self) -> dict[str, Any]:
        """Plans admitted but not trained on yet: a resumed session issues them again."""
        pending = [plan for plan, _ in self._outstanding()] + list(self.retry)
        pending += [item.plan for members in self.group_buffer.values() for item in members]
        pending += [item.plan for item in self.ready]
        return {"local": {"pending_plans": pending}}

    def run(self) -> None:
        """Run until the budget is trained on; Ctrl-C leaves a resumable checkpoint."""
        try:
            self.workers = [self._start_worker() for _ in range(self.config.runtime.num_workers)]
            while not self._finished():
                self._admit()
                self._collect(_POLL_SECONDS)
                while (batch := self._next_batch()) is not None:
                    self._train(batch)
                    self._admit()
            self._stop_workers()
            self.loop.checkpoint(self.checkpoint_extra())
        except RunInterrupted:  # after an update: a consistent point to checkpoint
            self._stop_workers()
            self.loop.checkpoint(self.checkpoint_extra())
            raise
        finally:
            self._stop_workers()


def run_local(loop: TrainingLoop, state: dict[str, Any] | None = None) -> None:
    """The ``local`` backend: rollout-worker processes and the learner in this process.

    Args:
        loop: the run's training loop (already restored when resuming).
        state: the checkpoint it was restored from; its plans admitted but not trained on are
            issued again first.
    """
    pending = list(state.get("local", {}).get("pending_plans", [])) if state else []
    LocalRuntime(loop, pending).run()
