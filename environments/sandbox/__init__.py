"""Sandboxes that run untrusted Python against unit tests: subprocess, bubblewrap, docker.

``make_sandbox("auto")`` picks the strongest backend this machine can run (docker, then
bubblewrap, then subprocess); :func:`backend_problems` says why each other one cannot.
"""

from __future__ import annotations

from sao_online.environments.sandbox.base import (
    RUN_STATUSES,
    Limits,
    Sandbox,
    SandboxResult,
    SandboxUnavailable,
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
    """
    if backend == "auto":
        for name, problem in backend_problems().items():
            if not problem:
                return BACKENDS[name](limits)
        return SubprocessSandbox(limits)
    if backend not in BACKENDS:
        raise ValueError(f"sandbox: unknown backend {backend!r}; choose one of auto, "
                         + ", ".join(BACKENDS))
    return BACKENDS[backend](limits)


__all__ = [
    "BACKENDS",
    "RUN_STATUSES",
    "BubblewrapSandbox",
    "DockerSandbox",
    "Limits",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "SubprocessSandbox",
    "TestCase",
    "TestOutcome",
    "backend_problems",
    "make_sandbox",
]
