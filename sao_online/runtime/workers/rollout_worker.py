"""The body of a rollout worker, shared by every asynchronous backend (processes, Ray actors).

A worker builds its own policy and engine from the run's config, copies the learner's published
weights, and runs the plans it is given with continuous batching, emitting each trajectory as
soon as it completes. How tasks arrive, how weights are published and where results go is the
backend's business; this module only needs three callables and a ``WeightSource``.

Orders received: ``Task`` tuples (an episode to run) and ``Interrupt`` (stop one: dropped from
the queue if it has not started, stopped in the engine if it runs).

Messages emitted (plain tuples, picklable):

- ``("started", ticket, version)``: the episode went into the engine, whose weights are then at
  ``version`` (its first token is sampled with that version or a newer one);
- ``("done", ticket, trajectory)``: one finished episode of the task with that ticket;
- ``("interrupted", ticket, trajectory_or_none)``: the episode was stopped by an ``Interrupt``;
  the trajectory holds what it did so far (None: it had not started);
- ``("alive",)``: the worker's loop is turning (at most every ``HEARTBEAT_SECONDS``; the
  runtime restarts a worker that holds episodes and stays silent far longer);
- ``("timings", rows)``: before each ``done``, the engine's ``round_timings`` since the last
  one (``(slots, fed tokens, cached tokens, seconds)`` per decoding round);
- ``("env_error", text)``: an environment broke the contract (``EnvError``; one line naming
  the env, the call and the field); the worker stops after this;
- ``("error", text)``: the worker failed otherwise (the text holds the traceback); it stops.

An ``Interrupt`` for an episode that already finished is ignored (its ``done`` is on its way).
"""

from __future__ import annotations

import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from sao_online.algorithms import load_method_factory
from sao_online.config import load_config
from sao_online.learning.warm_start import base_policy
from sao_online.rollout import EnvError, EpisodeRequest, RolloutEngine
from sao_online.runtime.engines import build_engine
from sao_online.runtime.envs import plan_to_request
from sao_online.runtime.scheduling.planner import EpisodePlan

Task = tuple[int, EpisodePlan, int]
"""(ticket, plan, admitted_version): one episode to run, as the learner admitted it."""


@dataclass(frozen=True)
class Interrupt:
    """Order to stop the episode of ``ticket`` (queued or running) and report what it spent."""

    ticket: int


Order = Task | Interrupt

_WEIGHTS_WAIT_SECONDS = 0.002  # nap while a newer version is announced but not yet readable
HEARTBEAT_SECONDS = 1.0
"""Seconds between a worker's ``("alive",)`` messages while its loop turns."""


class WeightSource(Protocol):
    """Where a worker reads the learner's published weights."""

    @property
    def version(self) -> int:
        """The newest version published so far."""
        ...

    def load_into(self, model: torch.nn.Module) -> int:
        """Copy the newest weights into ``model``; return their version."""
        ...


class WorkerTasks:
    """The episodes one rollout worker holds, and what orders do to them.

    Every worker body (processes and Ray actors through ``run_rollout_worker``, the simulated
    runtime's workers) keeps its queue here, so an order means the same everywhere: a task waits
    in ``queued`` until a slot is free and the worker's weights are at least as new as the
    version that admitted it; an ``Interrupt`` drops a queued task or stops a running episode.

    Args:
        config: the run's config (episode requests are built from it).
        emit: sends one message to the learner.
    """

    def __init__(self, config: Any, emit: Callable[[tuple], None]) -> None:
        self.config = config
        self.emit = emit
        self.queued: deque[Task] = deque()
        self.running = 0

    def take(self, orders: list[Order], engine: RolloutEngine) -> None:
        """Queue the tasks and carry out the interrupts of ``orders``, in order."""
        for order in orders:
            if isinstance(order, Interrupt):
                self._interrupt(order.ticket, engine)
            else:
                self.queued.append(order)

    def _interrupt(self, ticket: int, engine: RolloutEngine) -> None:
        for task in self.queued:
            if task[0] == ticket:
                self.queued.remove(task)
                self.emit(("interrupted", ticket, None))
                return
        trajectory = engine.interrupt(ticket)
        if trajectory is not None:
            self.running -= 1
            self.emit(("interrupted", ticket, trajectory))

    def waits_for_weights(self, engine: RolloutEngine) -> bool:
        """Whether the next task was admitted at a version newer than the engine's weights."""
        return bool(self.queued) and self.queued[0][2] > engine.policy_version

    def next_request(
        self, engine: RolloutEngine, refresh: Callable[[], None], in_flight: bool
    ) -> EpisodeRequest | None:
        """The next episode to start (announced with ``started``), or None.

        None when nothing is queued, or when the next task's weights are not loaded: ``refresh``
        loads the newest published ones first when that is allowed (in-flight updates, or no
        episode running), and the task waits if they are still older than its admission.
        """
        if not self.queued:
            return None
        if self.waits_for_weights(engine):
            if in_flight or self.running == 0:
                refresh()
            if self.waits_for_weights(engine):
                return None
        ticket, plan, _ = self.queued.popleft()
        self.running += 1
        request = plan_to_request(self.config, plan)
        request.tag = ticket  # members of a group finish in any order
        self.emit(("started", ticket, engine.policy_version))
        return request

    def done(self, trajectory: Any) -> None:
        """A running episode finished: report it."""
        self.running -= 1
        self.emit(("done", trajectory.tag, trajectory))


