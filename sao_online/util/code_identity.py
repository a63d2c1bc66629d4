"""Which code a run ran: the package's version and commit, and a hash of every user module its
method and environment come from.

A method ``MODULE:FACTORY`` and an environment ``MODULE:namespace/Name-vN`` are the user's own
code: edit the module between two runs and they measure two different things under one name.
So a run records, beside its config (``config.yaml``'s ``code``):

- ``method``: the spec, the factory's resolved settings (the ``Method`` it returned: name,
  group size, estimator and objective with their settings), and the modules it came from;
- ``env``: the id and the modules its environment came from;

where a module of this package is named by the package's version and commit (``dirty`` when
tracked files differ from it) and any other module by the sha256 of its source (every ``.py``
file of a package). Equal identities mean the same code; :func:`code_difference` names the first
module (or setting) where two differ. ``--resume``, ``benchmark merge`` and the scorecard refuse
to pool runs whose identities differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

PACKAGE = "sao_online"


def stable_hash(value: Any, length: int = 16) -> str:
    """A short sha256 of ``value`` as canonical JSON (sorted keys): equal values, equal hashes."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def git_output(folder: Path, *args: str) -> str | None:
    """What ``git -C folder ARGS`` prints (stripped), or None when git fails or is missing."""
    try:
        result = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


