"""The subprocess backend's fork server as the host sees it: a server that dies under runs from
several threads is replaced and runs go on, a process forked from the host neither keeps the
parent's server alive nor uses it, and closing ends it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from sao_online.environments.sandbox import SandboxUnavailable, SubprocessSandbox, TestCase
from sao_online.environments.sandbox import fork_server as fork_servers
from sao_online.environments.sandbox.local import namespaces_problem

pytestmark = pytest.mark.xdist_group("sandbox")

NAP = "import time\ndef f(x):\n    time.sleep(0.2)\n    return x\n"


@pytest.fixture
def served():
    if os.geteuid() != 0 or namespaces_problem():
        pytest.skip("the fork server runs as root with namespaces only")
    box = SubprocessSandbox()
    yield box
    box.close()


def test_a_server_that_dies_under_runs_from_several_threads_is_replaced(served):
    served.run(NAP, "f", [TestCase((1,), 1)])
    first = served.fork_server.pid
    stop, log = time.monotonic() + 6, []

    def runs():
        while time.monotonic() < stop:
            try:
                log.append((time.monotonic(), served.run(NAP, "f", [TestCase((1,), 1)]).status))
            except SandboxUnavailable:
                log.append((time.monotonic(), "unavailable"))

    threads = [threading.Thread(target=runs) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    killed = time.monotonic()
    os.kill(first, signal.SIGKILL)
    for thread in threads:
        thread.join()
    failed = [at for at, status in log if status != "ok"]
    assert len(failed) <= len(threads)  # only the runs in flight when it died
    assert any(status == "ok" and at > max(failed, default=killed) for at, status in log)
    assert served.fork_server.pid not in (None, first)


def test_a_forked_child_has_its_own_server_and_the_parents_close_is_not_held_up(served):
    served.run(NAP, "f", [TestCase((1,), 1)])
    parent_server = served.fork_server.pid
    reader, writer = os.pipe()  # child -> parent
    go_reader, go_writer = os.pipe()  # parent -> child
    child = os.fork()
    if child == 0:  # pragma: no cover  (the child reports through the pipe)
        try:
            result = served.run(NAP, "f", [TestCase((1,), 1)])
            mine = served.fork_server.pid
            os.write(writer, f"{result.status} {mine != parent_server}".encode())
            os.read(go_reader, 1)  # stay alive until the parent has closed its sandbox
        finally:
            os._exit(0)
    assert os.read(reader, 100).decode() == "ok True"
    started = time.monotonic()
    served.close()  # the child still holds a copy of the parent's descriptors
    assert time.monotonic() - started < fork_servers.ANSWER_GRACE_SECONDS / 2
    os.write(go_writer, b"x")
    os.waitpid(child, 0)
