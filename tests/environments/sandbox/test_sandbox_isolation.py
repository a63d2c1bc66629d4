"""What one run leaves for the next and what it can see, on every backend: nothing written in a
run (files in any writable place, System V and POSIX IPC objects) is there for the next run,
each writable place is size-limited, no run directory or home folder of the host is readable,
a run that hits the output limit leaves the sandbox working, and ``auto`` says which guarantee
is missing when it falls back to a backend that cannot give it."""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
import warnings
from pathlib import Path

import pytest

from sao_online.environments.sandbox import Limits, TestCase, make_sandbox

# The sandbox modules run on one worker: the containment tests find no sao-sandbox-* folder
# in the shared temp dir only while no other sandbox runs, and fork bombs and wall-clock
# limits must not meet each other's bursts.
pytestmark = pytest.mark.xdist_group("sandbox")

#: Writable places a program might try, and the ones it is given.
PLACES = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/work", "/dev/mqueue", "/root", "/home"]

#: Plants a marker in every place the run can write, and a System V shared-memory segment and a
#: POSIX message queue (ctypes: the standard library has no API for either).
PLANT = """
import ctypes, ctypes.util, os, tempfile
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
def plant(marker):
    written = []
    places = PLACES + [os.getcwd(), tempfile.gettempdir()]
    for place in places:
        try:
            with open(os.path.join(place, "left-" + marker), "w") as handle:
                handle.write("hello from an earlier run")
            written.append(place)
        except OSError:
            pass
    key = int(marker[:7], 16)
    segment = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    if segment >= 0:
        written.append("sysv-shm")
    libc.mq_open.restype = ctypes.c_int
    queue = libc.mq_open(("/left-" + marker).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
    if queue >= 0:
        written.append("posix-mq")
    return written
"""

#: Looks for what ``plant`` left, in every place (including ones this run cannot write to).
FIND = """
import ctypes, ctypes.util, os, tempfile
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
def find(marker):
    found = []
    for place in PLACES + [os.getcwd(), tempfile.gettempdir()]:
        if os.path.exists(os.path.join(place, "left-" + marker)):
            found.append(place)
    if libc.shmget(int(marker[:7], 16), 0, 0) >= 0:
        found.append("sysv-shm")
    libc.mq_open.restype = ctypes.c_int
    if libc.mq_open(("/left-" + marker).encode(), os.O_RDONLY, 0, None) >= 0:
        found.append("posix-mq")
    return found
"""


def _contained(sandbox) -> None:
    missing = getattr(sandbox, "missing_guarantees", list)()
    if any("private" in item or "filesystem" in item for item in missing):
        pytest.skip(f"{sandbox.name} sandbox here: " + "; ".join(missing))


def run_value(sandbox, source: str, function: str, *args, limits: Limits | None = None):
    program = f"PLACES = {PLACES!r}\n" + source
    result = sandbox.run(program, function, [TestCase(args, None)], limits=limits)
    outcome = result.outcomes[0]
    assert result.status == "ok" and not outcome.reason.startswith(("exception", "not run")), (
        result.status,
        outcome.reason,
    )
    return outcome.value


def test_nothing_a_run_writes_is_there_for_the_next(sandbox):
    _contained(sandbox)
    marker = uuid.uuid4().hex
    written = run_value(sandbox, PLANT, "plant", marker)
    # The run could write somewhere (its own folders), so the check below means something.
    assert written and {"sysv-shm"} <= set(written), written
    assert run_value(sandbox, FIND, "find", marker) == []
    for place in PLACES:  # and nothing reached the host
        assert not os.path.exists(os.path.join(place, "left-" + marker))


