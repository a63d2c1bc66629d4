"""The ``docker`` sandbox: a warm container per sandbox, a fresh limited process per program.

Starting a container per episode costs far more than running the program, so each
:class:`DockerSandbox` keeps one long-lived container (``sleep infinity`` under Docker's init)
and runs every program as a new ``docker exec`` inside it (the container's main process waits
on a stdin only this process holds, so the container goes away with this process, even one
killed with SIGKILL). The container has no network (``network_mode="none"``), a read-only
root filesystem, no ``/dev/shm`` (``ipc_mode="none"``), size-limited tmpfs mounts for
``/work`` and ``/tmp`` that only root may write to, memory, CPU and PID limits, all
capabilities dropped but the few the per-run wrapper needs to switch to the unprivileged user.

Nothing of one run is there for the next. The wrapper (a root shell inside the container)
makes the run a private work folder in ``/work`` and a private ``TMPDIR`` in ``/tmp`` (mode
0700, owned by the run's uid; the only places it can write), runs the harness as an
unprivileged uid of its own (one per concurrent run, so several threads may share a sandbox)
under ``timeout`` and ``prlimit`` (CPU, address space, file size, processes), with its output
in a root-only file the file-size limit bounds, then kills whatever that uid left running,
removes the System V IPC objects it created or owns, and removes both folders. Runs that go
on at the same time share the container's IPC and (loopback-only) network namespaces, so two
programs running at once could reach each other through them; nothing outlives its run.

Every call to the engine has a deadline: the SDK's HTTP calls its client timeout, and the
exec's output stream (which the SDK would read with an unbounded ``poll``) is read here with
``select`` against the run's wall limit plus a margin. A run that overstays it is reported as a
timeout and the container is replaced before the next run, so a wedged exec cannot hold a uid.

The container is removed on :meth:`DockerSandbox.close`, when the sandbox is garbage collected,
at interpreter exit, and by Docker when this process dies, so nothing is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import socket
import threading
import time
import weakref
from typing import Any

from sao_online.environments.sandbox.base import (
    HARNESS_SOURCE,
    MAX_CONCURRENT_RUNS,
    MIB,
    Ending,
    Limits,
    Sandbox,
    SandboxUnavailable,
)

DEFAULT_IMAGE = "sao-online-python:bookworm"
#: Label on every container this package starts (its value: the starting process's PID).
CONTAINER_LABEL = "sao-online.sandbox"

#: Seconds an exec may outlast the run's wall limit (killing, IPC and folder clean-up, a busy
#: engine) before it is given up as wedged.
EXEC_MARGIN_SECONDS = 10.0
#: Seconds for each call of the engine's HTTP API.
API_TIMEOUT_SECONDS = 30

# $1 wall seconds, $2/$3 CPU soft/hard, $4 address space, $5 file size, $6 processes, $7 harness,
# $8 the run's uid, $9 the run's id. The harness's stdout is a file in the root-only /output
# (a filesystem of its own: a program that fills its folders still gets its results out),
# bounded by the file-size limit like any file the program writes, and passed on once the run
# is cleaned up.
_WRAPPER = r"""
umask 077
chmod 0755 /work /tmp && { [ ! -d /dev/mqueue ] || chmod 0755 /dev/mqueue; } || exit 125
d=$(mktemp -d /work/run.XXXXXX) && t=$(mktemp -d /tmp/run.XXXXXX) || exit 125
o=$(mktemp /output/run.XXXXXX) || exit 125
chown "$8:$8" "$d" "$t" && cd "$d" || exit 125
drop="setpriv --reuid=$8 --regid=$8 --clear-groups --inh-caps=-all --bounding-set=-all"
TMPDIR="$t" timeout -s KILL "$1" prlimit --cpu="$2:$3" --as="$4" --fsize="$5" --nproc="$6" \
    --nofile=64 --core=0 $drop python3 -E -s -c "$7" "$9" > "$o"
