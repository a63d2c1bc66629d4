"""Drifting agentic text environments (Gymnasium ``Env[str, str]``).

Importing this package registers ``sao_online/StyleShift-v0``, ``sao_online/ToolShift-v0``,
``sao_online/CodeShift-v0``, ``sao_online/ReasonShift-v0`` and ``sao_online/GridShift-v1``.
"""

from sao_online.environments.base import (
    TEXT_CHARSET,
    ActionTypeError,
    DriftingTextEnv,
    TurnResult,
    printable,
)
from sao_online.environments.code_shift import CodeShiftEnv
from sao_online.environments.grid_shift import GridShiftEnv
from sao_online.environments.reason_shift import ReasonShiftEnv
from sao_online.environments.registry import (
    EnvNotFoundError,
    check_env_id,
    import_env_module,
    list_envs,
    register_envs,
)
from sao_online.environments.style_shift import StyleShiftEnv, detect_style, rule_judge
from sao_online.environments.tool_shift import ToolShiftEnv
from sao_online.environments.wrappers import DriftWrapper, LatencyWrapper

register_envs()

__all__ = [
    "TEXT_CHARSET",
    "ActionTypeError",
    "CodeShiftEnv",
    "DriftWrapper",
    "DriftingTextEnv",
    "EnvNotFoundError",
    "GridShiftEnv",
    "LatencyWrapper",
    "ReasonShiftEnv",
    "StyleShiftEnv",
    "ToolShiftEnv",
    "TurnResult",
    "check_env_id",
    "detect_style",
    "import_env_module",
    "list_envs",
    "printable",
    "register_envs",
    "rule_judge",
]
