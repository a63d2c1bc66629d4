"""Advice for a damaged table part of a run directory that is true for the run's files.

A finished run keeps its last checkpoint and the newest one of an earlier version
(``RunLog.save_checkpoint``). ``--resume`` goes back to the newest checkpoint that verifies, so it
can make a damaged part's records again exactly when that checkpoint precedes the part; when
every checkpoint covers the part, nothing can, and the advice says what is left: a copy of the
file, or starting the run again. ``sao-online report`` and ``RunLog.read`` (through
``read_part``) give this advice.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from sao_online.rundir.checkpoints import TENSORS_FILE, CheckpointError, file_digest, read_manifest
from sao_online.rundir.layout import DISCARDED, RunDirError, checkpoint_folders, verify_part


def repair_advice(run_dir: Path, table: str, part: str) -> str:
    """How to get the records of a damaged table part back, true for the run's files as they are.

    ``--resume`` goes back to the newest checkpoint that verifies (its tensors and every part it
    covers match their recorded hashes); if that one precedes the damaged part, the part and
    everything after it are set aside and run again. Otherwise (every checkpoint covers the
    part) the run cannot make those records again, and the advice says so.
    """
    match = re.fullmatch(r"part-(\d+)\.parquet", part)
    index = int(match[1]) if match else -1
    for folder in checkpoint_folders(run_dir):
        try:
            document = read_manifest(folder)
        except CheckpointError:
            continue
        tables = document["tables"]
        tensors = folder / TENSORS_FILE
        verified = (
            tensors.is_file()
            and file_digest(tensors)[1] == document.get("tensors_sha256")
            and all(
                (run_dir / f"{name}.parquet" / record["file"]).is_file()
                and verify_part(run_dir / f"{name}.parquet" / record["file"], record)
                for name, records in tables.items()
                for record in records
            )
        )
        if verified and index >= 0 and len(tables.get(table, [])) <= index:
            return (
                f"`sao-online run CONFIG --out {run_dir} --resume` goes back to checkpoint "
                f"{folder.name}, moves this part and what came after it to {DISCARDED}/, and "
                "runs those episodes again"
            )
        if verified:
            break  # --resume would use this one, and it covers the part
    return (
        f"every checkpoint of {run_dir} covers it, so its records cannot be made again: restore "
        f"{table}.parquet/{part} from a copy of the run, or start the run again with "
        f"`sao-online run CONFIG --out {run_dir} --overwrite`"
    )


def read_part(part: Path) -> pd.DataFrame:
    """One parquet part file.

    Raises:
        RunDirError: naming the file when it is damaged (with how to repair the run).
    """
    try:
        return pd.read_parquet(part)
    except Exception as error:  # noqa: BLE001  (pyarrow raises several unrelated types)
        table = part.parent.name.removesuffix(".parquet")
        raise RunDirError(
            f"{part}: damaged table part ({str(error).splitlines()[0][:80]}); "
            + repair_advice(part.parent.parent, table, part.name)
        ) from None
