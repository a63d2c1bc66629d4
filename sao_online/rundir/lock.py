"""One writer per run directory: an advisory lock file naming its holder.

``<run>/.lock`` is locked with ``fcntl.flock`` while a process writes the run, and holds that
process's pid, host and start time. The kernel drops a ``flock`` when its process dies (even by
``kill -9``), so a lock file left behind by a dead writer is simply taken over, with a message
naming the writer that left it. A second writer gets a one-line error naming the holder.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
from pathlib import Path

from sao_online.rundir.disk_full import DiskFullError, is_disk_full

LOCK_FILE = ".lock"


class RunLockError(ValueError):
    """The run directory's lock cannot be taken (the message says why)."""


class RunDirLockedError(RunLockError):
    """Another live process writes this run directory."""


def _describe(holder: dict) -> str:
    pid, host, started = holder.get("pid"), holder.get("host"), holder.get("started")
    text = f"pid {str(pid)[:12]} on {str(host)[:64]}"
    return text + (f" (started {str(started)[:32]})" if started else "")


def _read_holder(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    try:
        holder = json.loads(raw.decode() or "{}")
    except (ValueError, UnicodeDecodeError):
        return {"pid": "?", "host": "?"} if raw.strip() else {}
    return holder if isinstance(holder, dict) else {}


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def holder_of(folder: str | Path) -> str | None:
    """Who holds ``folder``'s lock now (``pid N on HOST (started ...)``), or None when no live
    process does. Looks only: no lock file is created, none is taken."""
    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe(_read_holder(fd))
        os.close(fd)
        return holder
    except OSError:
        os.close(fd)
        return None
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    return None


class RunLock:
    """The held lock of one run directory; ``release`` (or process exit) frees it.

    Attributes:
        took_over: a message when the lock file named a writer that died without releasing it.
    """

    def __init__(self, path: Path, fd: int, took_over: str | None) -> None:
        self.path = path
        self._fd: int | None = fd
        self.took_over = took_over

    @classmethod
    def acquire(
        cls, run_dir: str | Path, advice: str = "wait for that run to finish or stop it first"
    ) -> RunLock:
        """Lock ``run_dir`` (created if needed) for this process.

        ``advice`` ends the message a second writer gets (what to do about the holder).

        Raises:
            RunDirLockedError: another live process holds it; the message names that process.
            RunLockError: the lock file cannot be opened or written (named).
            DiskFullError: the disk is full (the lock is not taken).
        """
        run_dir = Path(run_dir)
        path = run_dir / LOCK_FILE
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as error:  # not writable, or the lock file is a link (never followed)
            raise RunLockError(
                f"{path}: cannot open the run's lock file ({error.strerror or error})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunDirLockedError(
                f"{run_dir} is in use by {_describe(holder)}; {advice}"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        previous = _read_holder(fd)
        took_over = None
        if previous:
            same_host = previous.get("host") == socket.gethostname()
            gone = (
                "is no longer running"
                if same_host and not _pid_alive(previous.get("pid"))
                else "no longer holds it"
            )
            took_over = (
                f"took over the lock of {run_dir} left by {_describe(previous)}, which {gone}"
            )
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, json.dumps(me).encode())
        except OSError as error:
            os.close(fd)  # and with it the lock
            if is_disk_full(error):
                raise DiskFullError(
                    f"disk full: could not write {path} (the run's lock file; no space left on "
                    "its disk); free some space and run again"
                ) from None
            raise RunLockError(f"{path}: cannot write the run's lock file ({error})") from None
        return cls(path, fd, took_over)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Clear the holder record and unlock (idempotent)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)  # a clean exit leaves no holder to report as stale
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()
