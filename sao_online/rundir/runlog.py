"""Writing a run directory: resolved config, append-only parquet tables, checkpoints, resume.

The folder's layout (``runs/<experiment>/<method>/seed-<k>/``: config, lock, the three tables,
checkpoints, ``discarded/``) is described once, in :mod:`sao_online.rundir.layout`.

Read the tables with :func:`sao_online.analysis.load_runs` or :meth:`RunLog.read`: parts may
differ in columns (e.g. critic-only warm-up updates have no policy loss), and
``pandas.read_parquet(folder)`` keeps only the first part's columns.

Each part file is written to a temporary name and renamed into place, so a reader never sees a
half-written chunk, and a full disk leaves nothing half-written either (``DiskFullError`` names
the file; ``sao_online.rundir.disk_full``). A checkpoint first flushes every table and records each
part's size and hash. Resuming takes the newest checkpoint whose files and covered parts all
verify (whatever ``latest`` says) and removes the parts written after it (their episodes are run
again), so no record is lost or duplicated. When it has to fall back past a newer checkpoint
(damaged, or covering a damaged part), the newer checkpoint and the parts after the one it uses
are moved to ``discarded/`` rather than deleted; when no checkpoint verifies it stops with an
error naming what failed and changes nothing.
"""

from __future__ import annotations

import datetime
import os
import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from sao_online.config import short_repr, with_added_fields
from sao_online.rundir.checkpoints import (
    LEGACY_FILE,
    CheckpointError,
    file_digest,
    read_checkpoint,
    write_checkpoint,
)
from sao_online.rundir.disk_full import RESUME_ADVICE, START_ADVICE, reporting_a_full_disk
from sao_online.rundir.layout import (
    CHECKPOINT_NAME,
    DISCARDED,
    TABLES,
    RunDirError,
    checkpoint_folders,
    checkpoint_order,
    read_config_file,
    verify_part,
    write_text_atomically,
)
from sao_online.rundir.lock import RunLock
from sao_online.rundir.repair import read_part
from sao_online.util.code_identity import code_difference


