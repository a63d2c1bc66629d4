"""Containment, on every backend, through CodeShift's ``step``: a program that reads files
outside its folder, connects to a listener on 127.0.0.1, fork-bombs, allocates 10 GB, loops
forever, writes a huge file or fills its disk is stopped and scored 0 with the reason in the
observation, by the limit meant for it; and the host is unaffected (no file written outside, no
connection received, no sandboxed process left, no folder left). No test bounds how long a step
takes: a loaded machine kills and cleans up more slowly, and that is no escape."""

from __future__ import annotations

import glob
import os
import socket
import tempfile
import threading
import time
import uuid

import pytest
from conftest import sandbox_processes

from sao_online.environments import CodeShiftEnv
from sao_online.environments.sandbox.base import run_uid_block

# The sandbox modules run on one worker: the containment tests find no sao-sandbox-* folder
# in the shared temp dir only while no other sandbox runs, and fork bombs and wall-clock
# limits must not meet each other's bursts.
pytestmark = pytest.mark.xdist_group("sandbox")

WALL_SECONDS = 3.0
#: A step still running after this long was never stopped: the test fails instead of hanging.
#: Patience, not a speed bound (the limits stop a program within seconds even on a busy machine).
NEVER_STOPPED_SECONDS = 300
#: How long killed processes may take to be reaped before one still alive counts as left over.
REAPING_SECONDS = 60


def _needs_namespaces(sandbox, what: str) -> None:
    if sandbox.name == "subprocess" and not sandbox.network_isolated:
        pytest.skip(f"subprocess sandbox without namespaces here: {what} is not contained")


def _host_leftovers() -> set[str]:
    """The host's sandbox folders that runs of this process made.

    As root each run's folder belongs to one of this process's run uids (``run_uid_block``), so
    the folders of tests running meanwhile in other processes (pytest-xdist workers) are left
    out; without root every folder counts.
    """
    folders = set(glob.glob(os.path.join(tempfile.gettempdir(), "sao-sandbox-*")))
    if os.geteuid() != 0:
        return folders
    ours_uids = run_uid_block()
    ours = set()
    for folder in folders:
        try:
            owner = os.stat(folder).st_uid
        except FileNotFoundError:  # removed meanwhile
            continue
        if owner in ours_uids:
            ours.add(folder)
    return ours


def _assert_no_process_left(sandbox, run_id: str) -> None:
    assert run_id
    deadline = time.monotonic() + REAPING_SECONDS
    while sandbox_processes(sandbox, run_id) and time.monotonic() < deadline:
        time.sleep(0.05)  # killed processes may take a moment to be reaped
    assert sandbox_processes(sandbox, run_id) == []


def _step_or_fail(env, action: str):
    """``env.step(action)``, failing the test if it has not returned after
    ``NEVER_STOPPED_SECONDS`` (the program's thread is a daemon: it dies with the test run)."""
    outcome = {}

    def step():
        try:
            outcome["result"] = env.step(action)
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=step, name="contained-step", daemon=True)
    thread.start()
    thread.join(NEVER_STOPPED_SECONDS)
    if "error" in outcome:
        raise outcome["error"]
    assert "result" in outcome, f"step still running after {NEVER_STOPPED_SECONDS} s: never stopped"
    return outcome["result"]


def observation_of(sandbox, body: str, preamble: str = ""):
    results = []

    class Recording:
        """The sandbox, keeping each result (for its run id)."""

        name = sandbox.name

        def run(self, *args, **kwargs):
            results.append(sandbox.run(*args, **kwargs))
            return results[-1]

    env = CodeShiftEnv(
        sandbox=sandbox, max_turns=1, limits={"cpu_seconds": 1, "wall_seconds": WALL_SECONDS}
    )
    env.sandbox = Recording()
    _, info = env.reset(seed=0)
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    program = f"{preamble}\ndef {info['task']}(x):\n{indented}\n"
    before = _host_leftovers()
    observation, reward, terminated, truncated, step_info = _step_or_fail(env, program)
    assert truncated and not terminated
    assert reward == 0.0 and step_info["tests_passed"] == 0
    assert step_info["sandbox"] == sandbox.name
    assert _host_leftovers() <= before, "a sandbox folder was left on the host"
    _assert_no_process_left(sandbox, results[-1].run_id)
    return observation, step_info


def test_reading_files_outside_the_folder(sandbox, tmp_path):
    _needs_namespaces(sandbox, "the host's files")
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    secret.chmod(0o600)
    observation, _ = observation_of(sandbox, f"return open({str(secret)!r}).read()")
    assert "the host's secret" not in observation
    assert "FileNotFoundError" in observation or "PermissionError" in observation, observation


