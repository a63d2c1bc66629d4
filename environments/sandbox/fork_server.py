"""The ``subprocess`` sandbox's fork server: one confined interpreter per sandbox that forks a
confined run per program, so a run costs a few forks rather than an interpreter's start.

Used as root where namespaces can be made. The server (``confine.py``, ``serve``) is the first
process of its own mount, network, PID, IPC and UTS namespaces, with a root filesystem of its
own. Each run is a fork of it that takes new mount, IPC, PID and network namespaces; the PID
namespace's first process builds the run's root exactly as a run of its own would (a
size-limited tmpfs holding ``/tmp``, ``/dev/shm`` and ``/work``, ``/usr`` read-only, its own
``/proc``), sets the run's rlimits and forks the program, which drops to the run's uid with no
capabilities and runs the harness. When the program ends, or at the wall limit (the server kills
the run's process group), that first process ends and the kernel kills whatever the program left.
Each run is a session of its own (the kernel shares the CPU between sessions), and runs of one
sandbox share only the server's host name.

Messages, on a Unix sequenced-packet socket pair made when the server starts:

- host -> server: ``{"uid": ..., "limits": {Limits fields}}`` with three file descriptors: the
  request (the program's stdin), the output file (its stdout) and the reply socket;
- server -> host, on the reply socket: ``{"returncode": int or null, "enforced": "" or
  "timeout"}`` (negative: killed by that signal).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path

from sao_online.environments.sandbox.base import (
    HARNESS_SOURCE,
    Ending,
    Limits,
    SandboxUnavailable,
    run_files,
)

CONFINE_SOURCE: str = Path(__file__).with_name("confine.py").read_text()

#: Seconds the server may take to start, and beyond a run's wall limit to answer for it.
STARTUP_SECONDS = 30.0
ANSWER_GRACE_SECONDS = 30.0


#: Every fork server of this process: closed at exit, forgotten in a forked child.
_all: weakref.WeakSet[ForkServer] = weakref.WeakSet()


def _close_all() -> None:
    for server in list(_all):
        server.close()


def _forget_all() -> None:
    for server in list(_all):
        server._forget()


atexit.register(_close_all)
os.register_at_fork(after_in_child=_forget_all)


@dataclasses.dataclass
class _Server:
    """One started server: its process and the host's end of its control socket."""

    process: subprocess.Popen
    control: socket.socket
    owner: int  # the pid of the process that started it

    def stop(self) -> None:
        """End the connection (the server then ends every run and itself), for every copy of
        the socket a forked process may hold, and wait for it."""
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_RDWR)
        self.control.close()
        try:
            self.process.wait(timeout=ANSWER_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class ForkServer:
    """A confined interpreter that runs programs on request (started on first use, stopped by
    :meth:`close` or at interpreter exit; a process forked from this one starts its own).

    Args:
        python: the system interpreter (under ``/usr``).
        links: ``/bin``-style links into ``/usr`` for the runs' roots (``usr/bin``, ...).
        folders: such folders that are real ones (bound read-only).
    """

    def __init__(self, python: str, links: list[str], folders: list[str]) -> None:
        self.python, self.links, self.folders = python, links, folders
        self._lock = threading.Lock()
        self._server: _Server | None = None
        _all.add(self)

    @property
    def pid(self) -> int | None:
        """The server's outer process (the namespaces' first process is its child), or None."""
        server = self._server
        return server.process.pid if server is not None else None

    def run(self, payload: bytes, limits: Limits, uid: int, run_id: str) -> tuple[bytes, Ending]:
        """Run the harness with ``payload`` on its stdin as ``uid``: (its stdout, how it
        ended)."""
        server = self._started()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        message = json.dumps({"uid": uid, "limits": dataclasses.asdict(limits)}).encode()
        with ours, theirs, run_files(payload) as (request, output):
            try:
                socket.send_fds(
                    server.control, [message], [request.fileno(), output.fileno(), theirs.fileno()]
                )
            except OSError as error:
                self._stop(server)
                raise SandboxUnavailable(
                    f"subprocess sandbox: the fork server is gone ({error})"
                ) from error
            theirs.close()
            ours.settimeout(limits.wall_seconds + ANSWER_GRACE_SECONDS)
            try:
                answer = ours.recv(4096)
            except TimeoutError:
                answer = b""
            if not answer:
                self._stop(server)
                raise SandboxUnavailable(
                    "subprocess sandbox: the fork server did not answer for a run"
                )
            output.seek(0)
            return output.read(limits.file_bytes + 1), Ending(**json.loads(answer))

    def _started(self) -> _Server:
        """The live server, started if there is none."""
        with self._lock:
            server = self._server
            if server is not None and server.process.poll() is None:
                return server
            if server is not None:
                self._server = None
                server.stop()
            self._server = self._start()
            return self._server

    def _start(self) -> _Server:
        host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {
            "mode": "serve",
            "control_fd": server_end.fileno(),
            "links": self.links,
            "folders": self.folders,
        }
        process = subprocess.Popen(
            [self.python, "-E", "-s", "-c", CONFINE_SOURCE, json.dumps(config), HARNESS_SOURCE],
            # Its root is mounted over the folder it starts in, in its own mount namespace only:
            # the host's temp folder serves, and no folder of its own is left behind.
            cwd=tempfile.gettempdir(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(server_end.fileno(),),
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        server_end.close()
        server = _Server(process, host_end, os.getpid())
        host_end.settimeout(STARTUP_SECONDS)
        try:
            ready = host_end.recv(16)
        except TimeoutError:
            ready = b""
        if ready != b"ready":
            server.stop()
            raise SandboxUnavailable("subprocess sandbox: the fork server did not start")
        host_end.settimeout(None)
        return server

    def _stop(self, server: _Server) -> None:
        """Stop ``server`` if it is still this sandbox's (a run that failed on an older one
        must not stop the one another thread has started since)."""
        with self._lock:
            if self._server is not server:
                return
            self._server = None
        server.stop()

    def _forget(self) -> None:
        """In a forked child: the parent's server is not ours; close our copy of its socket so
        the parent's close ends it."""
        server, self._server = self._server, None
        self._lock = threading.Lock()
        if server is not None:
            server.control.close()

    def close(self) -> None:
        """End the server (safe to call twice; a later run starts a new one)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None and server.owner == os.getpid():
            server.stop()
