"""Read a W&B offline run file (``run-<id>.wandb``): its config and history records.

The file is a sequence of protobuf ``Record`` messages in W&B's record log: a 7-byte file
header, then 32 KiB blocks of chunks, each with a 7-byte header (CRC-32, length, kind: 1 full,
2 first, 3 middle, 4 last). The messages are parsed with wandb's own protobuf classes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    messages, pending, position = [], b"", HEADER
    while position + HEADER <= len(data):
        left = BLOCK - position % BLOCK
        if left < HEADER:  # the rest of a block too short for a chunk header is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + HEADER])
        if kind == 0:  # zero-filled end of a block
            position += left
            continue
        pending += data[position + HEADER : position + HEADER + length]
        position += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            messages.append(record)
            pending = b""
    return messages


def _key(item: Any) -> str:
    """An item's key: plain, or (newer wandb) a one-element ``nested_key``."""
    return item.key or "/".join(item.nested_key)


def history(path: Path) -> list[dict[str, Any]]:
    """The logged rows (W&B's own ``_step``, ``_runtime``, ``_timestamp`` included)."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            rows.append({_key(item): json.loads(item.value_json) for item in record.history.item})
    return rows


def config(path: Path) -> dict[str, Any]:
    """The run's config as W&B received it (``_wandb`` left out)."""
    values: dict[str, Any] = {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        updates = (
            record.run.config.update
            if kind == "run"
            else record.config.update
            if kind == "config"
            else []
        )
        for item in updates:
            if _key(item) != "_wandb":
                values[_key(item)] = json.loads(item.value_json)
    return values
