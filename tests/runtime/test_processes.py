"""Children from the preloaded forkserver (``sao_online.runtime.processes``) start as spawned
ones would: the heavy imports done, the parent's environment as it is at their start."""

from __future__ import annotations

import multiprocessing
import os
import sys

from sao_online.runtime.processes import adopt_environment, process_context

VARIABLE = "SAO_ONLINE_TEST_PROCESSES"


def _report(environment: dict[str, str] | None, results) -> None:
    preloaded = all(name in sys.modules for name in ("transformers", "sao_online.runtime.launch"))
    if environment is not None:
        adopt_environment(environment)
    results.put((preloaded, os.environ.get(VARIABLE), multiprocessing.parent_process().pid))


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
    preloaded, seen, parent = _child_report(context, dict(os.environ))
    assert preloaded, "the child imported torch/transformers/sao-online itself"
    assert seen == "set after the server started" and parent == os.getpid()
    # Why children adopt the environment they are given: the server's copy is older.
    assert _child_report(context, None)[1] is None
    monkeypatch.delenv(VARIABLE)
    assert _child_report(context, dict(os.environ))[1] is None
