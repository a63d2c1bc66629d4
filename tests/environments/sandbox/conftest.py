"""One sandbox per backend and test module; a backend that cannot run here is skipped with the
reason (``-ra`` prints it), so CI shows which engines really ran."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sao_online.environments.sandbox import BACKENDS, SandboxUnavailable, make_sandbox

#: A phrase of the harness source: every sandboxed Python process carries it in its command line.
HARNESS_MARKER = "The program every sandbox runs"


#: Every backend; the Docker one marked ``docker`` (it needs the engine: `make test` leaves it
#: out, `make test-all` runs it).
BACKEND_PARAMS = [
    pytest.param(name, marks=pytest.mark.docker) if name == "docker" else name for name in BACKENDS
]


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def sandbox(request):
    try:
        box = make_sandbox(request.param)
    except SandboxUnavailable as error:
        pytest.skip(str(error))
    yield box
    box.close()


def sandbox_processes(run_id: str) -> list[int]:
    """PIDs of the live processes of one run (any backend: Docker's are host processes too)."""
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
