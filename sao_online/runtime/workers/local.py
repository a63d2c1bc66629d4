"""The ``local`` backend: rollout workers in fresh processes, the learner in the main process.

Each worker process (one torch thread) runs ``run_rollout_worker``; it comes from the preloaded
forkserver of ``processes.py``, so a start or a restart after a crash skips the imports. Tasks
reach it through a pipe; trajectories come back through another, sent by a thread so a busy
learner never stalls decoding. Weights are published through shared memory (``SharedWeights``)
with a version counter. The orchestration (admission, group barrier, staleness, faults) is
``AsyncRuntime``'s.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import pickle
import queue
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from sao_online.runtime.host.processes import adopt_environment, process_context, watch_parent
from sao_online.runtime.workers.pool import worker_slots
from sao_online.runtime.workers.rollout_worker import Order, run_rollout_worker
from sao_online.runtime.workers.weights import SharedWeights

_STOP_JOIN_SECONDS = 3.0


def _worker_main(
    environment: dict[str, str],
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
    """Body of one rollout-worker process (module level so the child can import it)."""
    watch_parent()  # ends with the learner's process, however that one ends
    adopt_environment(environment)
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

    def receive(timeout: float) -> list[Order] | None:
        return pickle.loads(tasks.recv_bytes()) if tasks.poll(timeout) else None

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    failed = False
    try:
        run_rollout_worker(
            config_dict=config_dict,
            seed=seed,
            num_slots=num_slots,
            in_flight=in_flight,
            weights=weights,
            receive=receive,
            emit=lambda message: outbox.put(pickle.dumps(message)),
            should_stop=stop.is_set,
        )
    except BaseException:  # noqa: BLE001  (already reported through emit)
        failed = True
    outbox.put(None)
    sender.join(timeout=_STOP_JOIN_SECONDS)
    if failed:
        raise SystemExit(1)


@dataclass
class _WorkerProcess:
    process: Any
    tasks: Any  # Connection, main -> worker
    results: Any  # Connection, worker -> main


class ProcessWorkerPool:
    """Rollout workers as child processes (a ``WorkerPool``).

    Args:
        config: the run's config.
        model: the learner's policy (its ``state_dict`` layout is shared with the workers).
        version: the version of ``model``'s current weights.
    """

    def __init__(self, config: Any, model: torch.nn.Module, version: int) -> None:
        self.config = config
        self.context = process_context()
        self.weights = SharedWeights(model, self.context, version=version)
        self.stop = self.context.Event()
        self.num_slots = worker_slots(config)
        self.workers: dict[int, _WorkerProcess] = {}

    def launch(self, index: int, seed: int) -> None:
        if index in self.workers:
            self._stop_worker(self.workers.pop(index), join_seconds=_STOP_JOIN_SECONDS)
        task_reader, task_writer = self.context.Pipe(duplex=False)
        result_reader, result_writer = self.context.Pipe(duplex=False)
        process = self.context.Process(
            target=_worker_main,
            name=f"sao-rollout-{index}",
            daemon=True,
            args=(
                dict(os.environ),
                index,
                seed,
                self.config.to_dict(),
                self.weights,
                task_reader,
                result_writer,
                self.stop,
                self.config.runtime.in_flight_updates,
                self.num_slots,
            ),
        )
        process.start()
        # Close our copies of the child's ends: a dead worker then reads as EOF / broken pipe.
        task_reader.close()
        result_writer.close()
        self.workers[index] = _WorkerProcess(process, task_writer, result_reader)

    def submit(self, index: int, orders: list[Order]) -> None:
        # A worker that died meanwhile is reported by receive, and its tasks are issued again.
        with contextlib.suppress(OSError):
            self.workers[index].tasks.send_bytes(pickle.dumps(orders))

    def receive(self, timeout: float) -> tuple[list[tuple[int, tuple]], set[int]]:
        by_connection = {id(worker.results): index for index, worker in self.workers.items()}
        readable = multiprocessing.connection.wait(
            [worker.results for worker in self.workers.values()], timeout=timeout
        )
        messages: list[tuple[int, tuple]] = []
        dead: set[int] = set()

        def read_available(index: int, connection: Any) -> None:
            try:
                while connection.poll():
                    messages.append((index, pickle.loads(connection.recv_bytes())))
            except (EOFError, OSError):
                dead.add(index)

        for connection in readable:
            read_available(by_connection[id(connection)], connection)
        for index, worker in self.workers.items():
            if index not in dead and not worker.process.is_alive():
                # What it sent before exiting (its error report, say) may have arrived since.
                read_available(index, worker.results)
                dead.add(index)
        return messages, dead

    def publish(self, model: torch.nn.Module, version: int) -> None:
        self.weights.publish(model, version)

    def _stop_worker(self, worker: _WorkerProcess, join_seconds: float) -> None:
        worker.process.join(timeout=join_seconds)
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join(timeout=_STOP_JOIN_SECONDS)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.tasks.close()
        worker.results.close()

    def close(self) -> None:
        self.stop.set()
        deadline = time.time() + _STOP_JOIN_SECONDS
        for worker in self.workers.values():
            worker.process.join(timeout=max(0.0, deadline - time.time()))
        for worker in self.workers.values():
            self._stop_worker(worker, join_seconds=0.0)
        self.workers.clear()