def test_every_writable_place_is_size_limited(sandbox):
    _contained(sandbox)
    fill = """
import os, tempfile
def fill(places):
    totals = {}
    for place in places + [os.getcwd(), tempfile.gettempdir()]:
        total, index = 0, 0
        try:
            while total < 256 * 1024 * 1024:
                with open(os.path.join(place, "fill%d" % index), "wb") as handle:
                    handle.write(b"x" * (512 * 1024))
                total, index = total + 512 * 1024, index + 1
        except OSError as error:
            totals[place] = [total, error.strerror]
    return [[place, *totals[place]] for place in sorted(totals)]
"""
    # The sandbox's own disk size: docker sizes its tmpfs mounts when it starts the container.
    limits = Limits(disk_bytes=sandbox.limits.disk_bytes, wall_seconds=20.0, cpu_seconds=10)
    filled = run_value(sandbox, fill, "fill", PLACES, limits=limits)
    written = {place: total for place, total, _ in filled}
    assert max(written.values()) > 0  # it could write somewhere
    for place, total, why in filled:
        assert total <= limits.disk_bytes, (place, total)
        assert why in (
            "No space left on device",
            "Permission denied",
            "No such file or directory",
            "Read-only file system",
        ), (place, why)


def test_run_directories_and_home_folders_are_not_readable(sandbox):
    _contained(sandbox)
    # A run directory readable by everyone, as runs are by default: the transcripts hold theta.
    runs = Path.cwd() / f".sandbox-probe-{uuid.uuid4().hex}"
    transcript = runs / "exp" / "sao" / "seed-0" / "transcripts.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(json.dumps({"theta": {"boundary": "exclusive"}}) + "\n")
    for folder in (runs, *runs.rglob("*")):
        folder.chmod(0o755 if folder.is_dir() else 0o644)
    probe = """
import os
def probe(paths):
    seen = []
    for path in paths:
        try:
            seen.append(path + ": " + (open(path).read() if os.path.isfile(path) else
                                       ",".join(os.listdir(path))))
        except OSError as error:
            seen.append(path + ": " + type(error).__name__)
    return seen
"""
    try:
        seen = run_value(
            sandbox, probe, "probe", [str(transcript), str(runs), str(Path.cwd()), "/home", "/root"]
        )
    finally:
        shutil.rmtree(runs)
    # Not there at all, not readable, or (docker's /home) the image's own empty folder.
    unseen = ("FileNotFoundError", "PermissionError")
    assert all(line.endswith(unseen) for line in seen[:3]), seen
    assert all(line.endswith((*unseen, ": ")) for line in seen[3:]), seen


def test_a_run_over_the_output_limit_leaves_the_sandbox_working(sandbox):
    """On docker an output-limit run once left the engine's stream open: the next runs blocked
    forever in the SDK's socket read."""
    results = []
    tests = [TestCase((x,), x) for x in range(6)]  # 6 x 2 MiB of answers, as CodeShift's six

    def runs() -> None:
        big = "def f(x):\n    return 'x' * (2 << 20)\n"
        same = "def f(x):\n    return x\n"
        for program in [same, big] * 3 + [same, same]:
            results.append(sandbox.run(program, "f", tests).status)

    worker = threading.Thread(target=runs, daemon=True)
    worker.start()
    worker.join(timeout=300)  # not a speed bound: a blocked read never returns at all
    assert not worker.is_alive(), f"a run never returned (finished: {results})"
    assert results == ["ok", "output_limit"] * 3 + ["ok", "ok"]


def test_auto_says_which_guarantee_is_missing(monkeypatch):
    from sao_online.environments import sandbox as sandboxes
    from sao_online.environments.sandbox import SandboxWarning, local

    monkeypatch.setattr(
        sandboxes,
        "backend_problems",
        lambda: {"docker": "no engine", "bubblewrap": "bwrap missing", "subprocess": ""},
    )
    monkeypatch.setattr(local, "namespaces_problem", lambda: "no namespaces here")
    with pytest.warns(SandboxWarning) as caught:
        box = make_sandbox("auto")
    message = str(caught[0].message)
    assert box.name == "subprocess"
    assert "using subprocess (docker: no engine; bubblewrap: bwrap missing)" in message
    assert "no network isolation" in message and "no private filesystem view" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", SandboxWarning)
        make_sandbox("subprocess")  # chosen by name: the user knows what it is
