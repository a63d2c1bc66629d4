"""The ``ray`` backend: rollout workers as Ray actors, the learner in the driver process.

The roles are the ``local`` backend's (``AsyncRuntime`` does admission, the group barrier,
staleness and faults); only the transport differs:

- each worker is a threaded actor (``RolloutActor``) that runs ``run_rollout_worker`` in a
  background thread; ``submit`` queues tasks, ``take`` returns the messages produced so far
  (waiting up to a timeout for the first), ``publish`` announces new weights;
- weights go through Ray's object store: the driver ``ray.put``s each published version once and
  sends every actor the reference; an actor fetches it when its engine next refreshes;
- a dead actor shows up as ``RayActorError`` on its pending ``take``; the runtime then drops and
  reissues its episodes and ``launch`` starts a fresh actor.

Ray is an optional dependency (``pip install 'sao-online[ray]'``). With ``runtime.ray_address``
unset the run starts a private local Ray instance (``num_workers`` CPUs) and shuts it down at the
end (even where ``RAY_ADDRESS`` is set); ``auto`` or ``ray://host:port`` joins an existing
cluster. ``runtime.ray_worker_resources`` (e.g. ``{rollout_node: 1}``) adds custom resources to
what each actor requests, so the actors go only to the nodes started with them (``ray start
--resources='{"rollout_node": 4}'``); ``RayWorkerPool.placements`` records the node each actor
runs on. Every node must be able to import ``sao_online`` and build the policy: each actor calls
``base_policy(config)``, so a local model path or GGUF file must exist on every node (install
them there, or pass a ``runtime_env`` when you ``ray.init`` yourself before calling
``run_experiment``: an already initialised Ray is used as it is). An actor the cluster has not
placed within 300 s stops the run with an error naming the free CPUs; a transient
``ActorUnavailableError`` is retried, only a dead actor is replaced.

Where the policy runs on CUDA (``model.device`` auto on a GPU machine, or cuda), each actor asks
Ray for an equal share of one GPU, ``1 / (num_workers + 1)`` (the learner keeps a share of its
own), so Ray places it on a GPU node and its engine decodes there; use ``auto`` or ``cuda``
rather than ``cuda:N`` with Ray, which renumbers the GPUs an actor sees from 0.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from typing import Any

import torch

from sao_online.config import ConfigError
from sao_online.models import resolve_device
from sao_online.runtime.workers.pool import worker_slots
from sao_online.runtime.workers.rollout_worker import Order, run_rollout_worker

_log = logging.getLogger(__name__)
_TAKE_SECONDS = 0.5  # how long an actor's take waits for a first message
_SCHEDULE_SECONDS = 300.0  # how long an actor may wait for the cluster to place it
_STOP_SECONDS = 3.0


def import_ray() -> Any:
    """Import Ray or explain how to get it."""
    try:
        import ray
    except ImportError as error:
        raise ConfigError(
            "runtime.backend: 'ray' needs the ray package; install it with "
            "pip install 'sao-online[ray]' (or pip install ray)"
        ) from error
    return ray


class _LatestWeights:
    """An actor's view of the learner's weights: the newest announced version and its object."""

    def __init__(self, version: int, reference: Any) -> None:
        self._lock = threading.Lock()
        self._version = version
        self._reference = reference

    @property
    def version(self) -> int:
        return self._version

    def offer(self, version: int, reference: Any) -> None:
        # Announcements may arrive out of order (threaded actor calls are not ordered).
        with self._lock:
            if version > self._version:
                self._version, self._reference = version, reference

    def load_into(self, model: torch.nn.Module) -> int:
        import ray

        with self._lock:
            version, reference = self._version, self._reference
        model.load_state_dict(ray.get(reference), strict=True)
        return version


class RolloutActor:
    """One rollout worker inside a Ray actor (wrapped with ``ray.remote`` by ``RayWorkerPool``).

    Args:
        seed: the seed of the worker's sampling stream.
        config_dict: the run's config.
        num_slots: concurrent episodes of its engine.
        version: the version of the weights in ``weights``.
        weights: a one-element list holding the ``ObjectRef`` of a ``state_dict`` (a list, so Ray
            passes the reference instead of resolving it).
    """

    def __init__(
        self,
        seed: int,
        config_dict: dict[str, Any],
        num_slots: int,
        version: int,
        weights: list[Any],
    ) -> None:
        torch.set_num_threads(1)
        self._inbox: queue.Queue[list[Order]] = queue.Queue()
        self._outbox: queue.Queue[tuple] = queue.Queue()
        self._stop = threading.Event()
        self._weights = _LatestWeights(version, weights[0])

        def receive(timeout: float) -> list[Order] | None:
            try:
                return self._inbox.get(timeout=timeout) if timeout > 0 else self._inbox.get_nowait()
            except queue.Empty:
                return None

        def body() -> None:
            try:
                run_rollout_worker(
                    config_dict=config_dict,
                    seed=seed,
                    num_slots=num_slots,
                    in_flight=bool(config_dict["runtime"]["in_flight_updates"]),
                    weights=self._weights,
                    receive=receive,
                    emit=self._outbox.put,
                    should_stop=self._stop.is_set,
                )
            except BaseException:  # noqa: BLE001  (already reported through the outbox)
                self._stop.set()

        self._thread = threading.Thread(target=body, name="sao-rollout", daemon=True)
        self._thread.start()

    def submit(self, orders: list[Order]) -> None:
        self._inbox.put(orders)

    def publish(self, version: int, weights: list[Any]) -> None:
        self._weights.offer(version, weights[0])

    def take(self, timeout: float) -> list[tuple]:
        """Messages produced so far; waits up to ``timeout`` s for the first one."""
        messages = []
        try:
            messages.append(self._outbox.get(timeout=timeout))
            while True:
                messages.append(self._outbox.get_nowait())
        except queue.Empty:
            pass
        return messages

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=_STOP_SECONDS)

    def node_id(self) -> str:
        """The Ray node this actor runs on (hex id)."""
        import ray

        return ray.get_runtime_context().get_node_id()


class RayWorkerPool:
    """Rollout workers as Ray actors (a ``WorkerPool``).

    Args:
        config: the run's config.
        model: the learner's policy.
        version: the version of ``model``'s current weights.
    """

    def __init__(self, config: Any, model: torch.nn.Module, version: int) -> None:
        ray = self.ray = import_ray()
        self.config = config
        self.num_slots = worker_slots(config)
        self.actors: dict[int, Any] = {}
        self.pending_take: dict[int, Any] = {}
        self.unscheduled: dict[int, tuple[Any, float]] = {}  # index -> (node ref, deadline)
        self.placements: dict[int, str] = {}  # index -> node id of its latest actor
        self.closed = False
        self.owns_ray = not ray.is_initialized()
        if self.owns_ray:
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": True,
                "logging_level": logging.WARNING,
            }
            if config.runtime.ray_address:
                ray.init(address=config.runtime.ray_address, **options)
            else:  # "local": a new private instance even where RAY_ADDRESS names a cluster
                ray.init(address="local", num_cpus=config.runtime.num_workers, **options)
        try:
            cpus = ray.cluster_resources().get("CPU", 0)
            if cpus < config.runtime.num_workers:
                raise ConfigError(
                    f"runtime.num_workers: {config.runtime.num_workers} actors need one CPU "
                    f"each, the Ray cluster has {cpus:g}"
                )
            resources = dict(config.runtime.ray_worker_resources)
            total = ray.cluster_resources()
            for name, amount in resources.items():
                if total.get(name, 0) < amount:
                    raise ConfigError(
                        f"runtime.ray_worker_resources: each actor asks for {amount:g} "
                        f"{name!r}, the Ray cluster has {total.get(name, 0):g}"
                    )
            self.gpu_share = worker_gpu_share(config)
            options: dict[str, Any] = {
                "num_cpus": 1,
                "num_gpus": self.gpu_share,
                "max_concurrency": 4,
            }
            if resources:
                options["resources"] = resources
            self.actor_class = ray.remote(**options)(RolloutActor)
            self.version = version
            self.weights = ray.put(_cpu_state(model))
        except BaseException:
            self.close()  # a Ray this pool started is not left running
            raise

    def launch(self, index: int, seed: int) -> None:
        if index in self.actors:
            self.ray.kill(self.actors.pop(index), no_restart=True)
            self.pending_take.pop(index, None)
        actor = self.actor_class.remote(
            seed, self.config.to_dict(), self.num_slots, self.version, [self.weights]
        )
        self.actors[index] = actor
        self.pending_take[index] = actor.take.remote(_TAKE_SECONDS)
        # An actor the cluster cannot place stays pending without an error: give it a deadline.
        # Its node id answers once it is placed and constructed.
        self.unscheduled[index] = (actor.node_id.remote(), time.time() + _SCHEDULE_SECONDS)

    def submit(self, index: int, orders: list[Order]) -> None:
        self.actors[index].submit.remote(orders)  # a dead actor is reported by its take

    def receive(self, timeout: float) -> tuple[list[tuple[int, tuple]], set[int]]:
        ray = self.ray
        self._check_scheduled()
        index_of = {reference: index for index, reference in self.pending_take.items()}
        ready, waiting = ray.wait(list(index_of), num_returns=1, timeout=timeout)
        if ready and waiting:  # and whatever else is done by now
            more, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
            ready += more
        messages: list[tuple[int, tuple]] = []
        dead: set[int] = set()
        for reference in ready:
            index = index_of[reference]
            try:
                messages.extend((index, message) for message in ray.get(reference))
            except ray.exceptions.ActorUnavailableError:
                pass  # a transient fault (network, restart in progress): ask again below
            except ray.exceptions.RayActorError as error:
                # Say why (a crash at start-up would otherwise only show as "died N times").
                _log.warning("rollout actor %d died: %s", index, str(error).strip()[:2000])
                dead.add(index)
                del self.pending_take[index]
                continue
            self.pending_take[index] = self.actors[index].take.remote(_TAKE_SECONDS)
        return messages, dead

    def _record_placements(self) -> None:
        """Move the actors that have been placed since the last look into ``placements``."""
        if not self.unscheduled:
            return
        refs = {ref: index for index, (ref, _) in self.unscheduled.items()}
        placed, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=0)
        for ref in placed:
            index = refs[ref]
            del self.unscheduled[index]
            # An actor that died at start-up has no node to record; its pending take says why.
            with contextlib.suppress(self.ray.exceptions.RayError):
                self.placements[index] = self.ray.get(ref)

    def _check_scheduled(self) -> None:
        """Raise when an actor is not placed and started on the cluster by its deadline."""
        if not self.unscheduled:
            return
        self._record_placements()
        now = time.time()
        late = sorted(index for index, (_, deadline) in self.unscheduled.items() if now > deadline)
        if late:
            free = self.ray.available_resources()
            needs, free_gpus = "one CPU", ""
            if self.gpu_share:
                needs = f"one CPU and {self.gpu_share:.3g} GPU"
                free_gpus = f", {free.get('GPU', 0):g} GPUs free"
            raise RuntimeError(
                f"rollout actors {late} were not placed and started on the Ray cluster "
                f"within {_SCHEDULE_SECONDS:g} s (each needs {needs}; {free.get('CPU', 0):g} "
                f"CPUs free now{free_gpus})"
            )

    def publish(self, model: torch.nn.Module, version: int) -> None:
        self.version = version
        self.weights = self.ray.put(_cpu_state(model))
        for actor in self.actors.values():
            actor.publish.remote(version, [self.weights])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        ray = self.ray
        stops = [actor.stop.remote() for actor in self.actors.values()]
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=_STOP_SECONDS)
            self._record_placements()
        for actor in self.actors.values():
            ray.kill(actor, no_restart=True)
        self.actors, self.pending_take, self.unscheduled = {}, {}, {}
        if self.owns_ray:
            ray.shutdown()


def worker_gpu_share(config: Any) -> float:
    """GPU share each actor asks for: 0 on the CPU, else an equal share with the learner."""
    if resolve_device(config.model.device).type != "cuda":
        return 0.0
    return 1.0 / (config.runtime.num_workers + 1)


def _cpu_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}
