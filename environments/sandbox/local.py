"""Sandboxes that run the harness as a child process of this one: ``subprocess`` and
``bubblewrap``.

Both set the same rlimits (CPU, address space, file size, processes) in the child before it
starts, keep its stdout in a host file that the file-size limit also bounds, and kill the whole
run at the wall timeout. Run as root, the program itself runs as the unprivileged user
(a uid of its own per concurrent run, see :meth:`Sandbox.run_uid`): root ignores the
process-count limit and can read every file.

- ``subprocess``: where namespaces can be made (as root, or with unprivileged user namespaces)
  the run's interpreter confines itself before the harness starts (``confine.py``: system
  calls, no other process): its own mount, network, PID, IPC and UTS namespaces and a private
  root filesystem moved into with ``pivot_root``: a size-limited tmpfs holding ``/usr`` (and
  the ``/bin``, ``/lib``... links into it) read-only and without set-user-ID programs,
  ``/proc`` of its own PID namespace, ``/dev/null``, ``zero``, ``random`` and ``urandom``, and
  its writable ``/tmp``, ``/dev/shm`` and work folder; as root, the program runs as a uid of its
  own with no capabilities and no way to gain any. Nothing else of the host is visible: no
  ``/home``, ``/root``, ``/etc``, ``/run``, run directories or other processes. Where
  namespaces cannot be made it runs as a plain child process and says what is missing
  (:meth:`SubprocessSandbox.missing_guarantees`).
- ``bubblewrap``: the same view made by ``bwrap`` (read-only ``/usr`` only, size-limited tmpfs
  ``/tmp``, ``/dev/shm`` and work folder, new network, PID, IPC and UTS namespaces).

Every run's writable places are new and empty when it starts and gone when it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path

from sao_online.environments.sandbox.base import (
    HARNESS_SOURCE,
    Ending,
    Limits,
    Sandbox,
    SandboxUnavailable,
    run_files,
    run_uid_block,
)
from sao_online.environments.sandbox.fork_server import CONFINE_SOURCE, ForkServer

#: Seconds a killed run's first process may take to be gone (it cannot catch SIGKILL; only a
#: wait inside the kernel, such as on a hung filesystem, holds it up).
_REAP_SECONDS = 30.0


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _find_python() -> str:
    """A system Python (not this virtual environment's): the program must not see our packages."""
    for candidate in ("/usr/bin/python3", shutil.which("python3") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("no python3 found for the sandbox")


def _set_limits(limits: Limits) -> None:
    """Runs in the child between fork and exec: the limits every process of the run inherits."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def _drop_privileges_prefix(uid: int) -> list[str]:
    if not _running_as_root():
        return []
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]


@cache
def _root_folders() -> tuple[list[str], list[str]]:
    """(links, folders): ``/bin``, ``/lib``... as in the host, links into ``/usr`` (merged
    /usr: ``usr/bin``, ``usr/lib``, ...) or real folders (bound read-only)."""
    links, folders = [], []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink() and os.readlink(path) == f"usr/{name}":
            links.append(f"usr/{name}")
        elif path.is_dir() and not path.is_symlink():
            folders.append(name)
    return links, folders


def _confined_command(
    python: str, limits: Limits, uid: int, run_id: str, program: str = HARNESS_SOURCE
) -> list[str]:
    """The command that runs ``program`` (the harness) in an interpreter that ``confine.py``
    first confines (as ``uid`` when root)."""
    links, folders = _root_folders()
    config = {
        "mode": "run",
        "disk_bytes": limits.disk_bytes,
        "uid": uid if _running_as_root() else None,
        "links": links,
        "folders": folders,
    }
    source = CONFINE_SOURCE + "\n" + program
    return [python, "-E", "-s", "-c", source, json.dumps(config), run_id]


@cache
def namespaces_problem() -> str:
    """Why a run cannot be confined in namespaces of its own here ('' when it can: as root, or
    with unprivileged user namespaces): a trial run of ``confine.py`` with a trivial program
    in the system Python."""
    try:
        python = _find_python()
    except FileNotFoundError as error:
        return str(error)
    trivial = "assert __import__('os').getcwd() == '/work'"
    command = _confined_command(python, Limits(), run_uid_block()[-1], "probe", trivial)
    workdir = tempfile.mkdtemp(prefix="sao-sandbox-")
    try:
        probe = subprocess.run(
            command, cwd=workdir, capture_output=True, timeout=20, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the trial run failed to start: {error}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if probe.returncode != 0:
        return (
            f"the trial run exited {probe.returncode}: namespaces need root or unprivileged "
            "user namespaces"
        )
    return ""


def _child_process_missing_guarantees() -> list[str]:
    if _running_as_root():
        return []
    return [
        "no user of its own (the program runs as you: the process limit counts all your processes)"
    ]


class _ChildProcessSandbox(Sandbox):
    """Runs ``self._command(...)`` with rlimits, a wall timeout and a capped stdout file."""

    def missing_guarantees(self) -> list[str]:
        return _child_process_missing_guarantees()

    def __init__(self, limits: Limits | None = None, python: str | None = None) -> None:
        super().__init__(limits)
        self.python = python or _find_python()

    def _command(self, limits: Limits, uid: int, run_id: str) -> list[str]:
        raise NotImplementedError

    def _execute(
        self, payload: bytes, limits: Limits, uid: int, run_id: str
    ) -> tuple[bytes, Ending, float]:
        started = time.monotonic()
        text, ending = self._run(payload, limits, uid, run_id)
        if len(text) >= limits.file_bytes and ending.enforced == "":
            ending = Ending(ending.returncode, "output_limit")
        elif ending.returncode == 125 and b" " not in text:
            raise SandboxUnavailable(f"{self.name} sandbox: could not set up the private folders")
        return text, ending, time.monotonic() - started

    def _run(self, payload: bytes, limits: Limits, uid: int, run_id: str) -> tuple[bytes, Ending]:
        """Run the harness as a child process: (its stdout, how it ended)."""
        # The folder the child starts in; backends with a private tmpfs move on from there.
        workdir = Path(tempfile.mkdtemp(prefix="sao-sandbox-"))
        try:
            if _running_as_root():
                os.chown(workdir, uid, uid)
            with run_files(payload) as (request, output):
                command = self._command(limits, uid, run_id)
                ending = self._run_child(command, workdir, request, output, limits)
                output.seek(0)
                return output.read(limits.file_bytes + 1), ending
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    @staticmethod
    def _run_child(command: list[str], workdir: Path, request, output, limits: Limits) -> Ending:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            stdin=request,
            stdout=output,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=lambda: _set_limits(limits),
            close_fds=True,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        try:
            return Ending(process.wait(timeout=limits.wall_seconds))
        except subprocess.TimeoutExpired:
            return Ending(None, "timeout")
        finally:
            # The whole session: the program and anything it started that stayed in it (with a
            # PID namespace, killing its first process kills the rest).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            try:
                process.wait(timeout=_REAP_SECONDS)
            except subprocess.TimeoutExpired:  # stuck in the kernel (a hung filesystem, say)
                raise SandboxUnavailable(
                    f"sandbox: the program's process {process.pid} did not die within "
                    f"{_REAP_SECONDS:g} s of SIGKILL"
                ) from None


class SubprocessSandbox(_ChildProcessSandbox):
    """rlimits + wall timeout + (where possible) namespaces and a private root filesystem.

    With namespaces (root, or unprivileged user namespaces) the run gets its own mount,
    network, PID, IPC and UTS namespaces and sees only ``/usr`` (read-only), its own ``/proc``,
    a few device nodes, and its own size-limited ``/tmp``, ``/dev/shm`` and work folder (see
    the module docstring). Without them it runs in a fresh host temp folder and can read what
    its user can, reach the network and leave files in the host's world-writable folders:
    :meth:`missing_guarantees` lists what is missing, and ``auto`` says so when it falls back
    to this backend.

    Args:
        limits: default limits of a run.
        python: interpreter that runs the harness (default: the system ``python3``).
        require_network_isolation: raise :class:`SandboxUnavailable` when no namespaces can be
            made (default: run without them).
        fork_server: as root with namespaces, run programs as forks of one confined
            interpreter (:mod:`~sao_online.environments.sandbox.fork_server`) rather than an
            interpreter each; the confinement is the same but for what its docstring says runs
            share.
    """

    name = "subprocess"

    def __init__(
        self,
        limits: Limits | None = None,
        python: str | None = None,
        require_network_isolation: bool = False,
        fork_server: bool = True,
    ) -> None:
        super().__init__(limits, python)
        problem = namespaces_problem()
        self.namespaces = not problem
        if problem and require_network_isolation:
            raise SandboxUnavailable(f"subprocess sandbox: no network namespace here ({problem})")
        if self.namespaces and not self.python.startswith("/usr/"):
            raise SandboxUnavailable(
                f"subprocess sandbox: {self.python} is outside /usr, which is all the sandbox sees"
            )
        self.fork_server = (
            ForkServer(self.python, *_root_folders())
            if fork_server and self.namespaces and _running_as_root()
            else None
        )

    def _run(self, payload: bytes, limits: Limits, uid: int, run_id: str) -> tuple[bytes, Ending]:
        if self.fork_server is not None:
            return self.fork_server.run(payload, limits, uid, run_id)
        return super()._run(payload, limits, uid, run_id)

    def close(self) -> None:
        if self.fork_server is not None:
            self.fork_server.close()

    @property
    def network_isolated(self) -> bool:
        return self.namespaces

    def missing_guarantees(self) -> list[str]:
        """What this sandbox cannot promise on this machine (empty: the same as bubblewrap)."""
        missing = []
        if not self.namespaces:
            missing += [
                "no network isolation",
                "no private filesystem view (the program reads what its user can, run "
                "directories included)",
                "no private /tmp, /var/tmp or /dev/shm (files may stay for later runs)",
            ]
        return missing + _child_process_missing_guarantees()

    def _command(self, limits: Limits, uid: int, run_id: str) -> list[str]:
        if self.namespaces:
            return _confined_command(self.python, limits, uid, run_id)
        return [
            *_drop_privileges_prefix(uid),
            self.python,
            "-E",
            "-s",
            "-c",
            HARNESS_SOURCE,
            run_id,
        ]


@cache
def bubblewrap_problem() -> str:
    """Why bubblewrap cannot run here ('' when it can)."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    try:
        probe = subprocess.run(
            [
                "bwrap",
                *_bwrap_namespaces(),
                "--ro-bind",
                "/usr",
                "/usr",
                *_bwrap_root_links(),
                "/usr/bin/true",
            ],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap failed to start: {error}"
    if probe.returncode != 0:
        return (
            "bwrap cannot create its namespaces here: "
            + probe.stderr.decode(errors="replace").strip()[:200]
        )
    return ""


def _bwrap_namespaces() -> list[str]:
    if _running_as_root():
        # No user namespace as root: the program then runs as a real unprivileged user (see
        # setpriv), which is what makes RLIMIT_NPROC count.
        return [
            "--unshare-net",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
    return ["--unshare-all"]


def _bwrap_root_links() -> list[str]:
    """``/bin``, ``/lib``, ... as in the host: symlinks into ``/usr`` (merged /usr) or binds."""
    arguments: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            arguments += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            arguments += ["--ro-bind", str(path), str(path)]
    return arguments


class BubblewrapSandbox(_ChildProcessSandbox):
    """bubblewrap: read-only ``/usr``, tmpfs work folder, no network, same rlimits.

    Raises:
        SandboxUnavailable: bwrap is missing or cannot create namespaces here.
    """

    name = "bubblewrap"

    def __init__(self, limits: Limits | None = None, python: str | None = None) -> None:
        problem = bubblewrap_problem()
        if problem:
            raise SandboxUnavailable(f"bubblewrap sandbox: {problem}")
        super().__init__(limits, python)
        if not self.python.startswith("/usr/"):
            raise SandboxUnavailable(
                f"bubblewrap sandbox: {self.python} is outside /usr, which is all the sandbox sees"
            )

    def _command(self, limits: Limits, uid: int, run_id: str) -> list[str]:
        return [
            "bwrap",
            *_bwrap_namespaces(),
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/usr",
            "/usr",
            *_bwrap_root_links(),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--perms",
            "1777",
            "--size",
            str(limits.disk_bytes),
            "--tmpfs",
            "/tmp",
            "--perms",
            "1777",
            "--size",
            str(limits.disk_bytes),
            "--tmpfs",
            "/work",
            "--chdir",
            "/work",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/bin",
            "--setenv",
            "LANG",
            "C.UTF-8",
            *_drop_privileges_prefix(uid),
            self.python,
            "-E",
            "-s",
            "-c",
            HARNESS_SOURCE,
            run_id,
        ]
