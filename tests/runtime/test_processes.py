"""Children from the preloaded forkserver (``sao_online.runtime.host.processes``) start as spawned
ones would: the heavy imports done, the parent's environment as it is at their start."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

from sao_online.runtime.host.processes import adopt_environment, process_context, start_server_early

VARIABLE = "SAO_ONLINE_TEST_PROCESSES"


def _report(environment: dict[str, str] | None, results) -> None:
    preloaded = all(name in sys.modules for name in ("transformers", "sao_online.runtime.launch"))
    if environment is not None:
        adopt_environment(environment)
    results.put(
        (
            preloaded,
            os.environ.get(VARIABLE),
            multiprocessing.parent_process().pid,
            os.getppid(),  # the process that forked this one: the server
        )
    )


def _child_report(context, environment: dict[str, str] | None) -> tuple:
    results = context.Queue()
    child = context.Process(target=_report, args=(environment, results))
    child.start()
    report = results.get(timeout=120)
    child.join(timeout=30)
    assert child.exitcode == 0
    return report


def test_children_start_preloaded_with_the_parents_current_environment(monkeypatch):
    context = process_context()
    monkeypatch.delenv(VARIABLE, raising=False)
    _child_report(context, dict(os.environ))  # the server is up from here on, without VARIABLE
    monkeypatch.setenv(VARIABLE, "set after the server started")
    preloaded, seen, parent, _ = _child_report(context, dict(os.environ))
    assert preloaded, "the child imported torch/transformers/sao-online itself"
    assert seen == "set after the server started" and parent == os.getpid()
    # Why children adopt the environment they are given: the server's copy is older.
    assert _child_report(context, None)[1] is None
    monkeypatch.delenv(VARIABLE)
    assert _child_report(context, dict(os.environ))[1] is None


def _server_pid() -> int | None:
    # multiprocessing keeps the server's pid in its module-level client; no public accessor.
    return multiprocessing.forkserver._forkserver._forkserver_pid


def test_the_server_starts_before_any_child_is_asked_for():
    # A fresh interpreter: here an earlier test's child may already have started the server.
    # The probe stops the server it started: otherwise the server would hold the probe's output
    # open (and a core busy) until its own imports finish.
    probe = (
        "import multiprocessing.forkserver as forkserver, os, signal\n"
        "from sao_online.runtime.host.processes import start_server_early\n"
        "assert forkserver._forkserver._forkserver_pid is None\n"
        "start_server_early()\n"
        "server = forkserver._forkserver._forkserver_pid\n"
        "print(server)\n"
        "os.kill(server, signal.SIGKILL)\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert int(output.stdout) > 0


def test_the_server_started_early_is_the_one_that_forks_the_children():
    start_server_early()
    server = _server_pid()
    assert server is not None and server != os.getpid()
    with open(f"/proc/{server}/cmdline", "rb") as cmdline:
        assert b"forkserver" in cmdline.read()
    start_server_early()  # idempotent: the running server is kept
    assert _server_pid() == server
    *_, forked_by = _child_report(process_context(), dict(os.environ))
    assert forked_by == server
