"""Fresh processes for rollout workers and ``compare``'s runs, from a preloaded forkserver.

A spawned process spends about 5 s importing torch, transformers and the package before it does
any work, at every start (every run of a comparison, every rollout worker, every restart after a
crash). A forkserver pays that once: the server is a fresh interpreter that imports the modules
below and forks a child per process asked for. What a child sees is what spawn would give it:

- nothing of the parent's state: the server never ran a learner (no threads, no torch state);
- the parent's main script, imported again in the child (so a script without a
  ``__main__`` guard is caught the same way, ``main_guard.py``), its ``sys.path`` and folder;
- the parent's environment variables as they are when the child starts (``adopt_environment``;
  the server's own copy dates from its start).

The server starts with the first child of a process (or earlier, ``start_server_early``) and
serves every later one; it exits with that process.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
from typing import Any

#: Imported once by the server: everything a run or a rollout worker needs at start.
PRELOAD = ["sao_online.runtime.launch", "sao_online.runtime.local"]


def process_context() -> Any:
    """The multiprocessing context for a run's child processes (forkserver, preloaded)."""
    context = multiprocessing.get_context("forkserver")
    # Replaces the default preload (the main script): each child imports that itself, as under
    # spawn, so only a child that starts a run while importing it fails, and says why.
    context.set_forkserver_preload(PRELOAD)
    return context


def start_server_early() -> None:
    """Start the forkserver now, so its imports (about 3 s) overlap what the caller does next.

    Otherwise the first child's ``start()`` waits for them: a run of the local backend would
    stand still while the server imports what the command itself has just imported. Callers
    that will start children call this as soon as their input is checked (a config that cannot
    run should start no process): the ``sao-online`` command line for ``run`` on the local
    backend, ``bench async`` and ``bench throughput``; ``compare`` (and so ``demo``) and
    ``run_experiment`` on the local backend. Idempotent: a running server is kept.
    """
    process_context()
    multiprocessing.forkserver.ensure_running()


def adopt_environment(environment: dict[str, str]) -> None:
    """Make a child's environment variables the parent's (``dict(os.environ)`` at launch)."""
    os.environ.clear()
    os.environ.update(environment)
