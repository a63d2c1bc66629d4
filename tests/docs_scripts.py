"""Load one of the repository's docs scripts (``docs/**/*.py``, not a package) as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def docs_script(relative: str) -> ModuleType:
    """The script at ``docs/<relative>.py``, executed once per call as its own module."""
    name = "docs_" + relative.replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{relative}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
