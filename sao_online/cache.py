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
