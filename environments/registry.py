"""Registration of the built-in environments under the ``sao_online/`` Gymnasium namespace."""

from __future__ import annotations

from typing import Any

import gymnasium

from sao_online.environments.base import DriftingTextEnv

NAMESPACE = "sao_online"

#: Gymnasium id -> entry point of every built-in drifting environment.
BUILTIN_ENVS: dict[str, str] = {
    f"{NAMESPACE}/StyleShift-v0": "sao_online.environments.style_shift:StyleShiftEnv",
    f"{NAMESPACE}/ToolShift-v0": "sao_online.environments.tool_shift:ToolShiftEnv",
    f"{NAMESPACE}/CodeShift-v0": "sao_online.environments.code_shift:CodeShiftEnv",
    f"{NAMESPACE}/ReasonShift-v0": "sao_online.environments.reason_shift:ReasonShiftEnv",
    f"{NAMESPACE}/GridShift-v0": "sao_online.environments.grid_shift:GridShiftEnv",
}


def register_envs() -> None:
    """Register the built-in environments; calling it again changes nothing."""
    for env_id, entry_point in BUILTIN_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


def list_envs(namespace: str = NAMESPACE) -> list[tuple[str, str, dict[str, Any]]]:
    """The drifting environments registered in ``namespace``, sorted by id.

    Only entries whose entry point is a :class:`DriftingTextEnv` subclass are listed (the entry
    point is imported, nothing is instantiated).

    Returns:
        ``(env_id, description, drift_space)`` per environment.
    """
    listed = []
    for env_id, spec in sorted(gymnasium.registry.items()):
        if spec.namespace != namespace or spec.entry_point is None:
            continue
        entry = spec.entry_point
        if isinstance(entry, str):
            entry = gymnasium.envs.registration.load_env_creator(entry)
        if isinstance(entry, type) and issubclass(entry, DriftingTextEnv):
            listed.append((env_id, entry.description, dict(entry.drift_space)))
    return listed
