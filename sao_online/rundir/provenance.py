"""Where a result came from: the code (commit, dirty tree), package versions, the machine, and a
hash of each resolved config.

Every run's result carries the provenance of the process that ran it (a Ray task reports its
own node), stored once per distinct record and referred to by its id.
"""

from __future__ import annotations

import os
import platform
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from sao_online.util.code_identity import git_output, source_state, stable_hash

#: Distributions whose versions can change a result.
PACKAGES = (
    "sao-online",
    "torch",
    "transformers",
    "gymnasium",
    "numpy",
    "pandas",
    "pyarrow",
    "ray",
    "docker",
)


@cache
def checkout_root() -> Path | None:
    """The top folder of the git checkout the running code comes from (None: not a checkout)."""
    import sao_online

    folder = Path(sao_online.__file__).resolve().parent.parent
    top = git_output(folder, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def package_versions() -> dict[str, str | None]:
    """Installed version of each of :data:`PACKAGES` (None when it is not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """The machine a process runs on: cores, usable cores, CPU model, GPUs, OS, Python."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    gpus: list[str] = []
    try:
        import torch

        if torch.cuda.is_available():
            gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001  (a broken CUDA install must not stop a benchmark)
        gpus = []
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu_model": _cpu_model(),
        "gpus": gpus,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def provenance() -> dict[str, Any]:
    """Code, packages and machine of this process, as one record."""
    return {**source_state(), "packages": package_versions(), "machine": machine()}


def provenance_id(record: dict[str, Any]) -> str:
    """The id a provenance record is stored under (a hash of its content)."""
    return stable_hash(record, length=12)


__all__ = [
    "checkout_root",
    "machine",
    "package_versions",
    "provenance",
    "provenance_id",
    "source_state",
    "stable_hash",
]
