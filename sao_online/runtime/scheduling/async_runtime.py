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
  also waits before a step that would push any episode past ``max_staleness`` and trains such
  "due" episodes first (``batch_selection``). An episode's staleness counts from its admission
  version or, with ``runtime.staleness_from: tokens``, from the weights its worker started it
  with (the worker's ``started`` message) and, once done, its oldest token's version
  (``stragglers``). With ``max_staleness`` 0 this is the synchronous schedule. Each update logs
  how long the learner waited before it, split by cause: ``charts/learner_wait_bound_seconds``
  (B episodes were ready, but the staleness rules refused the step) and
  ``charts/learner_wait_episodes_seconds`` (fewer than B were ready, whatever the bound).
- Stragglers (``runtime.stragglers: requeue``): instead of waiting with B episodes ready, the
  learner stops the groups it would wait for (``stragglers_to_drop``): their running members
  get an ``Interrupt``, their finished members are discarded, and every member is issued
  again as its plan's next attempt. Each is logged as a dropped episode with
  ``dropped_reason`` "stale" and what it spent (tokens, env seconds: the worker's report of the
  interrupted episode). An episode already run ``MAX_REQUEUES`` times before is waited for,
  so an environment that is always slow for some prompt cannot starve the run.
- Time: every reading of time (waits, silence) comes from the ``clock`` the runtime is given:
  the machine's monotonic seconds for processes and Ray actors, the virtual clock for the
  simulated runtime (``sao_online.runtime.simulation``), which runs this same class over a
  worker pool of its own.
- Faults: a worker that dies is restarted; the plans it held are logged as dropped episodes
  (``dropped=True``, ``dropped_reason`` "worker_fault", reward NaN), released from the gate and
  issued again, so the run still trains on its full budget. A worker that holds plans but sends
  nothing (not even its heartbeat, ``("alive",)`` about every second while its loop turns) for
  ``env.step_timeout + WORKER_SILENCE_GRACE_SECONDS`` is taken for hung and treated the same
  way, with a ``HungWorkerWarning``. An environment that breaks the contract stops the run with
  its ``EnvError`` (one line naming the env). Ctrl-C stops the workers and saves a checkpoint
  that records the admitted-but-untrained plans; a resumed run issues them again.
"""

from __future__ import annotations

import warnings
from collections import defaultdict, deque
from collections.abc import Callable
from time import monotonic
from typing import Any

from sao_online.learning.types import Trajectory
from sao_online.rollout import EnvError
from sao_online.rundir.episode_rows import (
    DROPPED_STALE,
    DROPPED_WORKER_FAULT,
    dropped_episode_record,
)
from sao_online.runtime.loop import RunInterrupted, TrainingLoop
from sao_online.runtime.scheduling.batch_selection import select_batch
from sao_online.runtime.scheduling.planner import EpisodePlan, plan_from_dict, plan_to_dict
from sao_online.runtime.scheduling.staleness import StalenessGate
from sao_online.runtime.scheduling.stragglers import FinishedEpisode, HeldEpisode, StragglerRules
from sao_online.runtime.workers.pool import WorkerPool
from sao_online.runtime.workers.rollout_worker import Interrupt, Order

POLL_SECONDS = 0.05
_SEED_STRIDE_WORKER = 7919  # distinct sampling streams per worker incarnation
_SEED_STRIDE_VERSION = 104729  # and per resumed session
_CHECKPOINT_KEY = "async"
WORKER_SILENCE_GRACE_SECONDS = 300.0
"""How much longer than ``env.step_timeout`` a worker holding plans may send nothing (its start,
loading the model included) before it is taken for hung and restarted."""


class HungWorkerWarning(UserWarning):
    """A rollout worker held episodes but sent nothing for too long; it was restarted."""


class AsyncRuntime:
    """Drives workers, admission, the group barrier and the learner for one run.

    Args:
        loop: the run's ``TrainingLoop`` (already restored when resuming).
        pool: the rollout workers; the runtime launches them and closes the pool at the end.
        pending_plans: admitted-but-untrained plans of an interrupted session, issued first.
        clock: seconds for the learner's waits and the workers' silence (monotonic by default).
    """

    def __init__(
        self,
        loop: TrainingLoop,
        pool: WorkerPool,
        pending_plans: list[EpisodePlan] | None = None,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        self.loop = loop
        self.pool = pool
        self.clock = clock
        self.config = loop.ctx.config
        self.num_workers = self.config.runtime.num_workers
        self.batch_size = self.config.rollout.batch_size
        self.group_size = loop.ctx.method.group_size
        self.max_staleness = self.config.runtime.max_staleness
        self.rules = StragglerRules(self.config.runtime)
        version = loop.ctx.learner.version
        self.gate = StalenessGate(self.batch_size, self.max_staleness)
        # Every earlier update consumed B accepted trajectories.
        self.gate.load_state_dict({"version": version, "accepted": version * self.batch_size})
        self.retry: deque[EpisodePlan] = deque(pending_plans or [])
        self.ready: list[FinishedEpisode] = []
        self.group_buffer: dict[int, list[FinishedEpisode]] = defaultdict(list)
        # Per worker: ticket -> the episode it holds.
        self.outstanding: list[dict[int, HeldEpisode]] = [{} for _ in range(self.num_workers)]
        # Per worker: ticket -> plan of the stragglers it was told to stop, until it reports
        # what they spent (their dropped rows are logged then).
        self.interrupting: list[dict[int, EpisodePlan]] = [{} for _ in range(self.num_workers)]
        self.next_ticket = 0
        # When each worker was last heard from (any message), or launched.
        self.last_heard: dict[int, float] = {}
        self.silence_limit = self.config.env.step_timeout + WORKER_SILENCE_GRACE_SECONDS
        self.incarnations = 0
        self.restarts = 0
        self.dropped = 0  # dropped rows logged (worker faults and requeued stragglers)
        self.requeued = 0  # episodes stopped as stragglers and issued again
        self.session_version = version
        # Why the learner is waiting now (None: it is not, or has not looked yet), and how long
        # it waited for each cause since its last update.
        self.wait_cause: str | None = None
        self.waited = {"bound": 0.0, "episodes": 0.0}
        self.publish_seconds = 0.0  # the last publish (logged with the next update)

    # -- workers ------------------------------------------------------------------------------

    def _launch(self, index: int) -> None:
        seed = (
            self.config.seed
            + _SEED_STRIDE_WORKER * self.incarnations
            + _SEED_STRIDE_VERSION * self.session_version
        )
        self.incarnations += 1
        self.pool.launch(index, seed)
        self.last_heard[index] = self.clock()

    def _replace_dead_worker(self, index: int) -> None:
        """Drop the dead worker's plans (logged, released, issued again) and start another."""
        self.restarts += 1
        if self.restarts > 10 * self.num_workers:
            raise RuntimeError(f"rollout workers died {self.restarts} times; giving up")
        rows = []
        for entry in self.outstanding[index].values():
            self.gate.finish(1, accepted=False)
            rows.append(self._dropped_row(entry.plan, DROPPED_WORKER_FAULT))
            self.retry.append(entry.plan.again())
        self.outstanding[index] = {}
        # Stragglers it was stopping are already issued again; what they spent died with it.
        rows += [
            self._dropped_row(plan, DROPPED_STALE) for plan in self.interrupting[index].values()
        ]
        self.interrupting[index] = {}
        self._log_dropped(rows)
        self._launch(index)

    def _dropped_row(
        self, plan: EpisodePlan, reason: str, spent: Trajectory | None = None
    ) -> dict[str, Any]:
        row = dropped_episode_record(
            self.config,
            plan,
            self.loop.episodes_logged,
            wall_time=self.loop.wall_time(),
            reason=reason,
            spent=spent,
        )
        self.loop.episodes_logged += 1
        return row

    def _log_dropped(self, rows: list[dict[str, Any]]) -> None:
        self.dropped += len(rows)
        if rows:
            self.loop.log.log("episodes", rows)

    # -- admission ----------------------------------------------------------------------------

    def _admit(self) -> None:
        planner = self.loop.ctx.planner
        budget = self.config.budget.episodes
        version = self.loop.ctx.learner.version
        assigned: dict[int, list[Order]] = defaultdict(list)
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
                self.outstanding[index][ticket] = HeldEpisode(plan, version)
                assigned[index].append((ticket, plan, version))
        for index, tasks in assigned.items():
            self.pool.submit(index, tasks)

    # -- results ------------------------------------------------------------------------------

    def _collect(self, timeout: float) -> None:
        messages, dead = self.pool.receive(timeout)
        # A worker's last results (or its error report) count even if it died after sending them.
        for index, message in messages:
            self.last_heard[index] = self.clock()
            self._handle(index, message)
        for index in sorted(dead):
            self._replace_dead_worker(index)
        now = self.clock()
        for index in range(self.num_workers):
            silent = now - self.last_heard.get(index, now)
            holds = self.outstanding[index] or self.interrupting[index]
            if index not in dead and holds and silent > self.silence_limit:
                warnings.warn(
                    HungWorkerWarning(
                        f"rollout worker {index} held {len(self.outstanding[index])} episode(s) "
                        f"but sent nothing for {silent:.0f} s (env.step_timeout + "
                        f"{WORKER_SILENCE_GRACE_SECONDS:g} s); restarting it, its episodes "
                        "are run again"
                    ),
                    stacklevel=2,
                )
                self._replace_dead_worker(index)

    def _handle(self, index: int, message: tuple) -> None:
        kind = message[0]
        if kind == "alive":
            return
        if kind == "timings":
            self.loop.decode_rounds.extend(message[1])
            return
        if kind == "env_error":
            raise EnvError(message[1])
        if kind == "error":
            raise RuntimeError(f"rollout worker {index} failed:\n{message[1]}")
        _, ticket, payload = message
        if kind == "started":
            if ticket in self.outstanding[index]:
                self.outstanding[index][ticket].started_version = payload
            return
        if ticket in self.interrupting[index]:
            # The straggler's report, or its last result if it ended before the interrupt
            # reached it: either way it was issued again and is not trained on.
            plan = self.interrupting[index].pop(ticket)
            self._log_dropped([self._dropped_row(plan, DROPPED_STALE, payload)])
            return
        if kind != "done" or ticket not in self.outstanding[index]:
            return  # the report of an episode whose worker was replaced
        entry = self.outstanding[index].pop(ticket)
        self.gate.finish(1, accepted=True)
        finished = self.rules.finished(entry, payload)
        if self.group_size == 1:
            self.ready.append(finished)
            return
        members = self.group_buffer[entry.plan.group_id]
        members.append(finished)
        if len(members) == self.group_size:  # the group barrier
            self.ready.extend(self.group_buffer.pop(entry.plan.group_id))

    # -- training -----------------------------------------------------------------------------

    def _all_outstanding(self) -> list[HeldEpisode]:
        return [entry for held in self.outstanding for entry in held.values()]

    def _waiting(self) -> list[tuple[int, int]]:
        """(group id, oldest version) of every admitted episode not ready for training yet."""
        return self.rules.waiting(self._all_outstanding(), self.group_buffer)

    def _exhausted(self, waiting: list[tuple[int, int]]) -> bool:
        """Nothing more will be admitted or is waiting: a short last batch is fine."""
        return (
            not waiting
            and not self.retry
            and not self.loop.ctx.planner.can_start_group(self.config.budget.episodes)
        )

    def _select(self, waiting: list[tuple[int, int]]) -> tuple[list, list] | None:
        return select_batch(
            self.ready,
            version=self.loop.ctx.learner.version,
            max_staleness=self.max_staleness,
            batch_size=self.batch_size,
            waiting_versions=[oldest for _, oldest in waiting],
            exhausted=self._exhausted(waiting),
        )

    def _requeue_stragglers(self) -> bool:
        """Stop and issue again the groups the learner would wait for; True if any were."""
        groups = self.rules.groups_to_requeue(
            self.ready,
            self._all_outstanding(),
            self.group_buffer,
            version=self.loop.ctx.learner.version,
            max_staleness=self.max_staleness,
            batch_size=self.batch_size,
        )
        if not groups:
            return False
        for index, held in enumerate(self.outstanding):
            tickets = [ticket for ticket, entry in held.items() if entry.plan.group_id in groups]
            for ticket in tickets:
                plan = held.pop(ticket).plan
                self.gate.finish(1, accepted=False)
                self.interrupting[index][ticket] = plan
                self.retry.append(plan.again())
            if tickets:
                self.pool.submit(index, [Interrupt(ticket) for ticket in tickets])
            self.requeued += len(tickets)
        rows = []
        for group_id in sorted(groups):
            for item in self.group_buffer.pop(group_id, []):
                self.gate.discard(1)
                rows.append(self._dropped_row(item.plan, DROPPED_STALE, item.trajectory))
                self.retry.append(item.plan.again())
        self.requeued += len(rows)
        self._log_dropped(rows)
        return True

    def _next_batch(self) -> list[FinishedEpisode] | None:
        """The next batch to train on (``select_batch``), or None when the learner must wait."""
        waiting = self._waiting()
        selected = self._select(waiting)
        if selected is None and self._requeue_stragglers():
            selected = self._select(self._waiting())
        if selected is None:
            exhausted = self._exhausted(self._waiting())
            short = len(self.ready) < self.batch_size and not (exhausted and self.ready)
            self.wait_cause = "episodes" if short else "bound"
            return None
        self.wait_cause = None
        batch, self.ready = selected
        return batch

    def _train(self, batch: list[FinishedEpisode]) -> None:
        ctx = self.loop.ctx
        # Episodes whose tokens are all newer than their admission (they queued at a worker
        # while the learner moved on): only these can gain from counting staleness by tokens.
        started_late = sum(item.trajectory.oldest_version > item.admitted_version for item in batch)
        self.loop.train_on(
            [item.trajectory for item in batch],
            self.loop.straddles([item.plan for item in batch]),
            {
                "charts/ready_waiting": float(len(self.ready)),
                "charts/episodes_running": float(len(self._all_outstanding())),
                "charts/dropped_total": float(self.dropped),
                "charts/requeued_stale_total": float(self.requeued),
                "charts/episodes_started_after_admission": float(started_late),
                "charts/worker_restarts": float(self.restarts),
                "charts/learner_wait_bound_seconds": self.waited["bound"],
                "charts/learner_wait_episodes_seconds": self.waited["episodes"],
                "charts/publish_seconds": self.publish_seconds,
            },
        )
        self.waited = {"bound": 0.0, "episodes": 0.0}
        began = self.clock()
        self.pool.publish(ctx.policy, ctx.learner.version)
        self.publish_seconds = self.clock() - began
        self.gate.set_version(ctx.learner.version)
        if self.loop.checkpoint_due():
            self.loop.checkpoint(self.checkpoint_extra())

    @property
    def finished(self) -> bool:
        """True when the whole budget is trained on and nothing is held anywhere."""
        return (
            not self.ready
            and not self.retry
            and not self.group_buffer
            and not self._all_outstanding()
            and not any(self.interrupting)
            and not self.loop.ctx.planner.can_start_group(self.config.budget.episodes)
        )

    def _log_unreported_stragglers(self) -> None:
        """Log the stragglers whose workers have not reported yet (nothing spent known): the
        session stops, and they are issued again as planned."""
        rows = [
            self._dropped_row(plan, DROPPED_STALE)
            for held in self.interrupting
            for plan in held.values()
        ]
        self.interrupting = [{} for _ in range(self.num_workers)]
        self._log_dropped(rows)

    def _checkpoint_on_interrupt(self) -> None:
        """Ctrl-C stopped the run after an update: log the stragglers being stopped, checkpoint."""
        self._log_unreported_stragglers()
        self.loop.checkpoint(self.checkpoint_extra())

    def checkpoint_extra(self) -> dict[str, Any]:
        """Plans admitted but not trained on yet: a resumed session issues them again."""
        pending = [entry.plan for entry in self._all_outstanding()] + list(self.retry)
        pending += [item.plan for members in self.group_buffer.values() for item in members]
        pending += [item.plan for item in self.ready]
        return {_CHECKPOINT_KEY: {"pending_plans": [plan_to_dict(plan) for plan in pending]}}

    def start(self) -> None:
        """Launch every worker."""
        for index in range(self.num_workers):
            self._launch(index)

    def step(self, timeout: float) -> None:
        """One scheduling round: admit what the gate allows, collect results for up to
        ``timeout`` seconds, and train on every batch that is ready."""
        self._admit()
        began = self.clock()
        self._collect(timeout)
        if self.wait_cause is not None:
            self.waited[self.wait_cause] += self.clock() - began
        while (batch := self._next_batch()) is not None:
            self._train(batch)
            self._admit()

    def run(self) -> None:
        """Run until the budget is trained on; Ctrl-C leaves a resumable checkpoint."""
        try:
            self.start()
            while not self.finished:
                self.step(POLL_SECONDS)
            self.pool.close()
            self.loop.checkpoint(self.checkpoint_extra())
        except RunInterrupted:  # after an update: a consistent point to checkpoint
            self.pool.close()
            self._checkpoint_on_interrupt()
            raise
        finally:
            self.pool.close()


def pending_plans(state: dict[str, Any] | None) -> list[EpisodePlan]:
    """The admitted-but-untrained plans recorded in a checkpoint of an asynchronous run."""
    if not state:
        return []
    recorded = state.get(_CHECKPOINT_KEY, {}).get("pending_plans", [])
    return [plan_from_dict(plan) for plan in recorded]


def run_async(
    loop: TrainingLoop, make_pool: Callable[[], WorkerPool], state: dict[str, Any] | None = None
) -> None:
    """Run ``loop`` to its budget with asynchronous rollout workers.

    Args:
        loop: the run's training loop (already restored when resuming).
        make_pool: builds the (not yet launched) worker pool; see ``backends.make_pool``.
        state: the checkpoint it was restored from; its plans admitted but not trained on are
            issued again first.
    """
    pool = make_pool()
    try:
        runtime = AsyncRuntime(loop, pool, pending_plans(state))
    except BaseException:
        pool.close()  # run() closes it from here on
        raise
    runtime.run()