class RunLog:
    """Writes one run's tables in atomic chunks and its checkpoints.

    Args:
        path: the run directory.
        flush_every: rows buffered per table before a part file is written.
        lock: the run directory's lock, held by this writer (released by ``close``).
        column_types: table -> column -> pandas dtype (e.g. ``"Int64"``) of columns whose
            values may be null: every part then stores them with the same type, even a part
            where they are all null.
    """

    def __init__(
        self,
        path: str | Path,
        flush_every: int = 256,
        lock: RunLock | None = None,
        column_types: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.path = Path(path)
        self.flush_every = flush_every
        self.lock = lock
        self.column_types = {table: dict(types) for table, types in (column_types or {}).items()}
        self.messages: list[str] = [lock.took_over] if lock and lock.took_over else []
        self._buffers: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
        self._parts: dict[str, int] = {}
        # Part file name -> its record (file, bytes, sha256), known for parts this writer wrote or
        # a verified checkpoint covers; others are hashed when a checkpoint needs them.
        self._records: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in TABLES}
        for name in TABLES:
            self._parts[name] = len(self._part_files(name))

    # -- creation and resume -----------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | Path,
        config: dict[str, Any],
        *,
        resume: bool = False,
        overwrite: bool = False,
        flush_every: int = 256,
        column_types: dict[str, dict[str, str]] | None = None,
        may_change: Collection[str] = (),
    ) -> RunLog:
        """Lock a run directory and open it for writing (``column_types``: see the class).

        ``may_change``: dotted config keys that may differ on resume (a run extended to a
        larger budget); when one does, ``config.yaml`` is rewritten with ``config``.

        Raises:
            RunDirError: when the directory already holds a run and neither ``resume`` nor
                ``overwrite`` is set (nothing already logged is ever silently replaced), or its
                config differs from ``config`` on resume.
            RunDirLockedError: another live process writes the directory.
        """
        path = Path(path)
        if (path / "config.yaml").exists() and not (resume or overwrite):
            raise RunDirError(
                f"{path} already holds a run; pass --resume to continue it or "
                f"--overwrite to start again"
            )
        if resume and not (path / "config.yaml").exists():
            raise RunDirError(f"--resume: no run in {path}")
        lock = RunLock.acquire(path)
        try:
            existing = (path / "config.yaml").exists()
            if existing and not (resume or overwrite):  # another process created it meanwhile
                raise RunDirError(
                    f"{path} already holds a run; pass --resume to continue it or "
                    f"--overwrite to start again"
                )
            if existing and overwrite:
                for entry in path.iterdir():  # everything but the lock this process holds
                    if entry.name != lock.path.name:
                        shutil.rmtree(
                            entry
                        ) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
            changed: list[str] = []
            if resume:
                new = yaml.safe_load(yaml.safe_dump(config))
                # A config field added since the run started is no change at its default.
                saved = with_added_fields(read_config_file(path / "config.yaml"), new)
                changed = _differences(saved, new)
                if "code" not in saved:  # written before runs recorded their code
                    changed = [key for key in changed if key.split(".")[0] != "code"]
                refused = [key for key in changed if key not in may_change]
                code = code_difference(saved.get("code"), new.get("code"))
                if code is not None:
                    raise RunDirError(
                        f"--resume: {path} ran other code ({code}); a run continued with "
                        "other code measures neither: restore that code, or start the run "
                        "again (--overwrite)"
                    )
                if refused:
                    raise RunDirError(
                        f"--resume: {path} was started with another config; differs in "
                        f"{', '.join(refused[:5])}{' ...' if len(refused) > 5 else ''}"
                    )
            if not existing or overwrite or changed:
                # A new run's first write: on a full disk there is nothing to --resume yet.
                advice = RESUME_ADVICE if existing and not overwrite else START_ADVICE
                write_text_atomically(
                    path / "config.yaml", yaml.safe_dump(config, sort_keys=False), advice
                )
        except BaseException:
            lock.release()
            raise
        return cls(path, flush_every=flush_every, lock=lock, column_types=column_types)

    def close(self) -> None:
        """Release the run directory's lock (buffered rows are not written: see ``flush``)."""
        if self.lock is not None:
            self.lock.release()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def config(self) -> dict[str, Any]:
        return read_config_file(self.path / "config.yaml")

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
            with reporting_a_full_disk(target, tmp):
                self._frame(name, rows).to_parquet(tmp, index=False)
            size, sha = file_digest(tmp)
            os.replace(tmp, target)
            self._records[name][target.name] = {"file": target.name, "bytes": size, "sha256": sha}
            self._parts[name] += 1
            self._buffers[name] = []

    def read(self, table: str) -> pd.DataFrame:
        """Everything logged to ``table`` so far, flushed or not.

        Raises:
            RunDirError: a part file cannot be read (named).
        """
        frames = [read_part(p) for p in self._part_files(table)]
        if self._buffers.get(table):
            frames.append(self._frame(table, self._buffers[table]))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _frame(self, table: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
        frame = pd.DataFrame(rows)
        types = self.column_types.get(table, {})
        return frame.astype({column: kind for column, kind in types.items() if column in frame})

    def _part_files(self, table: str) -> list[Path]:
        return sorted((self.path / f"{table}.parquet").glob("part-*.parquet"))

    def _part_records(self, table: str) -> list[dict[str, Any]]:
        records = []
        for part in self._part_files(table)[: self._parts[table]]:
            if part.name not in self._records[table]:
                size, sha = file_digest(part)
                self._records[table][part.name] = {"file": part.name, "bytes": size, "sha256": sha}
            records.append(self._records[table][part.name])
        return records

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, version: int, state: dict[str, Any], keep: int = 2) -> Path:
        """Flush every table, then save ``state`` with the table parts it covers, atomically.

        Kept afterwards: this checkpoint and the newest ``keep - 1`` of earlier learner
        versions. An older one of the same version (a finished run checkpoints at its last
        update even when a periodic checkpoint just did) covers the same parts, so it is not
        what a damaged part needs: the one before it is kept instead, and a finished run can
        still run its last parts again (``sao_online.rundir.repair``).
        """
        self.flush()
        folder = self.path / "checkpoints"
        folder.mkdir(exist_ok=True)
        name = f"step-{version:06d}"
        taken = [
            order[1]
            for order in map(checkpoint_order, (p.name for p in folder.iterdir()))
            if order and order[0] == version
        ]
        if taken:  # never rewrite a checkpoint in place: `latest` may point at it
            name = f"{name}.{max(taken) + 1}"
        tmp = folder / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        tables = {table: self._part_records(table) for table in TABLES}
        with reporting_a_full_disk(folder / name, tmp):
            write_checkpoint(tmp, state, tables)
        os.replace(tmp, folder / name)
        write_text_atomically(folder / "latest", name)
        earlier = [
            p for p in checkpoint_folders(self.path) if checkpoint_order(p.name)[0] < version
        ]
        kept = {name, *(p.name for p in earlier[: max(keep - 1, 0)])}
        for old in checkpoint_folders(self.path):
            if old.name not in kept:
                shutil.rmtree(old, ignore_errors=True)
        return folder / name

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The newest verified checkpoint's state, after setting aside records written after it.

        Every step folder is a candidate, newest first; one is used when its files match their
        recorded hashes and every table part it covers is on disk unchanged. What was done is
        appended to ``messages``. Returns None for a run killed before its first checkpoint.

        Raises:
            RunDirError: checkpoints exist but none verifies (each one's fault is named); nothing
                is changed then.
        """
        candidates = checkpoint_folders(self.path)
        self._check_latest(candidates)
        rejected: list[tuple[Path, str]] = []
        for folder in candidates:
            try:
                state, tables = read_checkpoint(folder)
                self._verify_parts(tables)
            except CheckpointError as error:
                rejected.append((folder, str(error)))
                continue
            self._restore(folder, state, tables, rejected)
            return state
        if rejected:
            reasons = "; ".join(reason for _, reason in rejected[:3])
            legacy = any((folder / LEGACY_FILE).exists() for folder, _ in rejected)
            advice = (
                "this run was written by an earlier version: start it again with --overwrite"
                if legacy
                else "start it again with --overwrite, or restore the files named"
            )
            raise RunDirError(
                f"--resume: no checkpoint of {self.path} can be verified "
                f"({reasons}); nothing was changed; {advice}"
            )
        # No checkpoint at all: the parts (if any) cannot be checked against one. They are set
        # aside, not deleted (most likely a session killed before its first checkpoint).
        written = sum(len(self._part_files(table)) for table in TABLES)
        if written:
            aside = self._set_aside_after({table: 0 for table in TABLES})
            self.messages.append(
                f"no checkpoint: moved {written} table part(s) to {aside}; "
                f"starting from the beginning"
            )
        return None

    def _check_latest(self, candidates: list[Path]) -> None:
        latest = self.path / "checkpoints" / "latest"
        if not latest.exists() and not latest.is_symlink():
            if candidates:
                self.messages.append(
                    "checkpoints/latest is missing; using the newest step folder that verifies"
                )
            return
        name = ""
        if latest.is_file() and not latest.is_symlink():  # a link is never followed
            with open(latest, "rb") as handle:
                name = handle.read(200).decode(errors="replace").strip()
        if not CHECKPOINT_NAME.match(name):
            self.messages.append(
                f"checkpoints/latest names {short_repr(name)}, which is not a "
                f"checkpoint of this run; ignored"
            )
        elif not any(folder.name == name for folder in candidates):
            self.messages.append(
                f"checkpoints/latest names {name}, which is missing; using the "
                f"newest step folder that verifies"
            )

    def _verify_parts(self, tables: dict[str, list[dict[str, Any]]]) -> None:
        for table in TABLES:
            for index, record in enumerate(tables.get(table, [])):
                part = self.path / f"{table}.parquet" / record["file"]
                where = f"{table}.parquet/{record['file']}"
                if record["file"] != f"part-{index:05d}.parquet":
                    raise CheckpointError(f"{where}: unexpected part name in the checkpoint")
                if not part.is_file() or part.is_symlink():
                    raise CheckpointError(f"{where} is missing")
                if not verify_part(part, record):
                    raise CheckpointError(
                        f"{where} differs from what the checkpoint recorded "
                        f"(damaged after it was written)"
                    )

    def _restore(
        self,
        folder: Path,
        state: dict[str, Any],
        tables: dict[str, list[dict[str, Any]]],
        rejected: list[tuple[Path, str]],
    ) -> None:
        """Keep exactly the parts ``folder`` covers; set aside (or, routinely, remove) the rest."""
        fallback = bool(rejected)
        aside = self.path / DISCARDED / _stamp()
        for old, reason in rejected:
            (aside / "checkpoints").mkdir(parents=True, exist_ok=True)
            os.replace(old, aside / "checkpoints" / old.name)
            self.messages.append(
                f"skipped checkpoint {old.name} ({reason}); moved it to "
                f"{aside.relative_to(self.path)}/checkpoints"
            )
        keep = {table: len(tables.get(table, [])) for table in TABLES}
        removed = sum(len(self._part_files(table)[keep[table] :]) for table in TABLES)
        if fallback:
            self._set_aside_after(keep, aside)
        else:
            for table in TABLES:
                for part in self._part_files(table)[keep[table] :]:
                    part.unlink()
        for table in TABLES:
            self._parts[table] = keep[table]
            self._buffers[table] = []
            self._records[table] = {record["file"]: record for record in tables.get(table, [])}
        what = (
            f"moved {removed} table part(s) written after it to {aside.relative_to(self.path)}"
            if fallback
            else f"removed {removed} table part(s) written after it"
        )
        self.messages.append(
            f"resuming from checkpoints/{folder.name}"
            + (f"; {what} (their episodes are run again)" if removed else "")
        )
        latest = self.path / "checkpoints" / "latest"
        if latest.is_symlink() or not latest.is_dir():
            latest.unlink(missing_ok=True)
        else:
            shutil.rmtree(latest)
        write_text_atomically(latest, folder.name)

    def _set_aside_after(self, keep: dict[str, int], aside: Path | None = None) -> Path:
        """Move each table's parts after its first ``keep[table]`` into ``aside`` (by default a
        new ``discarded/<time>`` folder); return that folder relative to the run."""
        if aside is None:
            aside = self.path / DISCARDED / _stamp()
        for table in TABLES:
            for part in self._part_files(table)[keep[table] :]:
                (aside / f"{table}.parquet").mkdir(parents=True, exist_ok=True)
                os.replace(part, aside / f"{table}.parquet" / part.name)
            self._parts[table] = min(self._parts[table], keep[table])
            self._buffers[table] = []
        return aside.relative_to(self.path)


def _stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested mappings."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b), key=str)
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]
