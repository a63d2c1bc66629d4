"""The run directory's layout, and the small readers and writers every part of it shares.

Layout of ``runs/<experiment>/<method>/seed-<k>/``::

    config.yaml              the resolved config (+ change_points, phase_names)
    .lock                    held by the process writing the run (see lock.py)
    episodes.parquet/        part-00000.parquet, part-00001.parquet, ... (one chunk each)
    updates.parquet/
    evals.parquet/
    checkpoints/step-<v>/    state.json + tensors.safetensors (learner, optimisers, RNG, clock,
                             gate; size and SHA-256 of every table part it covers)
    checkpoints/latest       name of the newest complete checkpoint
    discarded/<time>/        data a resume set aside instead of deleting

:class:`~sao_online.rundir.runlog.RunLog` writes it and resumes from it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from sao_online.config import SAFE_NAME, short_repr
from sao_online.rundir.checkpoints import CheckpointError, file_digest, read_manifest
from sao_online.rundir.disk_full import RESUME_ADVICE, reporting_a_full_disk
from sao_online.util.safe_yaml import YamlInputError, load_yaml_file

TABLES = ("episodes", "updates", "evals")
CHECKPOINT_NAME = re.compile(r"^step-(\d{6,})(?:\.(\d+))?$")
DISCARDED = "discarded"


class RunDirError(ValueError):
    """A run directory that cannot be created or resumed as asked."""


def run_directory(root: str | Path, experiment: str, method: str, seed: int) -> Path:
    """``<root>/<experiment>/<method>/seed-<seed>``, refusing names that would leave ``root``."""
    for label, name in (("experiment", experiment), ("algorithm.name", method)):
        if not isinstance(name, str) or not SAFE_NAME.match(name):
            raise RunDirError(
                f"{label}: {short_repr(name)} cannot name a folder (use letters, "
                f"digits, '_', '-' and '.', starting with a letter or digit)"
            )
    return Path(root) / experiment / method / f"seed-{seed}"


def read_config_file(path: Path) -> dict[str, Any]:
    """A run directory's ``config.yaml`` as a mapping.

    Raises:
        RunDirError: naming the file when it is not a YAML mapping.
    """
    try:
        data = load_yaml_file(path, "run config")
    except YamlInputError as error:
        raise RunDirError(f"{error} (the run directory's config is damaged)") from None
    if not isinstance(data, dict):
        raise RunDirError(
            f"{path}: expected a YAML mapping, got {type(data).__name__} (the "
            f"run directory's config is damaged)"
        )
    return data


def recorded_parts(run_dir: Path) -> tuple[str, dict[str, dict[str, dict[str, Any]]]] | None:
    """(checkpoint name, table -> part file -> record) of the newest readable checkpoint manifest.

    Reads ``state.json`` only (no tensors), for readers that check parts against it; None when
    the run has no readable checkpoint.
    """
    for folder in checkpoint_folders(run_dir):
        try:
            tables = read_manifest(folder)["tables"]
        except CheckpointError:
            continue
        return folder.name, {
            table: {record["file"]: record for record in records}
            for table, records in tables.items()
        }
    return None


def verify_part(part: Path, record: dict[str, Any]) -> bool:
    """Whether ``part`` has the size and SHA-256 a checkpoint recorded for it."""
    return file_digest(part) == (record["bytes"], record["sha256"])


def checkpoint_order(name: str) -> tuple[int, int] | None:
    """(version, n) of a checkpoint folder named ``step-<v>[.<n>]``; None for other names."""
    match = CHECKPOINT_NAME.match(name)
    return (int(match.group(1)), int(match.group(2) or 0)) if match else None


def checkpoint_folders(run_dir: Path) -> list[Path]:
    """The run's checkpoint folders (real folders named ``step-<v>[.<n>]``), newest first."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    found = [
        p
        for p in folder.iterdir()
        if checkpoint_order(p.name) and p.is_dir() and not p.is_symlink()
    ]
    return sorted(found, key=lambda p: checkpoint_order(p.name), reverse=True)


def write_text_atomically(path: Path, text: str, advice: str = RESUME_ADVICE) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never a part.

    Raises:
        DiskFullError: the disk is full (the old file is left as it was); the message ends
            with ``advice``.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    with reporting_a_full_disk(path, tmp, advice=advice):
        tmp.write_text(text)
    os.replace(tmp, path)
