"""The simulated runtime's worker pool: W rollout workers in one process, on one virtual clock.

``SimulatedWorkerPool`` is a ``WorkerPool``, so ``AsyncRuntime`` drives it exactly as it drives
processes or Ray actors: the same admission, staleness gate, batch selection and straggler
rules. What differs is time. The pool keeps a discrete-event loop:

- every worker is woken at virtual moments (``SimulatedWorker.wake``), and its messages are
  timestamped;
- ``receive`` runs the workers in time order until the earliest undelivered message is due
  (no worker can still produce an earlier one), moves the clock there and hands the runtime
  every message due by then;
- the learner's work takes virtual time too: the training loop calls ``learner_busy`` with an
  update's cost, and ``publish`` costs ``publish_seconds``; meanwhile the workers keep
  decoding (with the weights they had), and their messages wait, as they would in the real
  runtime, until the learner reads them.

Ties are broken by the order events were scheduled, so a run is the same whatever the machine
does: its time never comes from the machine.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

import torch

from sao_online.config import ConfigError
from sao_online.models.slot_decoder import text_config
from sao_online.runtime.simulation.clock import VirtualClock
from sao_online.runtime.simulation.costs import CostModel
from sao_online.runtime.simulation.weights import VirtualWeights
from sao_online.runtime.simulation.worker import SimulatedWorker
from sao_online.runtime.workers.pool import worker_slots
from sao_online.runtime.workers.rollout_worker import Order

#: Versions of the weights held beside the workers' own copies (the readable one and the next).
_VERSIONS_HELD = 2


def memory_estimate(config: Any, policy: torch.nn.Module) -> dict[str, int]:
    """Bytes a simulated run holds beyond the learner: the workers' model copies, the published
    versions and the workers' key/value caches at full episodes.

    Returns:
        ``{"models": ..., "kv_cache": ..., "total": ...}`` in bytes.
    """
    parameters = sum(t.numel() * t.element_size() for t in policy.state_dict().values())
    workers = config.runtime.num_workers
    models = (workers + _VERSIONS_HELD) * parameters
    model_config = text_config(policy)
    heads = getattr(model_config, "num_attention_heads", 1)
    kv_heads = getattr(model_config, "num_key_value_heads", None) or heads
    head_dim = getattr(model_config, "head_dim", None) or model_config.hidden_size // heads
    element = next(policy.parameters()).element_size()
    per_token = 2 * model_config.num_hidden_layers * kv_heads * head_dim * element
    slots = workers * worker_slots(config)
    kv_cache = slots * config.rollout.max_episode_tokens * per_token
    return {"models": models, "kv_cache": kv_cache, "total": models + kv_cache}


def available_memory() -> int | None:
    """Bytes the machine can still give (``MemAvailable``); None where unknown."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_memory(config: Any, policy: torch.nn.Module, available: int | None) -> None:
    """Refuse a simulated run whose workers would not fit in memory, printing the estimate.

    Raises:
        ConfigError: the estimate is above ``available`` bytes.
    """
    estimate = memory_estimate(config, policy)
    if available is None or estimate["total"] <= available:
        return
    gib = 2**30
    raise ConfigError(
        f"runtime.num_workers: {config.runtime.num_workers} simulated workers x "
        f"{worker_slots(config)} slots need about {estimate['total'] / gib:.1f} GiB (model copies "
        f"{estimate['models'] / gib:.1f} GiB, key/value caches at rollout.max_episode_tokens "
        f"{estimate['kv_cache'] / gib:.1f} GiB); {available / gib:.1f} GiB is available. Use "
        "fewer workers, fewer rollout.num_slots or shorter episodes"
    )