def run_rollout_worker(
    *,
    config_dict: dict[str, Any],
    seed: int,
    num_slots: int,
    in_flight: bool,
    weights: WeightSource,
    receive: Callable[[float], list[Order] | None],
    emit: Callable[[tuple], None],
    should_stop: Callable[[], bool],
    poll_seconds: float = 0.05,
) -> None:
    """Run tasks until ``should_stop()``; every outcome, failures included, goes through ``emit``.

    Args:
        config_dict: the run's config (``ExperimentConfig.to_dict()``).
        seed: the seed of this worker's sampling stream.
        num_slots: concurrent episodes of the engine.
        in_flight: take newer weights between decoding steps (tokens record their version);
            otherwise only while no episode runs.
        weights: the learner's published weights.
        receive: ``receive(timeout)`` returns the next list of orders (tasks, interrupts), or
            None after ``timeout`` seconds without one.
        emit: sends one message to the learner (must not block for long).
        should_stop: polled between tasks and trajectories.
        poll_seconds: how long an idle worker waits for tasks at a time.
    """
    last_beat = time.monotonic()
    timings: list[tuple[int, int, int, float]] = []

    def beat() -> None:
        nonlocal last_beat
        now = time.monotonic()
        if now - last_beat >= HEARTBEAT_SECONDS:
            last_beat = now
            emit(("alive",))

    try:
        config = load_config(config_dict)
        # A method from a user's module (MODULE:FACTORY) is imported here too, as an env id's
        # module is by gymnasium.make: what it registers on import exists in every worker.
        load_method_factory(config.algorithm.name)
        policy, tokenizer = base_policy(config)
        policy.eval()
        tasks = WorkerTasks(config, emit)
        with build_engine(config, policy, tokenizer, seed=seed, num_slots=num_slots) as engine:
            engine.policy_version = weights.load_into(policy)
            engine.round_timings = timings

            def refresh() -> None:
                if weights.version > engine.policy_version:
                    engine.policy_version = weights.load_into(policy)

            def between_steps(current: RolloutEngine) -> None:
                beat()
                if in_flight:
                    refresh()

            def source() -> EpisodeRequest | None:
                beat()
                if should_stop():
                    return None
                # Orders are read whenever a slot is free, so an interrupt is not held up
                # behind a queue of tasks.
                idle = tasks.running == 0 and not tasks.queued
                tasks.take(receive(poll_seconds if idle else 0.0) or [], engine)
                request = tasks.next_request(engine, refresh, in_flight)
                if request is None and tasks.running == 0 and tasks.waits_for_weights(engine):
                    # Its weights are announced but not readable yet.
                    time.sleep(_WEIGHTS_WAIT_SECONDS)
                return request

            engine.on_decode_step = between_steps
            while not should_stop():
                for trajectory in engine.run(source):
                    if timings:
                        emit(("timings", timings[:]))
                        timings.clear()
                    tasks.done(trajectory)
                    if should_stop():
                        break
    except EnvError as error:  # the user's environment: one line, no traceback
        emit(("env_error", str(error)))
        raise
    except BaseException:  # noqa: BLE001  (report anything; the backend decides what follows)
        emit(("error", traceback.format_exc()))
        raise
