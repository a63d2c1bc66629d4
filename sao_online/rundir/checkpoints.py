"""Checkpoint files that cannot run code when read: tensors in safetensors, the rest in JSON.

A checkpoint folder holds two files:

    state.json            {"format", "tensors_sha256", "tables", "state"}: the state with every
                          tensor replaced by a reference into the tensors file, and the name,
                          size and SHA-256 of every table part the checkpoint covers
    tensors.safetensors   the tensors (model weights, optimiser moments, RNG states)

Neither format can name code to run, unlike a pickle (``torch.save``), so a run directory from
someone else is safe to ``--resume``. The JSON side keeps what plain JSON would lose: tuples,
dictionaries with non-string keys (an optimiser's per-parameter state) and tensors, each as a
one-key object whose key starts with ``$``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

FORMAT = "sao-online-checkpoint/1"
STATE_FILE = "state.json"
TENSORS_FILE = "tensors.safetensors"
LEGACY_FILE = "state.pt"  # pickled checkpoints of earlier versions: never loaded

_TENSOR, _TUPLE, _ITEMS = "$tensor", "$tuple", "$items"


class CheckpointError(ValueError):
    """A checkpoint that is damaged, of another format, or does not match the data it covers."""


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex digest) of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _encode(value: Any, tensors: dict[str, torch.Tensor], seen: set[int], where: str) -> Any:
    if isinstance(value, torch.Tensor):
        key = f"t{len(tensors)}"
        tensor = value.detach().cpu()
        storage = tensor.untyped_storage().data_ptr()
        # safetensors refuses tensors that share memory (tied embeddings): give repeats a copy.
        tensor = tensor.clone() if storage in seen else tensor.contiguous()
        seen.add(storage)
        tensors[key] = tensor
        return {_TENSOR: key}
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int | float):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v, tensors, seen, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, tensors, seen, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        plain = all(isinstance(k, str) and not k.startswith("$") for k in value)
        if plain:
            return {k: _encode(v, tensors, seen, f"{where}.{k}") for k, v in value.items()}
        return {
            _ITEMS: [
                [_encode(k, tensors, seen, where), _encode(v, tensors, seen, f"{where}.{k}")]
                for k, v in value.items()
            ]
        }
    raise TypeError(
        f"checkpoint state {where or '(root)'}: cannot store a "
        f"{type(value).__name__} (tensors, numbers, strings, lists, tuples, dicts)"
    )


def _decode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == _TENSOR:
            if inner not in tensors:
                raise CheckpointError(
                    f"state.json refers to tensor {str(inner)[:40]!r}, which "
                    f"{TENSORS_FILE} does not hold"
                )
            return tensors[inner]
        if tag == _TUPLE:
            return tuple(_decode(v, tensors) for v in inner)
        if tag == _ITEMS:
            return {_decode(k, tensors): _decode(v, tensors) for k, v in inner}
    return {k: _decode(v, tensors) for k, v in value.items()}


def write_checkpoint(
    folder: Path, state: dict[str, Any], tables: dict[str, list[dict[str, Any]]]
) -> None:
    """Write ``state`` (and the table parts it covers) into the empty folder ``folder``.

    A full disk fails here as ``OSError`` (the JSON) or ``SafetensorError`` (the tensors); the
    caller, which writes into a temporary folder, turns either into ``DiskFullError``
    (``sao_online.rundir.disk_full.is_disk_full`` knows both).
    """
    tensors: dict[str, torch.Tensor] = {}
    skeleton = _encode(state, tensors, set(), "")
    save_file(tensors, str(folder / TENSORS_FILE))
    _, tensors_sha = file_digest(folder / TENSORS_FILE)
    document = {
        "format": FORMAT,
        "tensors_sha256": tensors_sha,
        "tables": tables,
        "state": skeleton,
    }
    (folder / STATE_FILE).write_text(json.dumps(document, allow_nan=True))


def read_manifest(folder: Path) -> dict[str, Any]:
    """The parsed ``state.json`` of a checkpoint folder, its format checked (no tensors read).

    Raises:
        CheckpointError: the file is missing, not JSON, of another format, or the folder holds an
            old pickled checkpoint (which is never unpickled: that could run code).
    """
    state_file = folder / STATE_FILE
    if not state_file.is_file() or state_file.is_symlink():
        if (folder / LEGACY_FILE).exists():
            raise CheckpointError(
                f"{folder.name} is a pickled checkpoint ({LEGACY_FILE}) of an earlier version; "
                f"it is not loaded because unpickling a file can run code"
            )
        raise CheckpointError(f"{folder.name} has no {STATE_FILE}")
    try:
        document = json.loads(state_file.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise CheckpointError(
            f"{folder.name}/{STATE_FILE} is not valid JSON ({str(error)[:80]})"
        ) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else None
        raise CheckpointError(
            f"{folder.name}/{STATE_FILE}: format {str(found)[:40]!r}, expected {FORMAT!r}"
        )
    tables = document.get("tables")
    if not isinstance(tables, dict) or not all(
        isinstance(parts, list) and all(_is_part_record(p) for p in parts)
        for parts in tables.values()
    ):
        raise CheckpointError(f"{folder.name}/{STATE_FILE}: malformed table records")
    return document


def _is_part_record(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("file"), str)
        and isinstance(record.get("bytes"), int)
        and isinstance(record.get("sha256"), str)
    )


def read_checkpoint(folder: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """(state, table part records) of a checkpoint folder, its tensors checked against their hash.

    Raises:
        CheckpointError: naming what is wrong with the folder.
    """
    document = read_manifest(folder)
    tensors_file = folder / TENSORS_FILE
    if not tensors_file.is_file() or tensors_file.is_symlink():
        raise CheckpointError(f"{folder.name} has no {TENSORS_FILE}")
    if file_digest(tensors_file)[1] != document.get("tensors_sha256"):
        raise CheckpointError(
            f"{folder.name}/{TENSORS_FILE} does not match the hash recorded "
            f"in {STATE_FILE} (damaged)"
        )
    try:
        tensors = load_file(str(tensors_file))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{folder.name}/{TENSORS_FILE}: {str(error)[:80]}") from None
    try:
        state = _decode(document.get("state"), tensors)
    except (TypeError, ValueError, RecursionError) as error:
        if isinstance(error, CheckpointError):
            raise
        raise CheckpointError(f"{folder.name}/{STATE_FILE}: malformed state") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{folder.name}/{STATE_FILE}: the state is not a mapping")
    return state, document["tables"]