class SimulatedWorkerPool:
    """Rollout workers on a virtual clock (a ``WorkerPool``; see the module docstring).

    Args:
        config: the run's config.
        policy: the learner's policy (its weights are the version ``version``).
        tokenizer: its tokenizer.
        version: the version of ``policy``'s current weights.
        clock: the run's virtual clock (the training loop's).
        costs: the run's cost model.

    Raises:
        ConfigError: the workers would not fit in memory.
    """

    def __init__(
        self,
        config: Any,
        policy: torch.nn.Module,
        tokenizer: Any,
        version: int,
        clock: VirtualClock,
        costs: CostModel,
    ) -> None:
        check_memory(config, policy, available_memory())
        self.config = config
        self.policy = policy
        self.tokenizer = tokenizer
        self.clock = clock
        self.costs = costs
        self.num_slots = worker_slots(config)
        self.weights = VirtualWeights(policy, version, clock.now())
        self.workers: dict[int, SimulatedWorker] = {}
        self._order = itertools.count()  # tie-breaker: events in the order they were scheduled
        self._events: list[tuple[float, int, int]] = []  # (time, order, worker)
        self._wake_at: dict[int, float | None] = {}
        self._outbox: list[tuple[float, int, int, tuple]] = []  # (time, order, worker, message)

    # -- the WorkerPool protocol --------------------------------------------------------------

    def launch(self, index: int, seed: int) -> None:
        if index in self.workers:
            self.workers.pop(index).close()
        self.workers[index] = SimulatedWorker(
            self.config,
            self.policy,
            self.tokenizer,
            seed=seed,
            num_slots=self.num_slots,
            costs=self.costs,
            weights=self.weights,
            post=lambda time, message, index=index: self._post(time, index, message),
            start=self.clock.now(),
        )
        self._wake_at[index] = None

    def submit(self, index: int, orders: list[Order]) -> None:
        worker = self.workers[index]
        worker.receive(orders)
        self._schedule(index, max(self.clock.now(), worker.busy_until))

    def receive(self, timeout: float) -> tuple[list[tuple[int, tuple]], set[int]]:
        """Run the workers until the next message is due; return every message due by then.

        ``timeout`` is ignored: virtual time moves to the next message, however far. Returns
        no message when nothing is running anywhere.
        """
        while self._events and (not self._outbox or self._events[0][0] < self._outbox[0][0]):
            self._wake_next()
        if not self._outbox:
            return [], set()
        due = max(self.clock.now(), self._outbox[0][0])
        self.clock.advance_to(due)
        messages = []
        while self._outbox and self._outbox[0][0] <= due:
            _, _, index, message = heapq.heappop(self._outbox)
            messages.append((index, message))
        return messages, set()

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """The learner spends ``publish_seconds`` publishing; then ``version`` is readable."""
        self.learner_busy(self.costs.publish_seconds)
        self.weights.publish(model, version, self.clock.now())
        self.weights.forget_before(self.clock.now())
        for index, worker in self.workers.items():
            if worker.tasks.waits_for_weights(worker.engine):
                self._schedule(index, max(self.clock.now(), worker.busy_until))

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()

    def reset(self, policy: torch.nn.Module, version: int) -> None:
        """Drop every worker, event and message: the pool as a resumed session builds it, with
        ``policy``'s weights as ``version``, readable now."""
        self.close()
        self.workers = {}
        self._events, self._outbox, self._wake_at = [], [], {}
        self.weights = VirtualWeights(policy, version, self.clock.now())

    # -- the learner's time -------------------------------------------------------------------

    def learner_busy(self, seconds: float) -> None:
        """The learner works for ``seconds``: the workers run on meanwhile."""
        until = self.clock.now() + seconds
        while self._events and self._events[0][0] <= until:
            self._wake_next()
        self.clock.advance_to(until)

    # -- events -------------------------------------------------------------------------------

    def _post(self, time: float, index: int, message: tuple) -> None:
        heapq.heappush(self._outbox, (time, next(self._order), index, message))

    def _schedule(self, index: int, time: float | None) -> None:
        """Wake worker ``index`` at ``time`` unless it is due to wake earlier."""
        current = self._wake_at.get(index)
        if time is None or (current is not None and current <= time):
            return
        self._wake_at[index] = time
        heapq.heappush(self._events, (time, next(self._order), index))

    def _wake_next(self) -> None:
        time, _, index = heapq.heappop(self._events)
        if self._wake_at.get(index) != time:
            return  # superseded by an earlier wake
        self._wake_at[index] = None
        self.clock.advance_to(time)
        self._schedule(index, self.workers[index].wake(time))

    @property
    def idle(self) -> bool:
        """Nothing is scheduled and no message is waiting."""
        return not self._events and not self._outbox