def test_network_connection_to_a_host_listener(sandbox):
    _needs_namespaces(sandbox, "the network")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        observation, _ = observation_of(
            sandbox,
            f"""
import socket
with socket.create_connection(("127.0.0.1", {port}), timeout=1) as connection:
    connection.sendall(b"escaped")
return 1""",
        )
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
    finally:
        listener.close()
    assert "ConnectionRefusedError" in observation or "OSError" in observation, observation


def test_fork_bomb(sandbox):
    observation, info = observation_of(
        sandbox,
        """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass""",
    )
    assert info["status"] in ("timeout", "cpu_limit"), observation
    assert "not run: timeout" in observation or "not run: CPU time limit" in observation


def test_ten_gigabyte_allocation(sandbox):
    observation, _ = observation_of(sandbox, "return len(bytearray(10 * 1024 ** 3))")
    assert "memory limit: MemoryError" in observation


def test_infinite_loop(sandbox):
    observation, info = observation_of(sandbox, "while True:\n    pass")
    assert info["status"] in ("timeout", "cpu_limit")
    assert "not run: timeout" in observation or "not run: CPU time limit" in observation


def test_huge_file(sandbox):
    observation, _ = observation_of(
        sandbox,
        """
with open("huge.bin", "wb") as handle:
    for _ in range(10 * 1024):
        handle.write(b"x" * 1024 * 1024)
return 1""",
    )
    assert "file size limit" in observation


def test_filling_the_disk_with_many_files(sandbox):
    _needs_namespaces(sandbox, "the disk")
    observation, _ = observation_of(
        sandbox,
        """
for index in range(10 * 1024):
    with open("part%d.bin" % index, "wb") as handle:
        handle.write(b"x" * (1024 * 1024 - 1))
return 1""",
    )
    assert "No space left on device" in observation


def test_writing_outside_the_folder(sandbox, tmp_path):
    _needs_namespaces(sandbox, "/tmp")
    targets = [
        f"/tmp/sao-escape-{uuid.uuid4().hex}",
        str(tmp_path / "escape.txt"),
        f"/var/tmp/sao-escape-{uuid.uuid4().hex}",
        f"/dev/shm/sao-escape-{uuid.uuid4().hex}",
    ]
    body = (
        "".join(
            f"try:\n    open({target!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
            for target in targets
        )
        + "return 'written'"
    )
    observation, _ = observation_of(sandbox, body)
    assert "got 'written'" in observation  # the writes "worked", inside the sandbox only
    assert not any(os.path.exists(target) for target in targets)


def test_the_leftover_check_sees_a_folder_a_run_of_this_process_leaves(sandbox, monkeypatch):
    """What the no-folder-left assertions rely on: a folder this process's run failed to remove
    is counted, however many other processes run sandboxes at the same time."""
    if sandbox.name == "docker" or getattr(sandbox, "fork_server", None):
        pytest.skip("the docker sandbox and the fork server's runs make no host folder")
    import shutil

    from sao_online.environments.sandbox import TestCase, local

    kept = []
    monkeypatch.setattr(local.shutil, "rmtree", lambda path, **_: kept.append(str(path)))
    before = _host_leftovers()
    result = sandbox.run("def add(a, b):\n    return a + b\n", "add", [TestCase((1, 2), 3)])
    monkeypatch.undo()
    try:
        assert result.all_passed and len(kept) == 1
        assert _host_leftovers() - before == set(kept)
    finally:
        for folder in kept:
            shutil.rmtree(folder, ignore_errors=True)


def test_the_process_check_sees_a_fork_server_run_while_it_runs(sandbox):
    """What the no-process-left assertions rely on for the fork server, whose runs carry its
    command line rather than their run id: they are found below the server while running."""
    if not getattr(sandbox, "fork_server", None):
        pytest.skip("runs are found by their run id on this backend")
    from sao_online.environments.sandbox import TestCase

    program = "import time\ndef nap(x):\n    time.sleep(x)\n    return x\n"
    worker = threading.Thread(target=sandbox.run, args=(program, "nap", [TestCase((2,), 2)]))
    worker.start()
    seen = []
    while worker.is_alive() and not seen:
        seen = sandbox_processes(sandbox, "")
        time.sleep(0.02)
    worker.join()
    assert seen
    _assert_no_process_left(sandbox, "after")
