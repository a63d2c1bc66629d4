"""What the rollout engine accepts from an environment, checked where it arrives.

``reset`` must give ``(str, dict)`` and ``step`` ``(str, number, bool, bool, dict)`` with a finite
reward; anything else stops the run with an :class:`~sao_online.rollout.env_calls.EnvError` that
names the environment (its id and the file of its class), the call and the field, instead of a
``TypeError`` from deep inside the tokenizer or a NaN in the learner's advantages.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from sao_online.rollout.env_calls import EnvError

#: Behaviour label (and ``TRUNCATED_BY_KEY`` value) of an episode ended by an env step that ran
#: past the engine's ``env_step_timeout``.
STEP_TIMEOUT = "step_timeout"


def reported_latency(info: Any) -> float:
    """The simulated latency an env call reports in ``info["latency"]`` (``LatencyWrapper``'s
    contract), in seconds; 0 when it reports none or nothing usable."""
    latency = info.get("latency", 0.0) if isinstance(info, Mapping) else 0.0
    if isinstance(latency, bool) or not isinstance(latency, numbers.Real):
        return 0.0
    latency = float(latency)
    return latency if math.isfinite(latency) and latency > 0 else 0.0


def env_label(env: Any) -> str:
    """``env <id> (<file of its class>)`` for messages about a user's environment."""
    spec = getattr(env, "spec", None)
    unwrapped = getattr(env, "unwrapped", env)
    name = spec.id if spec is not None else type(unwrapped).__name__
    source = _source_file(type(unwrapped))
    return f"env {name}" + (f" ({source})" if source else "")


@functools.cache
def _source_file(cls: type) -> str:
    """The name of the file that defines ``cls`` ('' for a built-in); looked up once per class
    (every env call names its env, in case it fails)."""
    try:
        return Path(inspect.getsourcefile(cls) or "").name
    except TypeError:
        return ""


def _type_name(value: Any) -> str:
    return type(value).__name__


def checked_reset(result: Any, what: str) -> tuple[str, dict[str, Any]]:
    """``env.reset``'s ``(observation, info)``, checked.

    Raises:
        EnvError: not a pair, an observation that is not a ``str``, or an info that is not a
            ``dict`` (the message names which).
    """
    if not isinstance(result, tuple) or len(result) != 2:
        raise EnvError(f"{what} returned a {_type_name(result)}; expected (observation, info)")
    observation, info = result
    if not isinstance(observation, str):
        raise EnvError(f"{what}: observation is a {_type_name(observation)}; expected a str")
    if not isinstance(info, Mapping):
        raise EnvError(f"{what}: info is a {_type_name(info)}; expected a dict")
    return observation, dict(info)


def checked_step(result: Any, what: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """``env.step``'s ``(observation, reward, terminated, truncated, info)``, checked.

    Raises:
        EnvError: not a 5-tuple, or a field of the wrong type, or a reward that is not a finite
            number (the message names the field and what it was).
    """
    if not isinstance(result, tuple) or len(result) != 5:
        raise EnvError(
            f"{what} returned a {_type_name(result)}"
            + (f" of {len(result)}" if isinstance(result, tuple) else "")
            + "; expected (observation, reward, terminated, truncated, info)"
        )
    observation, reward, terminated, truncated, info = result
    if not isinstance(observation, str):
        raise EnvError(f"{what}: observation is a {_type_name(observation)}; expected a str")
    if not isinstance(reward, numbers.Real):  # bool included, as Gymnasium allows
        raise EnvError(f"{what}: reward is a {_type_name(reward)}; expected a number")
    if not math.isfinite(float(reward)):
        raise EnvError(f"{what}: reward is {float(reward)}; rewards must be finite numbers")
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, bool | np.bool_):
            raise EnvError(f"{what}: {name} is a {_type_name(flag)}; expected a bool")
    if not isinstance(info, Mapping):
        raise EnvError(f"{what}: info is a {_type_name(info)}; expected a dict")
    return observation, float(reward), bool(terminated), bool(truncated), dict(info)
