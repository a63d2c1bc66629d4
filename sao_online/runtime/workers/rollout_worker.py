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
from sao_online.pretrain import base_policy
from sao_online.rollout import EnvError, RolloutEngine
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
        with build_engine(config, policy, tokenizer, seed=seed, num_slots=num_slots) as engine:
            engine.policy_version = weights.load_into(policy)
            queued: deque[Task] = deque()
            running = 0

            def refresh(current: RolloutEngine) -> None:
                if weights.version > current.policy_version:
                    current.policy_version = weights.load_into(policy)

            def interrupt(ticket: int) -> None:
                nonlocal running
                for task in queued:
                    if task[0] == ticket:
                        queued.remove(task)
                        emit(("interrupted", ticket, None))
                        return
                trajectory = engine.interrupt(ticket)
                if trajectory is not None:
                    running -= 1
                    emit(("interrupted", ticket, trajectory))

            def take_orders(timeout: float) -> None:
                for order in receive(timeout) or []:
                    if isinstance(order, Interrupt):
                        interrupt(order.ticket)
                    else:
                        queued.append(order)

            def between_steps(current: RolloutEngine) -> None:
                beat()
                if in_flight:
                    refresh(current)

            def source():
                nonlocal running
                beat()
                if should_stop():
                    return None
                # Orders are read whenever a slot is free, so an interrupt is not held up
                # behind a queue of tasks.
                take_orders(poll_seconds if running == 0 and not queued else 0.0)
                if not queued:
                    return None
                ticket, plan, admitted_version = queued[0]
                if admitted_version > engine.policy_version:
                    if in_flight or running == 0:
                        refresh(engine)
                    if admitted_version > engine.policy_version:
                        # Its weights are announced but not here yet, or (in-flight updates off)
                        # the running episodes must end first.
                        if running == 0:
                            time.sleep(_WEIGHTS_WAIT_SECONDS)
                        return None
                queued.popleft()
                running += 1
                request = plan_to_request(config, plan)
                request.tag = ticket  # members of a group finish in any order
                emit(("started", ticket, engine.policy_version))
                return request

            engine.on_decode_step = between_steps
            while not should_stop():
                for trajectory in engine.run(source):
                    running -= 1
                    emit(("done", trajectory.tag, trajectory))
                    if should_stop():
                        break
    except EnvError as error:  # the user's environment: one line, no traceback
        emit(("env_error", str(error)))
        raise
    except BaseException:  # noqa: BLE001  (report anything; the backend decides what follows)
        emit(("error", traceback.format_exc()))
        raise
