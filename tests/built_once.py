"""What several tests read and one builds: built once per test session, whichever pytest-xdist
worker asks first, in a folder every worker of the session shares.

    reference = built_once(tmp_path_factory, "signals-reference", build)

``build(folder)`` fills an empty folder. The first caller builds while holding a lock; the
others wait for it and read what it built. A build that raises leaves nothing behind, so the
next caller builds again (and fails the same way, with its own traceback).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

BUILT = ".built"


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of the whole session: shared by its workers under pytest-xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """``session_folder/name``, filled by ``build`` the first time any worker asks for it."""
    folder = session_folder(tmp_path_factory) / name
    with FileLock(f"{folder}.lock"):
        if not (folder / BUILT).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            (folder / BUILT).touch()
    return folder