@cache
def source_state() -> dict[str, Any]:
    """The commit of the code that runs (when it is a git checkout) and whether tracked files
    differ from it. ``commit`` is None for an installed, non-checkout copy."""
    folder = Path(__file__).resolve().parent.parent
    commit = git_output(folder, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git_output(folder, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


@cache
def package_identity() -> dict[str, Any]:
    """This package's version and commit: the identity of every module of it."""
    from importlib import metadata

    try:
        version = metadata.version("sao-online")
    except metadata.PackageNotFoundError:
        from sao_online import __version__ as version
    return {"package": "sao-online", "version": version, **source_state()}


def _is_own(module_name: str) -> bool:
    return module_name == PACKAGE or module_name.startswith(PACKAGE + ".")


def module_identity(module_name: str) -> dict[str, Any]:
    """The identity of an imported module: this package's (version, commit), or its source's
    sha256 (a package's ``.py`` files, all of them) and its file name."""
    if _is_own(module_name):
        return {"module": module_name, "builtin": True}
    module = sys.modules.get(module_name)
    origin = getattr(module, "__file__", None) if module is not None else None
    if not origin:
        return {"module": module_name, "sha256": None}
    path = Path(origin)
    files = sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
    digest = hashlib.sha256()
    for file in files:
        try:
            digest.update(file.relative_to(path.parent).as_posix().encode() + b"\0")
            digest.update(file.read_bytes())
        except OSError:
            digest.update(b"unreadable\0")
    return {"module": module_name, "file": path.name, "sha256": digest.hexdigest()[:16]}


def _settings_of(part: Any) -> dict[str, Any]:
    """A method part (estimator, objective) as its class and its plain settings."""
    kind = type(part)
    settings: dict[str, Any] = {"class": f"{kind.__module__}.{kind.__qualname__}"}
    if dataclasses.is_dataclass(part) and not isinstance(part, type):
        values = {f.name: getattr(part, f.name, None) for f in dataclasses.fields(part)}
    else:
        values = dict(getattr(part, "__dict__", {}))
    for name, value in sorted(values.items()):
        if name.startswith("_"):
            continue
        if isinstance(value, bool | int | float | str | type(None)):
            settings[name] = value
        elif isinstance(value, list | tuple) and all(
            isinstance(item, bool | int | float | str) for item in value
        ):
            settings[name] = list(value)
    return settings


def _modules_of(*names: str) -> list[dict[str, Any]]:
    seen, found = set(), []
    for name in names:
        if name and name not in seen:
            seen.add(name)
            found.append(module_identity(name))
    return found


def method_identity(spec: str, method: Any, factory: Any = None) -> dict[str, Any]:
    """A method's identity: its spec, the settings of the ``Method`` it built, the modules its
    factory, estimator and objective come from (``factory``: the callable, for a plug-in)."""
    module_names = [spec.partition(":")[0]] if ":" in spec else []
    if factory is not None:
        module_names.append(getattr(factory, "__module__", None) or "")
    module_names += [type(method.estimator).__module__, type(method.objective).__module__]
    return {
        "spec": spec,
        "settings": {
            "name": method.name,
            "group_size": method.group_size,
            "updates_policy": bool(getattr(method, "updates_policy", True)),
            "estimator": _settings_of(method.estimator),
            "objective": _settings_of(method.objective),
        },
        "modules": _modules_of(*module_names),
    }


def env_identity(env_id: str) -> dict[str, Any]:
    """An environment's identity: its id and the modules it comes from (the module named in the
    id, the entry point's module)."""
    import gymnasium

    module_names = [env_id.rpartition(":")[0]] if ":" in env_id else []
    name = env_id.rpartition(":")[2]
    spec = gymnasium.registry.get(name)
    entry = getattr(spec, "entry_point", None)
    if isinstance(entry, str):
        module_names.append(entry.partition(":")[0])
    elif entry is not None:
        module_names.append(getattr(entry, "__module__", ""))
    for module_name in module_names:
        if module_name and module_name not in sys.modules and not _is_own(module_name):
            with contextlib.suppress(Exception):  # then it is named without a hash
                importlib.import_module(module_name)
    return {"id": env_id, "modules": _modules_of(*module_names)}


def code_id(code: dict[str, Any] | None) -> str | None:
    """The short id a run's code identity is filed under in result tables (None: none)."""
    return stable_hash(code, length=12) if code else None


def code_identity(method: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """A run's code: the package's identity, its method's and its environment's."""
    return {"package": package_identity(), "method": method, "env": env}


def code_difference(first: dict[str, Any] | None, second: dict[str, Any] | None) -> str | None:
    """Where two code identities differ, in words (the first difference), or None.

    Identities that are missing (results from before runs recorded them) are not compared.

    Example:
        >>> a = {"package": {"version": "1"}, "method": {"modules": [
        ...     {"module": "mine", "file": "mine.py", "sha256": "aa"}]}, "env": {}}
        >>> b = {"package": {"version": "1"}, "method": {"modules": [
        ...     {"module": "mine", "file": "mine.py", "sha256": "bb"}]}, "env": {}}
        >>> code_difference(a, b)
        'module mine (mine.py): source aa vs bb'
    """
    if not first or not second:
        return None
    for part in ("method", "env"):
        mine = {m["module"]: m for m in (first.get(part) or {}).get("modules", [])}
        theirs = {m["module"]: m for m in (second.get(part) or {}).get("modules", [])}
        for name in sorted(set(mine) | set(theirs)):
            a, b = mine.get(name), theirs.get(name)
            if a is None or b is None:
                return f"module {name}: used by one and not the other"
            if a.get("sha256") != b.get("sha256"):
                return (
                    f"module {name} ({a.get('file') or b.get('file') or '?'}): source "
                    f"{a.get('sha256')} vs {b.get('sha256')}"
                )
    package_a, package_b = first.get("package") or {}, second.get("package") or {}
    for key in ("version", "commit", "dirty"):
        if package_a.get(key) != package_b.get(key):
            return f"sao-online {key}: {package_a.get(key)} vs {package_b.get(key)}"
    settings_a = _flat((first.get("method") or {}).get("settings") or {})
    settings_b = _flat((second.get("method") or {}).get("settings") or {})
    for key in sorted(set(settings_a) | set(settings_b)):
        a, b = settings_a.get(key, "(absent)"), settings_b.get(key, "(absent)")
        if a != b:
            return f"the method's {key}: {a!r} vs {b!r}"
    return None


def _flat(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            flat.update(_flat(item, name + "."))
        else:
            flat[name] = item
    return flat
