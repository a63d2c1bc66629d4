"""The ``docker`` sandbox: a warm container per sandbox, a fresh limited process per program.

Starting a container per episode costs far more than running the program, so each
:class:`DockerSandbox` keeps one long-lived container (``sleep infinity`` under Docker's init)
and runs every program as a new ``docker exec`` inside it (the container's main process waits
on a stdin only this process holds, so the container goes away with this process, even one
killed with SIGKILL). The container has no network
(``network_mode="none"``), a read-only root filesystem, size-limited tmpfs mounts for ``/work``
and ``/tmp``, memory, CPU and PID limits, all capabilities dropped but the few the per-run
wrapper needs to switch to the unprivileged user. The wrapper (a root shell inside the
container) makes a fresh folder, runs the harness as an unprivileged uid of its own (one per
concurrent run, so several threads may share a sandbox) under ``timeout`` and ``prlimit`` (CPU,
address space, file size, processes), then kills whatever that uid left running and removes
the folder.

The container is removed on :meth:`DockerSandbox.close`, when the sandbox is garbage collected,
at interpreter exit, and by Docker when this process dies, so nothing is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
import time
import weakref
from typing import Any

from sao_online.environments.sandbox.base import (
    HARNESS_SOURCE,
    MIB,
    Ending,
    Limits,
    Sandbox,
    SandboxUnavailable,
)

DEFAULT_IMAGE = "sao-online-python:bookworm"
#: Label on every container this package starts (its value: the starting process's PID).
CONTAINER_LABEL = "sao-online.sandbox"

# $1 wall seconds, $2/$3 CPU soft/hard, $4 address space, $5 file size, $6 processes, $7 harness,
# $8 the run's uid, $9 the run's id.
_WRAPPER = r"""
d=$(mktemp -d /work/run.XXXXXX) || exit 125
chown "$8:$8" "$d" && cd "$d" || exit 125
drop="setpriv --reuid=$8 --regid=$8 --clear-groups --inh-caps=-all --bounding-set=-all"
timeout -s KILL "$1" prlimit --cpu="$2:$3" --as="$4" --fsize="$5" --nproc="$6" \
    --nofile=64 --core=0 $drop python3 -E -s -c "$7" "$9"
status=$?
$drop sh -c 'kill -9 -1' 2>/dev/null
cd / && rm -rf "$d"
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
        with contextlib.suppress(Exception):
            lifeline.close()


@atexit.register
def _remove_all_containers() -> None:
    for container_id in list(_live_containers):
        _remove_container(container_id)


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
        self._client = docker.from_env(timeout=60)
        self._container: Any = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

    @property
    def container_id(self) -> str | None:
        """The warm container's id (None before the first run and after close)."""
        return self._container.id if self._container is not None else None

    def _start_container(self) -> Any:
        limits = self.limits
        api = self._client.api
        tmpfs_options = f"size={limits.disk_bytes},mode=1777"
        memory = 2 * limits.memory_bytes + 2 * limits.disk_bytes + 64 * MIB
        host_config = api.create_host_config(
            auto_remove=True,
            init=True,
            network_mode="none",
            read_only=True,
            tmpfs={"/work": tmpfs_options, "/tmp": tmpfs_options},
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
            if restart and self._container is not None:
                self.close()
            if self._container is None:
                self._container = self._start_container()
            return self._container

    def _execute(
        self, payload: bytes, limits: Limits, uid: int, run_id: str
    ) -> tuple[bytes, Ending, float]:
        import docker
        from docker.utils.socket import frames_iter

        started = time.monotonic()
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
        try:
            exec_id = api.exec_create(
                self._ensure_container().id,
                command,
                stdin=True,
                stdout=True,
                stderr=False,
                user="root",
            )["Id"]
        except docker.errors.APIError:
            # The warm container is gone (removed or stopped from outside): start a new one.
            exec_id = api.exec_create(
                self._ensure_container(restart=True).id,
                command,
                stdin=True,
                stdout=True,
                stderr=False,
                user="root",
            )["Id"]
        stream = api.exec_start(exec_id, socket=True)
        raw = getattr(stream, "_sock", stream)
        raw.settimeout(limits.wall_seconds + 5.0)
        output = bytearray()
        enforced = ""
        try:
            raw.sendall(payload)
            raw.shutdown(socket.SHUT_WR)
            for _, chunk in frames_iter(stream, tty=False):
                output += chunk
                if len(output) > limits.file_bytes:
                    enforced = "output_limit"
                    break
        except TimeoutError:
            enforced = "timeout"
        except OSError as error:
            raise SandboxUnavailable(f"docker sandbox: exec stream broke: {error}") from error
        finally:
            stream.close()
        returncode = None
        if not enforced:
            returncode = self._exit_code(exec_id)
            # `timeout -s KILL` ends the program with status 137 at the wall limit; before it,
            # 137 is the CPU hard limit.
            if returncode == 137 and time.monotonic() - started >= limits.wall_seconds:
                enforced = "timeout"
            elif returncode == 125:
                raise SandboxUnavailable("docker sandbox: the wrapper could not make a work folder")
        return bytes(output), Ending(returncode, enforced), time.monotonic() - started

    def _exit_code(self, exec_id: str) -> int | None:
        # The stream closes a moment before the engine records the exit code.
        for _ in range(200):
            state = self._client.api.exec_inspect(exec_id)
            if not state.get("Running") and state.get("ExitCode") is not None:
                return int(state["ExitCode"])
            time.sleep(0.01)
        return None

    def close(self) -> None:
        """Remove the container (a later run starts a new one)."""
        if getattr(self, "_container", None) is not None:
            _remove_container(self._container.id)
            self._container = None
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer.detach()
            self._finalizer = None
