"""The ``subprocess`` sandbox's in-interpreter confinement (``confine.py``): what a run is left
with as root (no capabilities, no way to gain any), that it confines itself for an unprivileged
user too (a user namespace), and how it reports the program's end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile

import pytest

from sao_online.environments.sandbox import Limits, TestCase, confine, local, make_sandbox

pytestmark = pytest.mark.xdist_group("sandbox")

STATUS = """
def status(x):
    fields = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    return [fields[name].strip() for name in
            ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")]
"""


@pytest.fixture(scope="module")
def confined():
    if local.namespaces_problem():
        pytest.skip("no namespaces here: " + local.namespaces_problem())
    with make_sandbox("subprocess") as box:
        yield box


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="as another user the program is root of its own "
    "user namespace, with its capabilities there",
)
def test_a_run_has_no_capabilities_and_cannot_gain_any(confined):
    result = confined.run(STATUS, "status", [TestCase((0,), None)])
    assert result.status == "ok"
    no_capabilities = "0" * 16
    assert result.outcomes[0].value == [no_capabilities] * 5 + ["1"]


def test_usr_is_bound_so_that_set_user_id_programs_gain_nothing(confined):
    program = (
        "import os\ndef probe(x):\n    return bool(os.statvfs('/usr').f_flag & os.ST_NOSUID)\n"
    )
    assert confined.run(program, "probe", [TestCase((0,), True)]).num_passed == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a run as another user")
def test_an_unprivileged_user_gets_the_same_private_root():
    if local.namespaces_problem():
        pytest.skip("no namespaces here")
    command = local._confined_command("/usr/bin/python3", Limits(), 0, "probe")
    config = json.loads(command[5])
    config["uid"] = None  # what a caller that is not root asks for
    command[5] = json.dumps(config)
    command[4] = command[4].replace(
        local.HARNESS_SOURCE,
        "import json, os\nprint(json.dumps([os.getcwd(), sorted(os.listdir('/'))]))",
    )
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    folder = tempfile.mkdtemp(prefix="sao-sandbox-")
    os.chmod(folder, 0o777)
    try:
        probe = subprocess.run(
            nobody + command, cwd=folder, capture_output=True, text=True, timeout=60
        )
    finally:
        os.rmdir(folder)
    if probe.returncode == confine.SETUP_FAILED:
        pytest.skip("unprivileged user namespaces are not allowed here")
    where, listing = json.loads(probe.stdout)
    assert where == "/work"
    expected = {
        "dev",
        "proc",
        "tmp",
        "usr",
        "work",
        *(link.split("/")[1] for link in local._root_folders()[0]),
        *local._root_folders()[1],
    }
    assert set(listing) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (0, 0),
        (3 << 8, 3),  # exit(3)
        (signal.SIGXCPU, 128 + signal.SIGXCPU),  # killed by a signal, as a shell reports it
        (signal.SIGKILL | 0x80, 128 + signal.SIGKILL),  # and with a core dump flag
    ],
)
def test_exit_status_is_reported_as_a_shell_does(status, expected):
    assert confine.exit_status(status) == expected


LOOK = """
import os, socket
def look(x):
    try:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        socket.create_connection(listener.getsockname(), timeout=1)
        network = "loopback works"
    except OSError as error:
        network = error.strerror
    return [sorted(int(name) for name in os.listdir("/proc") if name.isdigit()), os.getpid(),
            network]
"""


@pytest.fixture(scope="module")
def served(confined):
    if confined.fork_server is None:
        pytest.skip("the fork server runs as root only")
    return confined


def test_a_fork_server_run_sees_only_its_own_processes_and_no_network(served):
    for _ in range(2):
        processes, own, network = served.run(LOOK, "look", [TestCase((0,), None)]).outcomes[0].value
        # its PID namespace's first process and itself: neither the server nor other runs
        assert processes == [1, own] and own == 2
        assert network == "Network is unreachable"  # a network namespace of its own, loopback down


def test_closing_ends_the_fork_server_and_a_later_run_starts_another(served):
    served.run(LOOK, "look", [TestCase((0,), None)])
    first = served.fork_server.pid
    served.close()
    assert served.fork_server.pid is None
    assert not os.path.exists(f"/proc/{first}")
    assert served.run(LOOK, "look", [TestCase((0,), None)]).status == "ok"
    assert served.fork_server.pid not in (None, first)
