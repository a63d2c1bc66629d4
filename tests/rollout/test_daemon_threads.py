"""``DaemonThreads``: calls run concurrently up to the size, every queued call gets a thread, a
call given up on has its thread replaced, and no thread keeps the interpreter from exiting."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from sao_online.rollout.daemon_threads import DaemonThreads


def test_calls_run_side_by_side_up_to_the_size_and_every_queued_call_runs():
    threads = DaemonThreads(3)
    inside, release = threading.Semaphore(0), threading.Event()

    def blocking(value):
        def call():
            inside.release()
            release.wait()
            return value

        return call

    first = [threads.submit(blocking(k)) for k in range(3)]
    for _ in range(3):  # all three are in their call at once
        assert inside.acquire(timeout=60)
    later = [threads.submit(lambda k=k: 10 * k) for k in range(5)]  # queued: no thread is free
    assert not any(task.future.done() for task in later)
    release.set()
    assert [task.future.result(timeout=60)[0] for task in first] == [0, 1, 2]
    assert [task.future.result(timeout=60)[0] for task in later] == [0, 10, 20, 30, 40]
    assert threads._working == 3 and threads._unclaimed == 0  # noqa: SLF001


def test_a_call_given_up_on_has_its_thread_replaced():
    threads = DaemonThreads(1)
    hang, inside = threading.Event(), threading.Event()
    stuck = threads.submit(lambda: (inside.set(), hang.wait()))
    assert inside.wait(timeout=60)
    waiting = threads.submit(lambda: "after")  # queued behind the stuck call
    threads.give_up(stuck)
    assert waiting.future.result(timeout=60)[0] == "after"  # a new thread took it
    assert threads.submit(lambda: "again").future.result(timeout=60)[0] == "again"
    hang.set()  # the stuck call returns; its written-off thread leaves
    stuck.future.result(timeout=60)
    assert threads._working == 1  # noqa: SLF001


def test_an_exception_reaches_the_future():
    task = DaemonThreads(1).submit(lambda: 1 / 0)
    assert isinstance(task.future.exception(timeout=60), ZeroDivisionError)


@pytest.mark.e2e
def test_a_hung_call_does_not_keep_the_interpreter_from_exiting():
    code = (
        "import threading\n"
        "from sao_online.rollout.daemon_threads import DaemonThreads\n"
        "DaemonThreads(1).submit(threading.Event().wait)\n"
        "print('exiting')\n"
    )
    # A hang guard, not a speed bound: with joined threads this never returns.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "exiting"
