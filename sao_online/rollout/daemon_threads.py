"""Threads for calls that may never return: daemons, never joined, and replaced when given up.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit, so one call
that hangs (a user environment's ``step``) keeps the process from exiting, and a thread stuck
in it is lost to the pool for good. ``DaemonThreads`` keeps up to ``size`` daemon threads that
take calls from one queue; ``give_up(task)`` writes off the thread running a call that is past
its deadline (it leaves once the call returns, if ever) and lets a fresh thread take its place.
Keeping the threads between calls makes handing a call over far cheaper than starting a thread
for each one.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class Task:
    """One submitted call: its ``future`` gets ``(result, seconds)`` or the exception raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: Future = Future()
        self.given_up = False
        self.thread_written_off = False  # given up while its thread was in the call


class DaemonThreads:
    """Up to ``size`` daemon threads running submitted calls in order of submission.

    Args:
        size: threads running calls at once (calls beyond it wait in the queue).
        name: prefix of the threads' names.
    """

    def __init__(self, size: int, name: str = "sao-env") -> None:
        if size < 1:
            raise ValueError(f"DaemonThreads: size must be >= 1, got {size}")
        self.size = size
        self.name = name
        self._tasks: queue.SimpleQueue[Task] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Every queued task is owed a thread: an idle one woken for it, a new one, or (when
        # neither is left) the next busy thread to finish ("unclaimed").
        self._working = 0  # threads not written off
        self._idle = 0  # of those, the ones waiting for a task nobody else will take
        self._unclaimed = 0
        self._started = 0

    def submit(self, fn: Callable[[], Any]) -> Task:
        """Queue ``fn``; its task's future gets ``(fn(), seconds it took)`` or its exception."""
        task = Task(fn)
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._working < self.size:
                self._start_thread()
            else:
                self._unclaimed += 1
        self._tasks.put(task)
        return task

    def give_up(self, task: Task) -> None:
        """Stop counting on the thread that runs ``task`` (past its deadline); a new thread
        takes its place for the calls still to come. A task not started yet is dropped."""
        with self._lock:
            if task.given_up:
                return
            task.given_up = True
            if task.future.running():  # its thread is in the call: write that thread off
                task.thread_written_off = True
                self._working -= 1
                if self._unclaimed:
                    self._unclaimed -= 1
                    self._start_thread()

    def _start_thread(self) -> None:  # with the lock held
        self._working += 1
        self._started += 1
        threading.Thread(
            target=self._work, name=f"{self.name}-{self._started}", daemon=True
        ).start()

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            with self._lock:
                runs = not task.given_up and task.future.set_running_or_notify_cancel()
            if runs:
                began = time.perf_counter()
                try:
                    result = task.fn()
                except BaseException as error:  # noqa: BLE001  (handed to the waiting side)
                    task.future.set_exception(error)
                else:
                    task.future.set_result((result, time.perf_counter() - began))
            with self._lock:
                if task.thread_written_off:
                    return  # written off (and replaced) while in the call: leave
                if self._unclaimed:
                    self._unclaimed -= 1  # a task queued while every thread was busy
                else:
                    self._idle += 1
