"""The base class of every drifting text environment.

A drifting environment is a ``gymnasium.Env[str, str]`` whose task distribution depends on a
handful of drift parameters ``theta`` (declared in :attr:`DriftingTextEnv.drift_space`). The
parameters in force are passed at each reset, ``reset(options={"drift": theta, "phase": k})``,
usually by :class:`~sao_online.environments.DriftWrapper` reading a schedule.

A subclass writes four methods: :meth:`~DriftingTextEnv._begin_episode` (the prompt),
:meth:`~DriftingTextEnv._respond` (one turn), :meth:`~DriftingTextEnv.oracle_action` and
:meth:`~DriftingTextEnv.oracle_reward`. The base class does the Gymnasium bookkeeping: seeding,
option checking, ``info["phase"]`` / ``info["theta"]`` on every call, ``info["behavior"]`` at the
end of an episode, and keeping observations inside the observation space.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium.spaces import Text

from sao_online.drift_schedules.space import (
    Choice,
    Range,
    complete_theta,
    default_theta,
    normalize_space,
)

#: Printable ASCII (space to tilde) plus newline: every observation and action character.
TEXT_CHARSET: str = "".join(chr(code) for code in range(0x20, 0x7F)) + "\n"
_TEXT_CHARSET_SET = frozenset(TEXT_CHARSET)
_OUTSIDE_CHARSET = re.compile(r"[^\x20-\x7e\n]")

#: Keys accepted in ``reset(options=...)``.
RESET_OPTION_KEYS = ("drift", "phase")

#: Types a prompt key may declare (see :attr:`DriftingTextEnv.prompt_keys`).
PROMPT_KEY_TYPES: tuple[type, ...] = (str, int, float, bool)
#: Prefix of the ``episodes.parquet`` column that records a prompt key (``prompt/difficulty``).
PROMPT_KEY_PREFIX = "prompt/"


class ActionTypeError(ValueError, TypeError):
    """An action that is not text at all (text that is merely malformed never raises)."""


def printable(text: str, limit: int | None = None) -> str:
    """Make ``text`` safe to show in an observation.

    Characters outside :data:`TEXT_CHARSET` become ``?`` and the result is cut to ``limit``
    characters, so an environment can echo part of an agent's action back to it.

    Args:
        text: any string (an agent's action may hold anything).
        limit: maximum length of the result; no limit when None.

    Returns:
        A string made only of :data:`TEXT_CHARSET` characters.
    """
    if limit is not None:
        text = text[:limit]
    return "".join(char if char in _TEXT_CHARSET_SET else "?" for char in text)


def is_printable(text: str) -> bool:
    """True when every character of ``text`` is in :data:`TEXT_CHARSET`."""
    return _OUTSIDE_CHARSET.search(text) is None


@dataclass
class TurnResult:
    """What an environment answers to one action.

    Attributes:
        observation: the next observation (tool output, verdict, ...).
        reward: the reward earned by this action.
        terminated: the task reached an end state (answered, written, solved).
        truncated: a limit outside the task ended the episode (turn cap).
        behavior: a short label of what the agent did, in the terms the drift is about;
            required when the episode ends, ignored otherwise.
        info: extra entries for this step's ``info``.
    """

    observation: str
    reward: float
    terminated: bool = False
    truncated: bool = False
    behavior: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


class DriftingTextEnv(gymnasium.Env[str, str]):
    """A text environment whose task distribution is set by drift parameters at each reset.

    Subclasses declare :attr:`drift_space` and :attr:`description` and implement
    :meth:`_begin_episode`, :meth:`_respond`, :meth:`oracle_action` and :meth:`oracle_reward`.
    Inside them, :attr:`theta` holds the parameters of the current episode and
    :attr:`np_random` is the only source of randomness.

    Reset options:
        ``drift``: parameter name -> value; missing parameters take their defaults; unknown
        names or values raise :class:`~sao_online.drift_schedules.DriftValueError` naming the
        parameter. ``phase``: the regime index (a non-negative int, default 0), reported back in
        ``info["phase"]``. Any other key is an error, so a misspelt option cannot pass silently.

    Info:
        every reset and step: ``phase`` and ``theta`` (a fresh copy); at the end of an episode
        (terminated or truncated): ``behavior``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    #: Drift parameter name -> allowed values (Choice, or a plain list) or interval (Range, or a
    #: ``(low, high)`` tuple); plain forms are turned into Choice / Range when the class is made.
    drift_space: ClassVar[dict[str, Choice | Range]] = {}
    #: One line shown by ``sao-online envs``.
    description: ClassVar[str] = ""
    #: Longest observation, in characters (prompts and environment answers).
    max_observation_length: ClassVar[int] = 1024
    #: Longest action the action space contains; longer actions are still accepted by ``step``.
    max_action_length: ClassVar[int] = 512
    #: Reset-info keys that say what kind of prompt an episode got (its task, its difficulty),
    #: each with the type of its value (str, int, float or bool). Every run records them as
    #: ``prompt/<key>`` columns of ``episodes.parquet`` and the report groups rewards by them.
    #: The type fixes the column's type, so every chunk of the table has the same schema.
    prompt_keys: ClassVar[Mapping[str, type]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Plain lists and (low, high) tuples become Choice / Range once, when the class is made;
        # a value that is neither fails here, naming the parameter.
        if "drift_space" in cls.__dict__:
            cls.drift_space = normalize_space(cls.drift_space)
        if "prompt_keys" in cls.__dict__:
            check_prompt_keys(cls.prompt_keys, where=f"{cls.__name__}.prompt_keys")

    def __init__(self) -> None:
        self.observation_space = Text(
            max_length=self.max_observation_length, min_length=0, charset=TEXT_CHARSET
        )
        self.action_space = Text(
            max_length=self.max_action_length, min_length=0, charset=TEXT_CHARSET
        )
        self._theta: dict[str, Any] = default_theta(self.drift_space)
        self._phase = 0
        self._turn = 0
        self._episode_running = False

    @property
    def theta(self) -> dict[str, Any]:
        """The drift parameters of the current episode (a copy)."""
        return dict(self._theta)

    @property
    def phase(self) -> int:
        """The regime index given at the last reset."""
        return self._phase

    @property
    def turn(self) -> int:
        """How many actions the current episode has received."""
        return self._turn

    def complete_theta(self, theta: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate ``theta`` against :attr:`drift_space` and fill in defaults.

        Raises:
            DriftValueError: naming the unknown parameter or the value out of its space.
        """
        return complete_theta(self.drift_space, theta, where="drift")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode under the drift given in ``options``.

        Args:
            seed: seeds :attr:`np_random` (see ``gymnasium.Env.reset``).
            options: ``{"drift": {...}, "phase": int}``, both optional.

        Returns:
            The prompt and an info dict with ``phase``, ``theta`` and the environment's extras.

        Raises:
            ValueError: an unknown option key or a phase that is not a non-negative int.
            DriftValueError: an unknown drift parameter or a value outside its space.
        """
        super().reset(seed=seed)
        self._phase, self._theta = self._read_options(options)
        self._turn = 0
        begun = self._begin_episode()
        where = f"{type(self).__name__}._begin_episode"
        if not isinstance(begun, tuple) or len(begun) != 2:
            raise TypeError(f"{where} returned a {type(begun).__name__}; expected (prompt, info)")
        prompt, extra_info = begun
        _expect_text(prompt, f"{where}: the prompt")
        if not isinstance(extra_info, Mapping):
            raise TypeError(f"{where}: info is a {type(extra_info).__name__}; expected a dict")
        self._episode_running = True
        return self._observation(prompt), self._info(extra_info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action. Malformed text never raises; it earns the env's defined penalty.

        Raises:
            gymnasium.error.ResetNeeded: no episode is running (before the first reset, or after
                the episode terminated or was truncated).
            ActionTypeError: ``action`` is neither ``str`` nor ``bytes``.
        """
        if not self._episode_running:
            raise gymnasium.error.ResetNeeded(
                f"{type(self).__name__}.step called with no episode running; call reset() first"
            )
        text = self._action_text(action)
        self._turn += 1
        result = self._respond(text)
        self._check_turn_result(result)
        info = dict(result.info)
        ended = bool(result.terminated or result.truncated)
        if ended:
            if result.behavior is None:
                raise RuntimeError(
                    f"{type(self).__name__}._respond ended the episode without a behavior label"
                )
            info["behavior"] = result.behavior
            self._episode_running = False
        reward = float(result.reward)
        return (
            self._observation(result.observation),
            reward,
            bool(result.terminated),
            bool(result.truncated),
            self._info(info),
        )

    # ---- for subclasses -------------------------------------------------------------------

    def _begin_episode(self) -> tuple[str, dict[str, Any]]:
        """Draw a task under :attr:`theta` with :attr:`np_random`; return (prompt, extra info)."""
        raise NotImplementedError

    def _respond(self, action: str) -> TurnResult:
        """Answer one action (any string: empty, huge, non-ASCII, garbage) without raising."""
        raise NotImplementedError

    def oracle_action(self, observation: str, info: dict[str, Any]) -> str:
        """The action of a scripted agent that scores the maximum in every regime.

        Args:
            observation: the latest observation.
            info: the latest info (it carries ``theta``: the oracle knows the regime).
        """
        raise NotImplementedError

    def oracle_reward(self, theta: Mapping[str, Any]) -> float:
        """The oracle's expected episode return under ``theta`` (the ceiling used for regret)."""
        raise NotImplementedError

    def demonstration_action(self, observation: str, info: dict[str, Any]) -> str:
        """An action for warm-start demonstrations: competent, but not told the hidden regime.

        The warm start should leave the policy able to do every choice the drift is about and
        undecided between them, so that learning which one pays is the RL problem. The default
        is the oracle; environments whose regimes are hidden choices override it to draw among
        the competent choices with :attr:`np_random`.
        """
        return self.oracle_action(observation, info)

    # ---- internals --------------------------------------------------------------------------

    def _read_options(self, options: Mapping[str, Any] | None) -> tuple[int, dict[str, Any]]:
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise ValueError(f"options: expected a dict, got {type(options).__name__}")
        unknown = sorted(str(key) for key in options if key not in RESET_OPTION_KEYS)
        if unknown:
            raise ValueError(
                f"options.{unknown[0]}: unknown reset option; accepted: "
                + ", ".join(RESET_OPTION_KEYS)
            )
        phase = options.get("phase", 0)
        if isinstance(phase, bool) or not isinstance(phase, int | np.integer) or phase < 0:
            raise ValueError(f"options.phase: expected a non-negative int, got {phase!r}")
        return int(phase), self.complete_theta(options.get("drift"))

    def _action_text(self, action: Any) -> str:
        if isinstance(action, str):
            return action
        if isinstance(action, bytes | bytearray):
            return bytes(action).decode("utf-8", errors="replace")
        raise ActionTypeError(
            f"{type(self).__name__}.step: action must be str (or UTF-8 bytes), "
            f"got {type(action).__name__}"
        )

    def _check_turn_result(self, result: Any) -> None:
        """Raise a ``TypeError`` / ``ValueError`` naming the field when ``_respond`` broke the
        contract (so the error says what, not a failure deep inside the caller)."""
        where = f"{type(self).__name__}._respond"
        if not isinstance(result, TurnResult):
            raise TypeError(f"{where} returned a {type(result).__name__}; expected a TurnResult")
        _expect_text(result.observation, f"{where}: TurnResult.observation")
        reward = result.reward
        if not isinstance(reward, numbers.Real):  # bool included: float(True) is 1.0
            raise TypeError(
                f"{where}: TurnResult.reward is a {type(reward).__name__}; expected a number"
            )
        if not math.isfinite(reward):
            raise ValueError(f"{where}: TurnResult.reward is {reward}; rewards must be finite")
        if not isinstance(result.info, Mapping):
            raise TypeError(
                f"{where}: TurnResult.info is a {type(result.info).__name__}; expected a dict"
            )
        if result.behavior is not None and not isinstance(result.behavior, str):
            raise TypeError(
                f"{where}: TurnResult.behavior is a {type(result.behavior).__name__}; "
                "expected a str"
            )

    def _observation(self, text: str) -> str:
        # Observations may echo parts of the agent's action; keeping them in the declared space
        # here means no subclass can break the Gymnasium contract by accident.
        return printable(text, self.max_observation_length)

    def _info(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        info = {"phase": self._phase, "theta": dict(self._theta)}
        info.update(extra)
        return info


def _expect_text(value: Any, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} is a {type(value).__name__}; expected a str")


def check_prompt_keys(prompt_keys: Any, *, where: str = "prompt_keys") -> dict[str, type]:
    """``prompt_keys`` as a plain dict, after checking it maps key names to allowed types.

    Raises:
        TypeError: ``prompt_keys`` is not a mapping, a key is not a non-empty string, or a type
            is not one of :data:`PROMPT_KEY_TYPES` (the message names which).
    """
    if not isinstance(prompt_keys, Mapping):
        raise TypeError(
            f"{where}: expected a mapping of info key -> type, got {type(prompt_keys).__name__}"
        )
    allowed = ", ".join(kind.__name__ for kind in PROMPT_KEY_TYPES)
    for key, kind in prompt_keys.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{where}: keys must be non-empty strings, got {key!r}")
        if kind not in PROMPT_KEY_TYPES:
            raise TypeError(f"{where}[{key!r}]: type must be one of {allowed}, got {kind!r}")
    return dict(prompt_keys)


def prompt_key_value(value: Any, kind: type) -> Any:
    """``value`` as a ``kind`` column entry, or None when it is not a scalar of that kind.

    An int is accepted where a float is declared (an integral reading of a real quantity); a
    bool is never taken for a number, nor a number for a bool.

    Example:
        >>> prompt_key_value(3, int), prompt_key_value(3, float), prompt_key_value(True, int)
        (3, 3.0, None)
        >>> prompt_key_value([1, 2], str) is None, prompt_key_value("add", str)
        (True, 'add')
    """
    if isinstance(value, bool | np.bool_) or kind is bool:
        return bool(value) if isinstance(value, bool | np.bool_) and kind is bool else None
    if kind is float and isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if kind is int and isinstance(value, int | np.integer):
        return int(value)
    if kind is str and isinstance(value, str):
        return value
    return None
