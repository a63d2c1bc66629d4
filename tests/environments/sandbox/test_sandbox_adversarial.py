"""Programs that turn the sandbox's own machinery against it, on every backend: a process that
ptraces the program and never collects it, two runs at once talking over an abstract Unix
socket, a key left in the kernel's keyrings for a later run, a wall limit that passes at once,
orphans that pile up as zombies, an exit with the code the backends use for "could not set
up", and signals met as a fresh interpreter would meet them."""

from __future__ import annotations

import platform
import threading
import time

import pytest
from conftest import sandbox_processes

from sao_online.environments.sandbox import Limits, TestCase

pytestmark = pytest.mark.xdist_group("sandbox")

IDENTITY = "def f(x):\n    return x\n"

#: The program's child PTRACE_SEIZEs it and never waits: when the program ends it stays a
#: zombie only the tracer can collect.
TRACED = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
parent = os.getpid()
if os.fork() == 0:
    libc.ptrace(0x4206, parent, 0, 0)
    while True:
        time.sleep(1)
time.sleep(0.3)
def f(x):
    return x
"""


def test_a_program_that_a_child_ptraces_ends_at_the_wall_limit_and_leaves_nothing(sandbox):
    limits = Limits(wall_seconds=2.0)
    bystander = []
    worker = threading.Thread(
        target=lambda: bystander.append(sandbox.run(IDENTITY, "f", [TestCase((1,), 1)]))
    )
    result = sandbox.run(TRACED, "f", [TestCase((1,), 1)], limits=limits)
    worker.start()
    worker.join()
    assert result.num_passed == 1  # the tests ran before the program ended
    assert bystander[0].all_passed  # and a run beside it is unaffected
    deadline = time.monotonic() + 60
    while sandbox_processes(sandbox, result.run_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes(sandbox, result.run_id) == []


LISTEN = r"""
import socket
def f(x):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind("\0sao-between-runs")
    listener.settimeout(3)
    try:
        return listener.recv(100).decode()
    except OSError:
        return "nothing"
"""
SEND = r"""
import socket, time
def f(x):
    time.sleep(0.5)
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"hello", "\0sao-between-runs")
        return "sent"
    except OSError as error:
        return error.strerror
"""


def test_two_runs_at_once_cannot_talk_over_an_abstract_socket(sandbox):
    if sandbox.name == "docker":
        pytest.skip("docker's runs share the container's network namespace (documented)")
    heard = []
    listener = threading.Thread(
        target=lambda: heard.append(sandbox.run(LISTEN, "f", [TestCase((0,), None)]))
    )
    listener.start()
    time.sleep(0.2)
    sent = sandbox.run(SEND, "f", [TestCase((0,), None)]).outcomes[0].value
    listener.join()
    assert heard[0].outcomes[0].value == "nothing"
    assert sent != "sent"


#: add_key's system call number where the harness's filter knows the machine.
ADD_KEY = {"x86_64": 248, "aarch64": 217}
PUT_KEY = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def f(x):
    data = b"left by an earlier run"
    if libc.syscall({add_key}, b"user", b"sao", data, len(data), -4) > 0:  # the user keyring
        return "stored"
    return errno.errorcode[ctypes.get_errno()]
"""


def test_a_run_cannot_store_a_kernel_key_for_a_later_run(sandbox):
    # Keys outlive their processes and can be shared across uids and with the host's session
    # keyring: the harness refuses the key calls (docker's own seccomp profile does too).
    if platform.machine() not in ADD_KEY:
        pytest.skip("the harness's filter knows no key calls for this machine")
    put = PUT_KEY.format(add_key=ADD_KEY[platform.machine()])
    stored = sandbox.run(put, "f", [TestCase((0,), None)]).outcomes[0].value
    assert stored in ("ENOSYS", "EPERM"), stored


def test_a_run_whose_wall_limit_passes_at_once_times_out(sandbox):
    if sandbox.name == "docker":
        pytest.skip("docker's exec takes its own time to start")
    result = sandbox.run(IDENTITY, "f", [TestCase((1,), 1)], limits=Limits(wall_seconds=0.001))
    assert result.status in ("timeout", "ok")  # answered, not given up on


ORPHANS = """
import os, time
def f(x):
    for _ in range(100):  # each child starts a grandchild and ends: 100 orphans that end too
        if os.fork() == 0:
            if os.fork() == 0:
                os._exit(0)
            os._exit(0)
        os.wait()
    time.sleep(0.5)  # the orphans end; their first process collects them
    started = 0
    for _ in range(10):
        try:
            child = os.fork()
        except OSError:
            continue
        if child == 0:
            os._exit(0)
        os.wait()
        started += 1
    return started
"""


def test_orphans_that_ended_do_not_use_up_the_process_limit(sandbox):
    result = sandbox.run(ORPHANS, "f", [TestCase((0,), 10)], limits=Limits(wall_seconds=20.0))
    assert result.all_passed, result.outcomes[0].reason


PROGRAMS = {
    "broken pipe": (
        "import os\ndef f(x):\n    r, w = os.pipe()\n    os.close(r)\n    try:\n"
        "        os.write(w, b'x')\n    except BrokenPipeError:\n        return 'raised'\n"
    ),
    "interrupt": (
        "import os, signal, time\ndef f(x):\n    try:\n        os.kill(os.getpid(), "
        "signal.SIGINT)\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n"
        "        return 'raised'\n"
    ),
}


@pytest.mark.parametrize("program", PROGRAMS)
def test_signals_are_met_as_in_an_interpreter_of_its_own(sandbox, program):
    result = sandbox.run(PROGRAMS[program], "f", [TestCase((0,), "raised")])
    assert result.status == "ok" and result.all_passed, result.outcomes[0].reason


def test_a_program_that_exits_with_the_set_up_failure_code_is_the_programs_doing(sandbox):
    result = sandbox.run("import os\nos._exit(125)\n", "f", [TestCase((0,), 0)])
    assert result.status == "exited" and "exit code 125" in result.detail
