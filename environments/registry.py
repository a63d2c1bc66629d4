"""Registration of the built-in environments under the ``sao_online/`` Gymnasium namespace."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

import gymnasium

from sao_online.drift_schedules.space import normalize_space
from sao_online.util.suggestions import did_you_mean

NAMESPACE = "sao_online"

#: Gymnasium id -> entry point of every built-in drifting environment.
BUILTIN_ENVS: dict[str, str] = {
    f"{NAMESPACE}/StyleShift-v0": "sao_online.environments.style_shift:StyleShiftEnv",
    f"{NAMESPACE}/ToolShift-v0": "sao_online.environments.tool_shift:ToolShiftEnv",
    f"{NAMESPACE}/CodeShift-v0": "sao_online.environments.code_shift:CodeShiftEnv",
    f"{NAMESPACE}/ReasonShift-v0": "sao_online.environments.reason_shift:ReasonShiftEnv",
    f"{NAMESPACE}/GridShift-v1": "sao_online.environments.grid_shift:GridShiftEnv",
}


def register_envs() -> None:
    """Register the built-in environments; calling it again changes nothing."""
    for env_id, entry_point in BUILTIN_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


class EnvNotFoundError(ValueError):
    """An environment id that cannot be made: its module does not import or it is not registered."""


def import_env_module(module: str) -> None:
    """Import ``module`` so the environments it registers become available.

    Raises:
        EnvNotFoundError: the module cannot be imported (the cause is named).
    """
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise EnvNotFoundError(
            f"cannot import module {module!r} ({error}); it is looked up on the Python path and "
            "in the current directory"
        ) from None


def check_env_id(env_id: str, field: str = "env.id") -> None:
    """Check that ``env_id`` names a registered environment, importing its module first.

    ``env_id`` is a Gymnasium id, optionally prefixed by the module that registers it:
    ``"my_tasks:my_tasks/GuessRange-v0"`` imports ``my_tasks`` (as ``gymnasium.make`` does,
    also in every worker process) and then looks up ``my_tasks/GuessRange-v0``.

    Raises:
        EnvNotFoundError: one line naming ``field`` and how to register or import the env.
    """
    if not isinstance(env_id, str) or not env_id:
        raise EnvNotFoundError(f"{field}: expected a Gymnasium id, got {env_id!r}")
    module, _, name = env_id.rpartition(":")
    if module:
        import_env_module(module)
    if name in gymnasium.registry:
        return
    suggestion = did_you_mean(name, gymnasium.registry)
    hint = (
        f"the module {module!r} does not register it"
        if module
        else "name the module that registers it in the id, 'MODULE:" + name + "'"
    )
    raise EnvNotFoundError(
        f"{field}: {name!r}: not a registered environment{suggestion}; {hint} (the module calls "
        f"gymnasium.register({name!r}, entry_point=...)); `sao-online envs --import MODULE` "
        "lists what a module registers"
    )


def drifting_entry_class(spec: Any) -> type | None:
    """The class a registry entry makes, when it declares a ``drift_space``; else None.

    The entry point is imported, nothing is instantiated.
    """
    entry = spec.entry_point
    if entry is None:
        return None
    if isinstance(entry, str):
        try:
            entry = gymnasium.envs.registration.load_env_creator(entry)
        except Exception:  # noqa: BLE001  (a broken third-party entry must not stop a listing)
            return None
    if isinstance(entry, type) and isinstance(getattr(entry, "drift_space", None), dict):
        return entry
    return None


def list_envs(
    namespace: str | None = NAMESPACE, ids: Iterable[str] | None = None
) -> list[tuple[str, str, dict[str, Any]]]:
    """The drifting environments registered in ``namespace``, or those among ``ids``, by id.

    An entry is listed when its entry point is a class that declares a ``drift_space`` (a
    :class:`~sao_online.environments.DriftingTextEnv` subclass, or a plain Gymnasium env).

    Args:
        namespace: a Gymnasium namespace (ignored when ``ids`` is given).
        ids: registered ids to look at instead (e.g. those a module registered on import).

    Returns:
        ``(env_id, description, drift_space)`` per environment, the drift space as Choice /
        Range.
    """
    listed = []
    wanted = None if ids is None else set(ids)
    for env_id, spec in sorted(gymnasium.registry.items()):
        if (spec.namespace != namespace) if wanted is None else (env_id not in wanted):
            continue
        entry = drifting_entry_class(spec)
        if entry is not None:
            description = getattr(entry, "description", "") or (entry.__doc__ or "").strip()
            listed.append(
                (
                    env_id,
                    description.splitlines()[0] if description else "",
                    normalize_space(entry.drift_space),
                )
            )
    return listed
