"""The ``subprocess`` sandbox's fork server: one confined interpreter per sandbox that forks a
confined process per program, so a run costs a fork rather than an interpreter start.

Used as root where namespaces can be made. The server (``confine.py``, ``serve``) is the first
process of its own mount, network, PID, IPC and UTS namespaces, with a root filesystem of its
own; each run is a fork of it that takes new mount and IPC namespaces, builds its root exactly
as a run of its own would (a size-limited tmpfs holding ``/tmp``, ``/dev/shm`` and ``/work``,
``/usr`` read-only, its own ``/proc`` showing only its own processes), sets the run's rlimits,
drops to the run's uid with no capabilities, and runs the harness. When the program ends, or
at the wall timeout, the server kills every process of that uid and answers.

What runs of one sandbox share: the network namespace (its loopback is down, so none of them
has a network) and the host name. Processes are kept apart by uid: each concurrent run has a
uid of its own (:meth:`Sandbox.run_uid`).

Messages, on a Unix sequenced-packet socket pair made when the server starts:

- host -> server: ``{"uid": ..., "limits": {Limits fields}}`` with three file descriptors: the
  request (the program's stdin), the output file (its stdout) and the reply socket;
- server -> host, on the reply socket: ``{"returncode": int or null, "enforced": "" or
  "timeout"}`` (negative: killed by that signal).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

from sao_online.environments.sandbox.base import HARNESS_SOURCE, Ending, Limits, SandboxUnavailable

CONFINE_SOURCE: str = Path(__file__).with_name("confine.py").read_text()

#: Seconds the server may take to start, and beyond a run's wall limit to answer for it.
STARTUP_SECONDS = 30.0
ANSWER_GRACE_SECONDS = 30.0


class ForkServer:
    """A confined interpreter that runs programs on request (started on first use).

    Args:
        python: the system interpreter (under ``/usr``).
        links: ``/bin``-style links into ``/usr`` for the runs' roots (``usr/bin``, ...).
        folders: such folders that are real ones (bound read-only).
    """

    def __init__(self, python: str, links: list[str], folders: list[str]) -> None:
        self.python, self.links, self.folders = python, links, folders
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._folder: str | None = None
        self._owner = -1

    @property
    def pid(self) -> int | None:
        """The server's outer process (the namespaces' first process is its child), or None."""
        running = self._process is not None and self._owner == os.getpid()
        return self._process.pid if running else None

    def run(self, payload: bytes, limits: Limits, uid: int, run_id: str) -> tuple[bytes, Ending]:
        """Run the harness with ``payload`` on its stdin as ``uid``: (its stdout, how it
        ended)."""
        control = self._started()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        message = json.dumps({"uid": uid, "limits": dataclasses.asdict(limits)})
        with (
            ours,
            theirs,
            tempfile.TemporaryFile(prefix="sao-sandbox-out-") as output,
            tempfile.TemporaryFile(prefix="sao-sandbox-in-") as request,
        ):
            request.write(payload)
            request.flush()
            request.seek(0)
            try:
                with self._lock:
                    socket.send_fds(
                        control,
                        [message.encode()],
                        [request.fileno(), output.fileno(), theirs.fileno()],
                    )
            except OSError as error:
                self._stop()
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
                self._stop()
                raise SandboxUnavailable(
                    "subprocess sandbox: the fork server did not answer for a run"
                )
            ending = Ending(**json.loads(answer))
            output.seek(0)
            return output.read(limits.file_bytes + 1), ending

    def _started(self) -> socket.socket:
        """The control socket of a live server of this process, started if there is none."""
        with self._lock:
            alive = self._process is not None and self._process.poll() is None
            if alive and self._owner == os.getpid():
                return self._control
            if self._owner != os.getpid():  # a forked child: the parent's server is not ours
                self._process = self._control = None
            self._stop_locked()
            host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            config = {
                "mode": "serve",
                "control_fd": server_end.fileno(),
                "links": self.links,
                "folders": self.folders,
            }
            self._folder = tempfile.mkdtemp(prefix="sao-sandbox-server-")
            process = subprocess.Popen(
                [self.python, "-E", "-s", "-c", CONFINE_SOURCE, json.dumps(config), HARNESS_SOURCE],
                cwd=self._folder,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(server_end.fileno(),),
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            )
            server_end.close()
            host_end.settimeout(STARTUP_SECONDS)
            try:
                ready = host_end.recv(16)
            except TimeoutError:
                ready = b""
            self._process, self._control, self._owner = process, host_end, os.getpid()
            if ready != b"ready":
                self._stop_locked()
                raise SandboxUnavailable("subprocess sandbox: the fork server did not start")
            host_end.settimeout(None)
            return host_end

    def _stop(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        """End the server (closing its socket ends it and every run) and remove its folder."""
        if self._control is not None:
            self._control.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=ANSWER_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, 9)
                self._process.wait()
            if self._process.stderr is not None:
                self._process.stderr.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        self._process = self._control = self._folder = None

    def close(self) -> None:
        """End the server (safe to call twice; a later run starts a new one)."""
        if self._owner == os.getpid():
            self._stop()
