"""Wrappers that put a drifting environment on a schedule and give it latency.

``DriftWrapper`` is how a schedule reaches an environment: at each reset it reads the clock,
asks the schedule for the regime, and resets the environment under it. ``LatencyWrapper``
simulates slow tools or environments with long-tailed (lognormal) delays: the regime where
asynchronous training pays off.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import gymnasium
import numpy as np

from sao_online.drift_schedules.space import complete_theta, normalize_space
from sao_online.drift_schedules.state import DriftState

LATENCY_TARGETS = ("step", "reset", "both")


class ScheduleLike(Protocol):
    """A schedule as the wrapper uses it."""

    def at(self, t: float) -> DriftState: ...

    def validate(self, drift_space: Any) -> Any: ...


class ClockLike(Protocol):
    """A clock: anything that tells the current time."""

    def now(self) -> float: ...


class DriftWrapper(gymnasium.Wrapper[str, str, str, str]):
    """Resets the wrapped environment under the regime the schedule gives at the current time.

    Time is ``clock.now()`` when a clock is given (the runtime's shared clock), otherwise the
    number of resets before this one (an episode clock: the first episode sees t = 0).

    The schedule owns the drift: a caller's ``reset(options=...)`` must not hold ``"drift"`` or
    ``"phase"`` (ValueError), because a run whose drift silently differs from its schedule would
    make every recovery metric wrong. Other options pass through.

    Info (every reset and step): ``phase`` and ``theta`` from the schedule (theta completed
    with the drift space's defaults, ranges as floats), whatever the wrapped environment
    reports, and ``world_time`` (the clock reading when the episode started).

    The drift space may use plain lists (choices) and ``(low, high)`` tuples (ranges); the
    wrapped environment may be any Gymnasium env that accepts ``reset(options={"drift": theta,
    "phase": k})``.

    Args:
        env: a drifting environment (anything exposing ``drift_space``, possibly wrapped).
        schedule: has ``at(t) -> DriftState`` and ``validate(drift_space)``.
        clock: has ``now() -> float``; None for the built-in episode clock.

    Raises:
        ValueError: the environment has no drift space, the schedule or clock lacks a method,
            no clock is given for a schedule whose ``clock`` is not ``"episodes"``, or the
            schedule does not fit the drift space (the schedule's own error).

    Example:
        >>> env = DriftWrapper(gymnasium.make("sao_online/StyleShift-v0"), schedule)
        >>> observation, info = env.reset(seed=0)   # info["phase"], info["world_time"] == 0.0
    """

    def __init__(
        self, env: gymnasium.Env[str, str], schedule: ScheduleLike, clock: ClockLike | None = None
    ) -> None:
        super().__init__(env)
        try:
            drift_space = normalize_space(env.get_wrapper_attr("drift_space"))
        except AttributeError:
            raise ValueError(f"env: {env} has no drift_space; wrap a DriftingTextEnv") from None
        for method in ("at", "validate"):
            if not callable(getattr(schedule, method, None)):
                raise ValueError(f"schedule: {type(schedule).__name__} has no {method}() method")
        if clock is not None and not callable(getattr(clock, "now", None)):
            raise ValueError(f"clock: {type(clock).__name__} has no now() method")
        # The built-in clock counts episodes; a schedule written in steps or seconds read with
        # it would shift at the wrong times without any error.
        schedule_clock = getattr(schedule, "clock", "episodes")
        if clock is None and isinstance(schedule_clock, str) and schedule_clock != "episodes":
            raise ValueError(
                f"clock: the schedule counts {schedule_clock}; pass a clock that reads "
                f"{schedule_clock} (the built-in one counts episodes)"
            )
        schedule.validate(drift_space)
        self.drift_space = drift_space
        self.schedule = schedule
        self.clock = clock
        self.episodes_started = 0
        self.drift_state: DriftState | None = None
        self.world_time: float | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Reset under ``schedule.at(t)``; see the class docstring for the options rule."""
        caller_options = dict(options or {})
        clashing = sorted(key for key in ("drift", "phase") if key in caller_options)
        if clashing:
            raise ValueError(
                f"options.{clashing[0]}: DriftWrapper takes drift and phase from its schedule; "
                "reset the unwrapped environment to set them by hand"
            )
        world_time = float(self.episodes_started if self.clock is None else self.clock.now())
        state = self.schedule.at(world_time)
        caller_options.update(drift=dict(state.theta), phase=int(state.phase))
        observation, info = self.env.reset(seed=seed, options=caller_options)
        self.episodes_started += 1
        self.drift_state = state
        self.world_time = world_time
        self._theta = complete_theta(self.drift_space, state.theta)
        return observation, self._stamp(info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, self._stamp(info)

    def _stamp(self, info: dict[str, Any]) -> dict[str, Any]:
        # The schedule is the truth: a plain env may report no phase or theta, or its own.
        info["phase"] = int(self.drift_state.phase)
        info["theta"] = dict(self._theta)
        info["world_time"] = self.world_time
        return info


class LatencyWrapper(gymnasium.Wrapper[str, str, str, str]):
    """Sleeps a random, long-tailed time in ``step`` and/or ``reset``.

    Latency is lognormal with the given ``mean`` (seconds) and log-space spread ``sigma``:
    ``log(latency) ~ Normal(log(mean) - sigma**2 / 2, sigma)``. With sigma = 1 about 1 call in
    20 takes more than 3 x the mean. The sampled latency of each call is in ``info["latency"]``
    (0.0 for calls the wrapper does not delay).

    Args:
        env: the environment to slow down.
        mean: mean latency in seconds (0 disables the delay).
        sigma: spread of log-latency (0 makes every delay equal to ``mean``).
        seed: seeds the wrapper's own generator (independent of the environment's).
        on: ``"step"``, ``"reset"`` or ``"both"``.
        sleep: how to wait (``time.sleep``; tests may pass a recorder).

    Raises:
        ValueError: a negative or non-finite mean or sigma, an unknown ``on``, a bad seed.
    """

    def __init__(
        self,
        env: gymnasium.Env[str, str],
        mean: float = 0.05,
        sigma: float = 1.0,
        seed: int | None = None,
        on: str = "step",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(env)
        for name, value in (("mean", mean), ("sigma", sigma)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name}: expected a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")
        if on not in LATENCY_TARGETS:
            raise ValueError(f"on: expected one of {', '.join(LATENCY_TARGETS)}, got {on!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed: expected a non-negative int or None, got {seed!r}")
        self.mean = float(mean)
        self.sigma = float(sigma)
        self.on = on
        self._sleep = sleep
        self._rng = np.random.default_rng(seed)

    def sample_latency(self) -> float:
        """Draw one latency in seconds (without sleeping)."""
        if self.mean == 0.0:
            return 0.0
        log_mean = math.log(self.mean) - self.sigma**2 / 2
        return float(self._rng.lognormal(log_mean, self.sigma))

    def _delay(self, applies: bool) -> float:
        if not applies:
            return 0.0
        latency = self.sample_latency()
        if latency > 0.0:
            self._sleep(latency)
        return latency

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        latency = self._delay(self.on in ("reset", "both"))
        observation, info = self.env.reset(seed=seed, options=options)
        info["latency"] = latency
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        latency = self._delay(self.on in ("step", "both"))
        observation, reward, terminated, truncated, info = self.env.step(action)
        info["latency"] = latency
        return observation, reward, terminated, truncated, info