status=$?
$drop sh -c 'kill -9 -1' 2>/dev/null
uid=$8
owned() {  # ids of the IPC objects in $1 whose owner (column $2) or creator ($3) is the run's
    awk -v u="$uid" -v a="$2" -v b="$3" 'NR > 1 && ($a == u || $b == u) { print $2 }' "$1"
}
for id in $(owned /proc/sysvipc/shm 8 10); do $drop ipcrm -m "$id"; done
for id in $(owned /proc/sysvipc/sem 5 7); do $drop ipcrm -s "$id"; done
for id in $(owned /proc/sysvipc/msg 8 10); do $drop ipcrm -q "$id"; done
cd / && rm -rf "$d" "$t"
cat "$o"; rm -f "$o"
exit $status
"""

#: Container id -> (container, the socket attached to its stdin) of every live container.
_live_containers: dict[str, tuple[Any, Any]] = {}
_live_lock = threading.Lock()


def _remove_container(container_id: str) -> None:
    with _live_lock:
        entry = _live_containers.pop(container_id, None)
    if entry is not None:
        container, lifeline = entry
        # Already gone (or being removed), or the engine stopped: nothing more to do.
        with contextlib.suppress(Exception):
            container.remove(force=True)
        _close_stream(lifeline)


@atexit.register
def _remove_all_containers() -> None:
    for container_id in list(_live_containers):
        _remove_container(container_id)


def _close_stream(stream: Any) -> None:
    """Close a hijacked connection of the SDK: its file object and the socket under it."""
    for closeable in (stream, getattr(stream, "_sock", None)):
        if closeable is not None:
            with contextlib.suppress(Exception):
                closeable.close()


def read_exec_output(connection: Any, deadline: float, limit: int) -> tuple[bytes, bool]:
    """The stdout of an exec from its multiplexed stream, read until the end or ``deadline``.

    The SDK's own reader waits in ``poll`` without a timeout, so a stream the engine never
    ends would block forever; this one waits in ``select`` for what is left of ``deadline``
    (``time.monotonic``). Frames are 8-byte headers (stream id, 3 zero bytes, big-endian
    length) followed by the payload; only stdout's (id 1) are kept, at most ``limit`` bytes.

    Returns:
        (stdout, whether the stream ended before the deadline).
    """
    pending = bytearray()
    output = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(output), False
        readable, _, _ = select.select([connection], [], [], left)
        if not readable:
            continue
        chunk = connection.recv(1 << 16)
        if not chunk:
            return bytes(output), True
        pending += chunk
        while len(pending) >= 8:
            size = int.from_bytes(pending[4:8], "big")
            if len(pending) < 8 + size:
                break
            if pending[0] == 1 and len(output) < limit:
                output += pending[8 : 8 + min(size, limit - len(output))]
            del pending[: 8 + size]


def docker_problem(image: str = DEFAULT_IMAGE) -> str:
    """Why the docker sandbox cannot run here ('' when it can)."""
    try:
        import docker
    except ImportError:
        return "the docker Python SDK is not installed (pip install 'sao-online[docker]')"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as error:  # noqa: BLE001
        return f"no Docker engine answers ({type(error).__name__}: {str(error)[:120]})"
    try:
        client.images.get(image)
    except Exception:  # noqa: BLE001
        return (
            f"the image {image} is missing (build it with .ci/setup-sandboxes.sh: debootstrap"
            " + docker import)"
        )
    finally:
        client.close()
    return ""


class DockerSandbox(Sandbox):
    """Programs run in a warm, locked-down container through the docker SDK.

    Args:
        limits: default limits of a run.
        image: a local image with ``python3``, coreutils ``timeout`` and util-linux
            ``prlimit``/``setpriv`` (the Debian minbase image of ``.ci/setup-sandboxes.sh``).
        cpus: CPUs the container may use.

    Raises:
        SandboxUnavailable: no SDK, no engine, or no image.
    """

    name = "docker"

    def __init__(
        self, limits: Limits | None = None, image: str = DEFAULT_IMAGE, cpus: float = 1.0
    ) -> None:
        super().__init__(limits)
        problem = docker_problem(image)
        if problem:
            raise SandboxUnavailable(f"docker sandbox: {problem}")
        import docker

        self.image = image
        self.cpus = float(cpus)
        self._client = docker.from_env(timeout=API_TIMEOUT_SECONDS)
        self._container: Any = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()
        # Set when an exec overstayed its deadline: the container is replaced before the next
        # run (removing it ends whatever the exec left running).
        self._wedged = False

    @property
    def container_id(self) -> str | None:
        """The warm container's id (None before the first run and after close)."""
        return self._container.id if self._container is not None else None

    def _start_container(self) -> Any:
        limits = self.limits
        api = self._client.api
        tmpfs_options = f"size={limits.disk_bytes},mode=1777"
        memory = 2 * limits.memory_bytes + 2 * limits.disk_bytes + 4 * limits.file_bytes + 64 * MIB
        host_config = api.create_host_config(
            auto_remove=True,
            init=True,
            network_mode="none",
            ipc_mode="none",  # a private IPC namespace without /dev/shm
            read_only=True,
            tmpfs={
                "/work": tmpfs_options,
                "/tmp": tmpfs_options,
                "/output": f"size={MAX_CONCURRENT_RUNS * limits.file_bytes},mode=0700",
            },
            mem_limit=memory,
            memswap_limit=memory,
            nano_cpus=int(self.cpus * 1e9),
            # Each run is held to `processes` by its own uid; this bounds all of them together.
            pids_limit=4 * limits.processes + 32,
            cap_drop=["ALL"],
            cap_add=["SETUID", "SETGID", "SETPCAP", "CHOWN", "DAC_OVERRIDE", "FOWNER"],
            security_opt=["no-new-privileges"],
        )
        # The container's main process reads its stdin until end of file, and this process
        # holds the only attachment to that stdin (StdinOnce): when this process ends in any
        # way, SIGKILL included, the stdin closes, the container stops and Docker removes it.
        created = api.create_container(
            self.image,
            ["sh", "-c", "exec cat > /dev/null"],
            stdin_open=True,
            detach=False,
            labels={CONTAINER_LABEL: str(os.getpid())},
            host_config=host_config,
        )
        lifeline = api.attach_socket(created["Id"], params={"stdin": 1, "stream": 1})
        api.start(created["Id"])
        container = self._client.containers.get(created["Id"])
        with _live_lock:
            _live_containers[container.id] = (container, lifeline)
        self._finalizer = weakref.finalize(self, _remove_container, container.id)
        return container

    def _ensure_container(self, restart: bool = False) -> Any:
        with self._lock:
            if (restart or self._wedged) and self._container is not None:
                self._wedged = False
                self._remove_container()
            if self._container is None:
                self._container = self._start_container()
            return self._container

    def _execute(
        self, payload: bytes, limits: Limits, uid: int, run_id: str
    ) -> tuple[bytes, Ending, float]:
        import docker

        started = time.monotonic()
        deadline = started + limits.wall_seconds + EXEC_MARGIN_SECONDS
        api = self._client.api
        command = [
            "sh",
            "-c",
            _WRAPPER,
            "wrapper",
            f"{limits.wall_seconds:g}",
            str(limits.cpu_seconds),
            str(limits.cpu_seconds + 1),
            str(limits.memory_bytes),
            str(limits.file_bytes),
            str(limits.processes),
            HARNESS_SOURCE,
            str(uid),
            run_id,
        ]

        def create(container: Any) -> str:
            return api.exec_create(
                container.id, command, stdin=True, stdout=True, stderr=False, user="root"
            )["Id"]

        try:
            exec_id = create(self._ensure_container())
        except docker.errors.APIError:
            # The warm container is gone (removed or stopped from outside): start a new one.
            exec_id = create(self._ensure_container(restart=True))
        stream = api.exec_start(exec_id, socket=True)
        connection = getattr(stream, "_sock", stream)
        try:
            connection.settimeout(max(1.0, deadline - time.monotonic()))
            connection.sendall(payload)
            connection.shutdown(socket.SHUT_WR)
            output, ended = read_exec_output(connection, deadline, limits.file_bytes + 1)
        except TimeoutError:
            output, ended = b"", False
        except OSError as error:
            raise SandboxUnavailable(f"docker sandbox: exec stream broke: {error}") from error
        finally:
            _close_stream(stream)
        if not ended:
            # The stream outlived the wall limit and the margin: whatever the exec still runs
            # goes with the container, replaced before the next run.
            self._wedged = True
            return output, Ending(None, "timeout"), time.monotonic() - started
        returncode = self._exit_code(exec_id, started + limits.wall_seconds + EXEC_MARGIN_SECONDS)
        enforced = ""
        if len(output) >= limits.file_bytes:
            enforced = "output_limit"
        # `timeout -s KILL` ends the program with status 137 at the wall limit; before it,
        # 137 is the CPU hard limit.
        elif returncode == 137 and time.monotonic() - started >= limits.wall_seconds:
            enforced = "timeout"
        elif returncode == 125 and b" " not in output:  # no record: the harness never started
            raise SandboxUnavailable("docker sandbox: the wrapper could not make a work folder")
        return output, Ending(returncode, enforced), time.monotonic() - started

    def _exit_code(self, exec_id: str, deadline: float) -> int | None:
        # The stream closes a moment before the engine records the exit code.
        while True:
            state = self._client.api.exec_inspect(exec_id)
            if not state.get("Running") and state.get("ExitCode") is not None:
                return int(state["ExitCode"])
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def _remove_container(self) -> None:
        if getattr(self, "_container", None) is not None:
            _remove_container(self._container.id)
            self._container = None
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer.detach()
            self._finalizer = None

    def close(self) -> None:
        """Remove the container and close the engine client (a later run starts anew)."""
        self._remove_container()
        client = getattr(self, "_client", None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
