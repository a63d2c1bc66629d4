"""One sandbox per backend and test module; a backend that cannot run here is skipped with the
reason (``-ra`` prints it), so CI shows which engines really ran."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sao_online.environments.sandbox import (
    BACKENDS,
    SandboxUnavailable,
    SubprocessSandbox,
    make_sandbox,
)

#: A phrase of the harness source: every sandboxed Python process carries it in its command line.
HARNESS_MARKER = "The program every sandbox runs"


#: Every backend; the Docker one marked ``docker`` (it needs the engine: `make test` leaves it
#: out, `make test-all` runs it). ``subprocess-per-run``: the subprocess backend without its
#: fork server (an interpreter per run), which is what it does where it is not root.
BACKEND_PARAMS = [
    pytest.param(name, marks=pytest.mark.docker) if name == "docker" else name for name in BACKENDS
] + ["subprocess-per-run"]


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def sandbox(request):
    try:
        if request.param == "subprocess-per-run":
            box = SubprocessSandbox(fork_server=False)
        else:
            box = make_sandbox(request.param)
    except SandboxUnavailable as error:
        pytest.skip(str(error))
    yield box
    box.close()


def sandbox_processes(sandbox, run_id: str) -> list[int]:
    """PIDs of the live processes of one run (any backend: Docker's are host processes too).
    The fork server's runs carry the server's command line, so there: every live process below
    the server's first process (each run's, and what a run left, reparented to it)."""
    server = getattr(sandbox, "fork_server", None)
    if server is not None:
        return _descendants(server.pid, skip_levels=2) if server.pid else []
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command_line = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (
            HARNESS_MARKER.encode() in command_line
            and run_id.encode() in command_line
            and state != "Z"
        ):
            pids.append(int(entry.name))
    return pids


def _descendants(pid: int, skip_levels: int) -> list[int]:
    """Live descendants of ``pid`` more than ``skip_levels - 1`` levels below it."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found = []
    for child in parents:
        depth, at = 0, child
        while at in parents and at != pid:
            at, depth = parents[at], depth + 1
        if at == pid and depth >= skip_levels:
            found.append(child)
    return found
