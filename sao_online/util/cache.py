"""Where sao-online caches what it builds once and reuses (warm starts).

Imports nothing heavy, so ``sao-online pretrain --list`` answers without loading torch.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$SAO_ONLINE_CACHE``, else ``$XDG_CACHE_HOME/sao-online``, else ``~/.cache/sao-online``."""
    if os.environ.get("SAO_ONLINE_CACHE"):
        return Path(os.environ["SAO_ONLINE_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "sao-online"


def warm_start_root() -> Path:
    """The folder of the cached warm starts, one sub-folder per content hash."""
    return cache_root() / "warm-start"


def weights_id(folder: Path) -> str | None:
    """The identity of the weights saved in ``folder``: 16 hex digits of the SHA-256 of its
    ``*.safetensors`` files (names and bytes, in name order); None when it holds none.

    Two warm starts fitted from one config on two machines differ here whenever their floating
    point differed, which the config hash cannot see."""
    import hashlib

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def warm_start_weights(folder: Path) -> str | None:
    """The weights id of the warm start in ``folder``: as its ``warm_start.json`` records it,
    else computed (warm starts cached before it was recorded)."""
    import json

    try:
        recorded = json.loads((Path(folder) / "warm_start.json").read_text()).get("weights")
    except (OSError, ValueError):
        recorded = None
    return recorded or weights_id(Path(folder))
