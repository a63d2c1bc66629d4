"""One rollout worker of the simulated runtime: a real engine stepped on the virtual clock.

A worker is what a rollout-worker process is (its own copy of the policy, its own
``RolloutEngine`` and sampling stream, the same ``WorkerTasks`` queue), except that nothing in
it waits for the machine. The pool wakes it at virtual moments; each ``wake(t)``:

1. carries out the orders received since its last wake (tasks, interrupts);
2. runs one round of the engine (``RolloutEngine.advance``): free slots take tasks, env answers
   due by ``t`` are applied, and one decoding step runs. Before the step the worker takes the
   newest weights readable at ``t`` (with in-flight updates) and prices the step with the cost
   model, so the step ends at ``t + cost``: tokens are stamped with the version read at ``t``,
   episodes the step finishes end at ``t + cost``, and env calls it makes start then;
3. reports every message (``started``, ``done``, ``interrupted``) at the moment it happened and
   says when it must wake next: at the end of its step, when the next env answer is due, or
   never (idle until new orders).

Like a real worker's ``engine.run`` loop, a worker left with nothing running starts its next
round with empty slots (``reset_slots``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from sao_online.rollout import EpisodeRequest, RolloutEngine
from sao_online.runtime.engines import build_engine
from sao_online.runtime.simulation.costs import CostModel
from sao_online.runtime.simulation.env_calls import VirtualEnvCalls
from sao_online.runtime.simulation.weights import VirtualWeights
from sao_online.runtime.workers.rollout_worker import Order, WorkerTasks


class SimulatedWorker:
    """A rollout worker on the virtual clock.

    Args:
        config: the run's config.
        policy: the learner's policy (copied; the copy takes the published weights).
        tokenizer: its tokenizer.
        seed: the seed of the worker's sampling stream.
        num_slots: engine slots.
        costs: the run's cost model.
        weights: the published versions.
        post: ``post(time, message)`` sends a message to the learner, timestamped.
        start: the virtual time the worker starts at.
    """

    def __init__(
        self,
        config: Any,
        policy: torch.nn.Module,
        tokenizer: Any,
        *,
        seed: int,
        num_slots: int,
        costs: CostModel,
        weights: VirtualWeights,
        post: Callable[[float, tuple], None],
        start: float,
    ) -> None:
        self.costs = costs
        self.weights = weights
        self.in_flight = config.runtime.in_flight_updates
        self.now = start
        self.model = copy.deepcopy(policy).eval()
        self.model.requires_grad_(False)
        self.env_calls = VirtualEnvCalls(lambda: self.now, costs, config.env.step_timeout)
        self.engine = build_engine(
            config,
            self.model,
            tokenizer,
            seed=seed,
            num_slots=num_slots,
            env_calls=self.env_calls,
            clock=lambda: self.now,
        )
        self.engine.on_decode_step = self._before_decode
        self.engine.policy_version = weights.load_into(self.model, start)
        self.tasks = WorkerTasks(config, lambda message: post(self.now, message))
        self.inbox: list[Order] = []
        self.fresh = True  # the next round starts with empty slots
        self.busy_until = start  # the end of its last decoding step
        self.decode_steps = 0
        self.decode_seconds = 0.0

    def receive(self, orders: list[Order]) -> None:
        """Orders from the learner, carried out at the next wake."""
        self.inbox.extend(orders)

    def wake(self, t: float) -> float | None:
        """Run one round at virtual time ``t``; return when to wake next (None: on new orders)."""
        self.now = t
        if self.inbox:
            orders, self.inbox = self.inbox, []
            self.tasks.take(orders, self.engine)
        if self.fresh:
            if not self.tasks.queued:
                return None
            self.engine.reset_slots()
            self.fresh = False
        turn = self.engine.advance(self._source)
        for trajectory in turn.finished:
            self.tasks.done(trajectory)
        if turn.decoded:
            self.busy_until = self.now
            return self.now
        if turn.running:
            return self.env_calls.next_ready()
        self.fresh = True
        if self.tasks.queued:  # its weights are not readable yet
            return self.weights.readable_at(self.tasks.queued[0][2])
        return None

    def _refresh(self) -> None:
        if self.weights.newest(self.now).version > self.engine.policy_version:
            self.engine.policy_version = self.weights.load_into(self.model, self.now)

    def _source(self) -> EpisodeRequest | None:
        return self.tasks.next_request(self.engine, self._refresh, self.in_flight)

    def _before_decode(self, engine: RolloutEngine) -> None:
        if self.in_flight:
            self._refresh()
        work = engine.pending_work()
        seconds = self.costs.decode_step(work.slots, work.fed_tokens, work.cached_tokens)
        self.decode_steps += 1
        self.decode_seconds += seconds
        self.now += seconds

    def close(self) -> None:
        self.engine.close()
