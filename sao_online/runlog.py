"""Run directories: resolved config, append-only parquet tables, checkpoints, resume.

Layout of ``runs/<experiment>/<method>/seed-<k>/``::

    config.yaml              the resolved config (+ change_points, phase_names)
    episodes.parquet/        part-00000.parquet, part-00001.parquet, ... (one chunk each)
    updates.parquet/
    evals.parquet/
    checkpoints/step-<v>/    state.pt (learner, optimisers, RNG, clock, gate, table part counts)
    checkpoints/latest       name of the newest complete checkpoint

Read the tables with :func:`sao_online.analysis.load_runs` or :meth:`RunLog.read`: parts may
differ in columns (e.g. critic-only warm-up updates have no policy loss), and
``pandas.read_parquet(folder)`` keeps only the first part's columns.

Each part file is written to a temporary name and renamed into place, so a reader never sees a
half-written chunk. A checkpoint first flushes every table and records how many parts each has;
resuming deletes parts written after that checkpoint (their episodes are regenerated), so no
record is lost or duplicated.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import yaml

TABLES = ("episodes", "updates", "evals")


class RunDirError(ValueError):
    """A run directory that cannot be created or resumed as asked."""


def run_directory(root: str | Path, experiment: str, method: str, seed: int) -> Path:
    return Path(root) / experiment / method / f"seed-{seed}"


class RunLog:
    """Writes one run's tables in atomic chunks and its checkpoints.

    Args:
        path: the run directory.
        flush_every: rows buffered per table before a part file is written.
    """

    def __init__(self, path: str | Path, flush_every: int = 256) -> None:
        self.path = Path(path)
        self.flush_every = flush_every
        self._buffers: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
        self._parts: dict[str, int] = {}
        for name in TABLES:
            self._parts[name] = len(self._part_files(name))

    # -- creation and resume -----------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, config: dict[str, Any], *, resume: bool = False,
               overwrite: bool = False, flush_every: int = 256) -> RunLog:
        """Open a run directory for writing.

        Raises:
            RunDirError: when the directory already holds a run and neither ``resume`` nor
                ``overwrite`` is set (nothing already logged is ever silently replaced).
        """
        path = Path(path)
        existing = (path / "config.yaml").exists()
        if existing and not (resume or overwrite):
            raise RunDirError(f"{path} already holds a run; pass --resume to continue it or "
                              f"--overwrite to start again")
        if existing and overwrite:
            shutil.rmtree(path)
        if resume and not existing:
            raise RunDirError(f"--resume: no run in {path}")
        if resume:
            saved = yaml.safe_load((path / "config.yaml").read_text())
            changed = _differences(saved, yaml.safe_load(yaml.safe_dump(config)))
            if changed:
                raise RunDirError(f"--resume: {path} was started with another config; differs in "
                                  f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}")
        path.mkdir(parents=True, exist_ok=True)
        if not existing or overwrite:
            write_text_atomically(path / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        return cls(path, flush_every=flush_every)

    def config(self) -> dict[str, Any]:
        return yaml.safe_load((self.path / "config.yaml").read_text())

    # -- records -----------------------------------------------------------------------------
    def log(self, table: str, rows: dict[str, Any] | list[dict[str, Any]]) -> None:
        if table not in self._buffers:
            raise ValueError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
        self._buffers[table].extend([rows] if isinstance(rows, dict) else rows)
        if len(self._buffers[table]) >= self.flush_every:
            self.flush(table)

    def flush(self, table: str | None = None) -> None:
        for name in [table] if table else TABLES:
            rows = self._buffers[name]
            if not rows:
                continue
            folder = self.path / f"{name}.parquet"
            folder.mkdir(exist_ok=True)
            target = folder / f"part-{self._parts[name]:05d}.parquet"
            tmp = folder / f".{target.name}.tmp"
            pd.DataFrame(rows).to_parquet(tmp, index=False)
            os.replace(tmp, target)
            self._parts[name] += 1
            self._buffers[name] = []

    def read(self, table: str) -> pd.DataFrame:
        """Everything logged to ``table`` so far, flushed or not."""
        frames = [pd.read_parquet(p) for p in self._part_files(table)]
        if self._buffers.get(table):
            frames.append(pd.DataFrame(self._buffers[table]))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _part_files(self, table: str) -> list[Path]:
        return sorted((self.path / f"{table}.parquet").glob("part-*.parquet"))

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, version: int, state: dict[str, Any], keep: int = 2) -> Path:
        """Flush every table, then save ``state`` with the table part counts, atomically."""
        self.flush()
        folder = self.path / "checkpoints"
        folder.mkdir(exist_ok=True)
        name = f"step-{version:06d}"
        taken = len(list(folder.glob(f"{name}*")))
        if taken:  # never rewrite a checkpoint in place: `latest` may point at it
            name = f"{name}.{taken}"
        tmp = folder / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        torch.save({**state, "table_parts": dict(self._parts)}, tmp / "state.pt")
        os.replace(tmp, folder / name)
        write_text_atomically(folder / "latest", name)
        older = sorted((p for p in folder.glob("step-*") if p.name != name),
                       key=lambda p: p.stat().st_mtime_ns)
        for old in older[:max(len(older) - (keep - 1), 0)]:
            shutil.rmtree(old, ignore_errors=True)
        return folder / name

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The newest checkpoint's state, after removing records written after it; None if none."""
        latest = self.path / "checkpoints" / "latest"
        if not latest.exists():
            for table in TABLES:  # killed before the first checkpoint: start the tables again
                self._truncate(table, 0)
            return None
        state = torch.load(self.path / "checkpoints" / latest.read_text().strip() / "state.pt",
                           weights_only=False)
        for table in TABLES:
            self._truncate(table, state["table_parts"].get(table, 0))
        return state

    def _truncate(self, table: str, parts: int) -> None:
        for extra in self._part_files(table)[parts:]:
            extra.unlink()
        self._parts[table] = parts
        self._buffers[table] = []


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested mappings."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b), key=str)
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
