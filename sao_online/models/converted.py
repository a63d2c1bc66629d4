"""Real models converted once: a GGUF checkpoint dequantized into a cached safetensors folder.

Loading a GGUF file means dequantizing every tensor in Python (about 6 s for SmolLM2-135M on a
quiet core, 20-25 s on a busy one), and every process that loads the model pays it again: the
learner, each rollout worker, every run. Here the first load converts the file once (the
dequantized float32 weights, the config and the tokenizer, written with ``save_pretrained``)
into the cache, in a folder named after the SHA-256 of the file's bytes. Every later load, in
any process, reads that folder (safetensors, a second or so) and casts to the dtype it asks
for, which is what the GGUF loader does after dequantizing to float32.

A lock file makes concurrent first loads (a learner and its workers starting together) convert
once: the others wait for it and then read the folder. The folder is written under a private
name and renamed into place, so a reader never sees half of it; a folder without its
``converted.json`` is not used.

Example:
    >>> folder = converted_gguf(source, convert=lambda: load_from_gguf(source))
    >>> model = AutoModelForCausalLM.from_pretrained(folder)   # what the GGUF file holds
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sao_online.util.cache import cache_root

CONVERTED_FORMAT = 1  # bump when the layout of a converted folder changes
MARKER_FILE = "converted.json"
_READ_CHUNK = 1 << 20


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes (about 0.1 s for a 100 MB file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def converted_folder(gguf_path: str | os.PathLike[str]) -> Path:
    """Where the conversion of ``gguf_path`` lives in the cache (it may not exist yet)."""
    return cache_root() / "converted" / f"{file_sha256(gguf_path)}-v{CONVERTED_FORMAT}"


def is_converted(folder: Path) -> bool:
    return (folder / MARKER_FILE).is_file()


def converted_gguf(
    gguf_path: str | os.PathLike[str], convert: Callable[[], tuple[Any, Any]]
) -> Path:
    """The cached conversion of ``gguf_path``, made with ``convert()`` when there is none yet.

    Args:
        gguf_path: the GGUF file.
        convert: loads the file in float32; returns ``(model, tokenizer)`` that both have
            ``save_pretrained``. Called at most once per file across processes sharing the
            cache (unless a conversion fails).

    Returns:
        A folder ``from_pretrained`` reads: safetensors weights, config, generation config,
        tokenizer, and ``converted.json`` (the source file's name, size and hash).
    """
    folder = converted_folder(gguf_path)
    if is_converted(folder):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(folder.parent / f"{folder.name}.lock"):
        if is_converted(folder):  # another process converted it while this one waited
            return folder
        model, tokenizer = convert()
        _write(folder, model, tokenizer, Path(gguf_path))
    return folder


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write(folder: Path, model: Any, tokenizer: Any, source: Path) -> None:
    private = folder.parent / f".{folder.name}.{os.getpid()}.partial"
    shutil.rmtree(private, ignore_errors=True)
    try:
        model.save_pretrained(private, safe_serialization=True)
        tokenizer.save_pretrained(private)
        marker = {
            "format": CONVERTED_FORMAT,
            "source_file": source.name,
            "source_bytes": source.stat().st_size,
            "source_sha256": folder.name.rsplit("-v", 1)[0],
        }
        (private / MARKER_FILE).write_text(json.dumps(marker, indent=2))
        shutil.rmtree(folder, ignore_errors=True)  # a leftover without its marker
        os.replace(private, folder)
    finally:
        shutil.rmtree(private, ignore_errors=True)
