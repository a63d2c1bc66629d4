"""Sandboxes that run the harness as a child process of this one: ``subprocess`` and
``bubblewrap``.

Both set the same rlimits (CPU, address space, file size, processes) in the child before it
starts, keep its stdout in a host file that the file-size limit also bounds, and kill the whole
run at the wall timeout. Run as root, the program itself runs as the unprivileged user
(a uid of its own per concurrent run, see :meth:`Sandbox.run_uid`): root ignores the
process-count limit and can read every file.

- ``subprocess``: with ``unshare`` (as root, or with unprivileged user namespaces) the run gets
  its own mount, network, PID, IPC and UTS namespaces and a private root filesystem built with
  ``mount`` and ``pivot_root``: a size-limited tmpfs holding ``/usr`` (and the ``/bin``,
  ``/lib``... links into it) read-only, ``/proc`` of its own PID namespace, ``/dev/null``,
  ``zero``, ``random`` and ``urandom``, and its writable ``/tmp``, ``/dev/shm`` and work
  folder. Nothing else of the host is visible: no ``/home``, ``/root``, ``/etc``,
  ``/run``, run directories or other processes. Where namespaces cannot be made it runs as a
  plain child process and says what is missing (:meth:`SubprocessSandbox.missing_guarantees`).
- ``bubblewrap``: the same view made by ``bwrap`` (read-only ``/usr`` only, size-limited tmpfs
  ``/tmp``, ``/dev/shm`` and work folder, new network, PID, IPC and UTS namespaces).

Every run's writable places are new and empty when it starts and gone when it ends.
"""

from __future__ import annotations

import contextlib
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
)

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
def unshare_prefix() -> tuple[str, ...] | None:
    """The ``unshare`` command that gives a run its own mount, network, PID, IPC and UTS
    namespaces, or None where this machine does not allow it (not root and no unprivileged user
    namespaces)."""
    if shutil.which("unshare") is None:
        return None
    base = ["unshare", "--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]
    prefix = base if _running_as_root() else ["unshare", "--user", "--map-root-user", *base[1:]]
    try:
        probe = subprocess.run(
            [*prefix, "/bin/sh", "-c", "mount -t tmpfs tmpfs /tmp"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tuple(prefix) if probe.returncode == 0 else None


#: Run inside the new namespaces (as root there): builds the run's root filesystem on a tmpfs
#: mounted over the host folder the child starts in, moves into it with ``pivot_root`` and
#: detaches the host's, then runs the program. ``$1`` is the tmpfs size, ``$2`` the uid that
#: owns the work folder (empty: root of the user namespace), ``$3`` the ``/bin``-style links
#: into ``/usr`` (targets such as ``usr/bin``), ``$4`` such folders that are real ones (bound
#: read-only). A shell stays the namespace's first process because that process ignores
#: signals it has no handler for (SIGXCPU included), and "; exit" keeps it from exec-ing the
#: program. Each command is a process to start, so there are as few as can be.
_PRIVATE_ROOT_SCRIPT = r"""
size=$1; owner=$2; links=$3; folders=$4; shift 4
mount -t tmpfs -o "size=$size,mode=0755" tmpfs . && cd "$PWD" || exit 125
mkdir usr proc dev .host $folders && mkdir -m 1777 tmp dev/shm || exit 125
if [ -n "$owner" ]; then install -d -o "$owner" -g "$owner" -m 0700 work; else mkdir work; fi
[ $? = 0 ] && mount -o bind,ro /usr usr && mount -t proc proc proc || exit 125
[ -z "$links" ] || ln -s $links . || exit 125
for name in $folders; do mount -o bind,ro "/$name" "$name" || exit 125; done
for node in null zero random urandom; do
    : > "dev/$node" && mount --bind "/dev/$node" "dev/$node" || exit 125
done
PATH=/usr/sbin:/sbin:$PATH pivot_root . .host || exit 125
umount -l /.host && rmdir /.host && cd /work || exit 125
"$@"; exit $?
"""


@cache
def _root_folders() -> tuple[str, str]:
    """(links, folders) for ``_PRIVATE_ROOT_SCRIPT``: ``/bin``, ``/lib``... as in the host, links
    into ``/usr`` (merged /usr: ``usr/bin usr/lib ...``) or real folders."""
    links, folders = [], []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink() and os.readlink(path) == f"usr/{name}":
            links.append(f"usr/{name}")
        elif path.is_dir() and not path.is_symlink():
            folders.append(name)
    return " ".join(links), " ".join(folders)


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
        # The folder the child starts in; backends with a private tmpfs move on from there.
        workdir = Path(tempfile.mkdtemp(prefix="sao-sandbox-"))
        try:
            if _running_as_root():
                os.chown(workdir, uid, uid)
            with (
                tempfile.TemporaryFile(prefix="sao-sandbox-out-") as output,
                tempfile.TemporaryFile(prefix="sao-sandbox-in-") as request,
            ):
                request.write(payload)
                request.seek(0)
                command = self._command(limits, uid, run_id)
                ending = self._run_child(command, workdir, request, output, limits)
                output.seek(0)
                text = output.read(limits.file_bytes + 1)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if len(text) >= limits.file_bytes and ending.enforced == "":
            ending = Ending(ending.returncode, "output_limit")
        elif ending.returncode == 125 and b" " not in text:
            raise SandboxUnavailable(f"{self.name} sandbox: could not set up the private folders")
        return text, ending, time.monotonic() - started

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
    """

    name = "subprocess"

    def __init__(
        self,
        limits: Limits | None = None,
        python: str | None = None,
        require_network_isolation: bool = False,
    ) -> None:
        super().__init__(limits, python)
        self.namespaces = unshare_prefix()
        if self.namespaces is None and require_network_isolation:
            raise SandboxUnavailable(
                "subprocess sandbox: unshare cannot create a network "
                "namespace here (needs root or user namespaces)"
            )
        if self.namespaces is not None and not self.python.startswith("/usr/"):
            raise SandboxUnavailable(
                f"subprocess sandbox: {self.python} is outside /usr, which is all the sandbox sees"
            )

    @property
    def network_isolated(self) -> bool:
        return self.namespaces is not None

    def missing_guarantees(self) -> list[str]:
        """What this sandbox cannot promise on this machine (empty: the same as bubblewrap)."""
        missing = []
        if self.namespaces is None:
            missing += [
                "no network isolation",
                "no private filesystem view (the program reads what its user can, run "
                "directories included)",
                "no private /tmp, /var/tmp or /dev/shm (files may stay for later runs)",
            ]
        return missing + _child_process_missing_guarantees()

    def _command(self, limits: Limits, uid: int, run_id: str) -> list[str]:
        command = [
            *_drop_privileges_prefix(uid),
            self.python,
            "-E",
            "-s",
            "-c",
            HARNESS_SOURCE,
            run_id,
        ]
        if self.namespaces is None:
            return command
        return [
            *self.namespaces,
            "/bin/sh",
            "-c",
            _PRIVATE_ROOT_SCRIPT,
            "sh",
            str(limits.disk_bytes),
            str(uid) if _running_as_root() else "",
            *_root_folders(),
            *command,
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
