"""``sao-online pretrain --list`` and ``--clear``: the cached warm starts.

Warm starts are cached under ``<cache>/warm-start/<hash>/`` (``$SAO_ONLINE_CACHE``, else
``$XDG_CACHE_HOME/sao-online``, else ``~/.cache/sao-online``), one folder per combination of
model, SFT settings, environment and code that produced it; every run of a config that matches
reuses it.
"""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path
from typing import Any

from sao_online.util.cache import warm_start_root, warm_start_weights


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed)."""
    return sum(path.lstat().st_size for path in folder.rglob("*") if path.is_file())


def format_bytes(count: int) -> str:
    """``"512 B"``, ``"3.4 MB"``, ``"1.9 GB"``."""
    value = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def cached_warm_starts() -> list[dict[str, Any]]:
    """One entry per cached warm start: ``path``, ``env``, ``steps``, ``seconds``, ``bytes``,
    ``built`` (ISO time), ``weights`` (its weights id) and ``imported_from`` (None when fitted
    here); newest first. Folders being written (``.<hash>.*``) are left out."""
    root = warm_start_root()
    if not root.is_dir():
        return []
    entries = []
    for folder in root.iterdir():
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        summary_file = folder / "warm_start.json"
        try:
            summary = json.loads(summary_file.read_text())
        except (OSError, ValueError):
            summary = {}
        built = summary_file.stat().st_mtime if summary_file.exists() else folder.stat().st_mtime
        entries.append(
            {
                "path": folder,
                "env": summary.get("env", "?"),
                "steps": summary.get("steps"),
                "seconds": summary.get("seconds"),
                "bytes": folder_bytes(folder),
                "weights": warm_start_weights(folder),
                "imported_from": summary.get("imported_from"),
                "built": datetime.datetime.fromtimestamp(built).isoformat(timespec="seconds"),
            }
        )
    return sorted(entries, key=lambda entry: entry["built"], reverse=True)


def format_cache() -> str:
    """The cache as lines for the terminal: each warm start, then the total and the folder."""
    entries = cached_warm_starts()
    root = warm_start_root()
    if not entries:
        return f"no cached warm start in {root}"
    lines = []
    for entry in entries:
        took = f", built in {entry['seconds']:.0f} s" if entry["seconds"] is not None else ""
        steps = f"{entry['steps']} SFT steps" if entry["steps"] is not None else "? SFT steps"
        origin = f", imported from {entry['imported_from']}" if entry["imported_from"] else ""
        lines.append(
            f"{entry['path'].name}  {entry['env']}  {steps}{took}  {format_bytes(entry['bytes'])}"
            f"  {entry['built']}  weights {entry['weights'] or '?'}{origin}"
        )
    total = sum(entry["bytes"] for entry in entries)
    lines.append(
        f"{len(entries)} warm start(s), {format_bytes(total)} in {root} "
        "(`sao-online pretrain --clear` deletes them; a run rebuilds the one it needs)"
    )
    return "\n".join(lines)


def clear_cache() -> str:
    """Delete every cached warm start (and half-written ones); say what was removed."""
    root = warm_start_root()
    if not root.is_dir():
        return f"no cached warm start in {root}"
    folders = [folder for folder in root.iterdir() if folder.is_dir() and not folder.is_symlink()]
    total = sum(folder_bytes(folder) for folder in folders)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return f"removed {len(folders)} warm start(s), {format_bytes(total)}, from {root}"
