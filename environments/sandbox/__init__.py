"""Sandboxes that run untrusted Python against unit tests: subprocess, bubblewrap, docker.

``make_sandbox("auto")`` picks the strongest backend this machine can run (docker, then
bubblewrap, then subprocess); :func:`backend_problems` says why each other one cannot. When the
one it picks cannot give every guarantee here (``Sandbox.missing_guarantees``: the subprocess
backend without namespaces, or bubblewrap and subprocess not run as root), it says so with a
:class:`SandboxWarning` naming what is missing.
:func:`acquire_sandbox` / :func:`release_sandbox` share one sandbox per backend and limits
within a process (the rollout engine keeps an env instance per episode in flight; they share
one warm Docker container rather than start one each).
"""

from __future__ import annotations

import threading
import warnings

from sao_online.environments.sandbox.base import (
    RUN_STATUSES,
    Limits,
    Sandbox,
    SandboxResult,
    SandboxUnavailable,
    SandboxWarning,
    TestCase,
    TestOutcome,
)
from sao_online.environments.sandbox.docker_backend import DockerSandbox, docker_problem
from sao_online.environments.sandbox.local import (
    BubblewrapSandbox,
    SubprocessSandbox,
    bubblewrap_problem,
)

#: Backend name -> class, strongest first (the order ``auto`` tries them in).
BACKENDS: dict[str, type[Sandbox]] = {
    "docker": DockerSandbox,
    "bubblewrap": BubblewrapSandbox,
    "subprocess": SubprocessSandbox,
}


def backend_problems() -> dict[str, str]:
    """Backend name -> why it cannot run here ('' when it can)."""
    return {"docker": docker_problem(), "bubblewrap": bubblewrap_problem(), "subprocess": ""}


def make_sandbox(backend: str = "auto", limits: Limits | None = None) -> Sandbox:
    """Build a sandbox.

    Args:
        backend: ``docker``, ``bubblewrap``, ``subprocess``, or ``auto`` (the strongest that
            can run here).
        limits: default limits of a run.

    Raises:
        ValueError: an unknown backend name.
        SandboxUnavailable: the named backend cannot run here (the message says why).

    Warns:
        SandboxWarning: ``auto`` chose a backend that cannot give every guarantee here.
    """
    name = resolve_backend(backend)
    sandbox = BACKENDS[name](limits)
    missing = sandbox.missing_guarantees()
    if backend == "auto" and missing:
        problems = backend_problems()
        why = "; ".join(f"{other}: {problems[other]}" for other in BACKENDS if problems[other])
        warnings.warn(
            SandboxWarning(
                f"sandbox auto: using {name} ({why}), which here gives "
                + ", ".join(missing)
                + "; install bubblewrap or Docker, or run as root, for full containment"
            ),
            stacklevel=2,
        )
    return sandbox


_shared: dict[tuple[str, Limits], list] = {}
_shared_lock = threading.Lock()


def resolve_backend(backend: str) -> str:
    """``auto`` -> the strongest backend that can run here; any other name is checked."""
    if backend == "auto":
        problems = backend_problems()
        return next((name for name in BACKENDS if not problems[name]), "subprocess")
    if backend not in BACKENDS:
        raise ValueError(
            f"sandbox: unknown backend {backend!r}; choose one of auto, " + ", ".join(BACKENDS)
        )
    return backend


def acquire_sandbox(backend: str = "auto", limits: Limits | None = None) -> Sandbox:
    """The process's shared sandbox for ``backend`` and ``limits`` (made on first use).

    Every call must be paired with one :func:`release_sandbox`; the sandbox is closed when the
    last user releases it (and at interpreter exit in any case).

    Raises:
        ValueError: an unknown backend name.
        SandboxUnavailable: the backend cannot run here.
    """
    key = (resolve_backend(backend), limits or Limits())
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None:
            entry = _shared[key] = [make_sandbox(backend, key[1]), 0]
        entry[1] += 1
        return entry[0]


def release_sandbox(sandbox: Sandbox) -> None:
    """Give back a sandbox from :func:`acquire_sandbox`; the last release closes it."""
    with _shared_lock:
        for key, entry in list(_shared.items()):
            if entry[0] is sandbox:
                entry[1] -= 1
                if entry[1] <= 0:
                    del _shared[key]
                    sandbox.close()
                return
    raise ValueError("release_sandbox: this sandbox was not acquired (or already released)")


__all__ = [
    "BACKENDS",
    "RUN_STATUSES",
    "BubblewrapSandbox",
    "DockerSandbox",
    "Limits",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "SandboxWarning",
    "SubprocessSandbox",
    "TestCase",
    "TestOutcome",
    "acquire_sandbox",
    "backend_problems",
    "make_sandbox",
    "release_sandbox",
    "resolve_backend",
]
