"""``Schedule``: one scheduler per drift parameter, read at a clock time.

The YAML form (the same dict goes to :func:`load_schedule`)::

    clock: episodes          # episodes | steps | versions | seconds
    seed: 0
    parameters:
      preferred: {kind: abrupt, values: [cute, chuunibyou, classical], at: [0, 1500, 3000]}
      slip:      {kind: linear, from: 0.0, to: 0.3, start: 0, end: 2000}
      tool:      {kind: gradual, from: calc, to: compute, start: 1000, width: 200}
      goal:      {kind: cyclic, values: [ne, sw], period: 500}
      failure:   {kind: random_walk, start: 0.1, step: 0.02, low: 0.0, high: 0.5}
      mix:       {kind: change_points, values: [easy, hard], rate: 0.001}
      format:    {kind: stationary, value: tags}

``schedule.at(t)`` gives ``DriftState(phase, theta)``: theta holds every parameter's value at t,
and phase counts the change points of the whole schedule (all parameters together, equal times
counted once) that are ``<= t``.
"""

from __future__ import annotations

import math
import numbers
import threading
from bisect import bisect_right
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from sao_online.drift_schedules.checks import check_fields, type_name
from sao_online.drift_schedules.clocks import CLOCK_NAMES, Clock, make_clock
from sao_online.drift_schedules.errors import ScheduleError
from sao_online.drift_schedules.kinds import Abrupt, Cyclic, Linear, ParameterSchedule, Stationary
from sao_online.drift_schedules.random_kinds import (
    ChangePoints,
    Gradual,
    RandomWalk,
    parameter_entropy,
)
from sao_online.drift_schedules.space import DriftSpace, DriftValueError, normalize_space
from sao_online.drift_schedules.state import DriftState
from sao_online.util.safe_yaml import YamlInputError, load_yaml_file

#: Kind name -> scheduler class.
KINDS: dict[str, type[ParameterSchedule]] = {
    kind.kind: kind
    for kind in (Stationary, Abrupt, Gradual, Linear, Cyclic, RandomWalk, ChangePoints)
}
#: Other names accepted for a kind; ``to_dict`` writes the canonical name.
KIND_ALIASES = {"incremental": "linear"}

_TOP_LEVEL_FIELDS = ("clock", "seed", "parameters")


def parse_parameter(spec: Any, entropy: tuple[int, ...]) -> ParameterSchedule:
    """Build the scheduler for one parameter's mapping (errors name fields relative to it)."""
    if not isinstance(spec, Mapping):
        raise ScheduleError("", f"expected a mapping with 'kind', got {spec!r} ({type_name(spec)})")
    known = ", ".join([*KINDS, *KIND_ALIASES])
    if "kind" not in spec:
        raise ScheduleError("kind", f"missing field; expected one of {known}")
    kind = spec["kind"]
    if not isinstance(kind, str) or KIND_ALIASES.get(kind, kind) not in KINDS:
        raise ScheduleError("kind", f"unknown kind {kind!r}; expected one of {known}")
    scheduler_class = KINDS[KIND_ALIASES.get(kind, kind)]
    check_fields(spec, kind, scheduler_class.required_fields)
    return scheduler_class(spec, entropy)


def check_time(t: Any, field: str = "t") -> float:
    """A clock reading as a float; it must be a finite number >= 0."""
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t) or t < 0:
        raise ScheduleError(field, f"expected a finite clock reading >= 0, got {t!r}")
    return float(t) + 0.0


class Schedule:
    """How an environment's drift parameters move with time.

    Immutable once built (the seeded kinds cache draws they would make the same way again).
    Build one from its YAML form with :func:`load_schedule`, or directly.

    Args:
        parameters: parameter name -> its scheduler's mapping (``{"kind": ..., ...}``).
        clock: what t counts: ``episodes`` (default), ``steps``, ``versions`` or ``seconds``.
        seed: seeds the random kinds (gradual, random_walk, change_points); an int >= 0.

    Raises:
        ScheduleError: naming the field at fault, e.g. ``parameters.preferred.at``.

    Example:
        >>> schedule = Schedule({"preferred": {"kind": "abrupt", "values": ["cute", "classical"],
        ...                                    "at": [0, 5]}})
        >>> schedule.at(4)
        DriftState(phase=0, theta={'preferred': 'cute'})
        >>> schedule.at(5)
        DriftState(phase=1, theta={'preferred': 'classical'})
    """

    def __init__(
        self, parameters: Mapping[str, Mapping[str, Any]], *, clock: str = "episodes", seed: int = 0
    ) -> None:
        if not isinstance(clock, str) or clock not in CLOCK_NAMES:
            raise ScheduleError(
                "clock", f"unknown clock {clock!r}; expected one of {', '.join(CLOCK_NAMES)}"
            )
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ScheduleError("seed", f"expected an integer >= 0, got {seed!r}")
        if not isinstance(parameters, Mapping):
            raise ScheduleError(
                "parameters",
                "expected a mapping of parameter name -> schedule, "
                f"got {parameters!r} ({type_name(parameters)})",
            )
        self._clock = clock
        self._seed = int(seed)
        schedulers: dict[str, ParameterSchedule] = {}
        for name, spec in parameters.items():
            if not isinstance(name, str) or not name:
                raise ScheduleError(
                    "parameters", f"parameter names must be non-empty strings, got {name!r}"
                )
            try:
                schedulers[name] = parse_parameter(spec, parameter_entropy(self._seed, name))
            except ScheduleError as error:
                raise error.within(f"parameters.{name}") from None
        self._parameters = MappingProxyType(schedulers)
        self._finite_points = sorted(
            {
                point
                for scheduler in schedulers.values()
                if not scheduler.unbounded
                for point in scheduler.change_points()
            }
        )
        self._unbounded = [name for name, scheduler in schedulers.items() if scheduler.unbounded]
        # Change points of all parameters up to ``_union_horizon``, grown geometrically on
        # demand so reading the phase at increasing t stays cheap.
        self._union_lock = threading.Lock()
        self._union_horizon = -1.0
        self._union_points: list[float] = []

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schedule:
        """Build from the YAML form; unknown top-level fields are errors."""
        if not isinstance(data, Mapping):
            raise ScheduleError(
                "",
                f"expected a mapping with clock, seed, parameters, "
                f"got {data!r} ({type_name(data)})",
            )
        for name in data:
            if name not in _TOP_LEVEL_FIELDS:
                raise ScheduleError(
                    str(name), f"unknown field; a schedule has {', '.join(_TOP_LEVEL_FIELDS)}"
                )
        if "parameters" not in data:
            raise ScheduleError("parameters", "missing field (a mapping of parameter -> schedule)")
        return cls(
            data["parameters"], clock=data.get("clock", "episodes"), seed=data.get("seed", 0)
        )

    @classmethod
    def stationary(
        cls, theta: Mapping[str, Any], *, clock: str = "episodes", seed: int = 0
    ) -> Schedule:
        """A schedule that holds ``theta`` forever (a single phase)."""
        if not isinstance(theta, Mapping):
            raise ScheduleError(
                "parameters",
                f"expected a mapping of parameter -> value, got {theta!r} ({type_name(theta)})",
            )
        return cls(
            {name: {"kind": "stationary", "value": value} for name, value in theta.items()},
            clock=clock,
            seed=seed,
        )

    @property
    def clock(self) -> str:
        """The clock name: episodes, steps, versions or seconds."""
        return self._clock

    @property
    def seed(self) -> int:
        """The seed of the random kinds."""
        return self._seed

    @property
    def parameters(self) -> Mapping[str, ParameterSchedule]:
        """Parameter name -> its scheduler (read-only)."""
        return self._parameters

    def make_clock(self) -> Clock:
        """A fresh clock of this schedule's kind."""
        return make_clock(self._clock)

    def at(self, t: float) -> DriftState:
        """The drift state at clock reading ``t``: a pure function of (schedule, t)."""
        t = check_time(t)
        theta = {}
        for name, scheduler in self._parameters.items():
            try:
                theta[name] = scheduler.value(t)
            except ScheduleError as error:  # a runaway rate or period, found only now
                raise error.within(f"parameters.{name}") from None
        return DriftState(phase=self.phase_at(t), theta=theta)

    def phase_at(self, t: float) -> int:
        """The number of the schedule's change points that are ``<= t``."""
        t = check_time(t)
        if not self._unbounded:
            return bisect_right(self._finite_points, t)
        return bisect_right(self._points_through(t), t)

    def _points_through(self, horizon: float) -> list[float]:
        """Sorted unique change points, complete at least up to ``horizon``."""
        with self._union_lock:
            if horizon > self._union_horizon:
                grown = max(horizon, 2 * self._union_horizon, 1.0)
                points = set(self._finite_points)
                for name in self._unbounded:
                    try:
                        points.update(self._parameters[name].change_points(grown))
                    except ScheduleError as error:
                        raise error.within(f"parameters.{name}") from None
                self._union_points = sorted(points)
                self._union_horizon = grown
            return self._union_points

    def change_points(self, until: float | None = None) -> list[float]:
        """Sorted unique shift times of the whole schedule, those ``<= until`` if given.

        Raises:
            ScheduleError: naming ``until`` when it is omitted but a parameter (cyclic,
                change_points) has infinitely many change points.
        """
        if until is None:
            if self._unbounded:
                name = self._unbounded[0]
                raise ScheduleError(
                    "until",
                    f"parameter {name!r} ({self._parameters[name].kind}) has infinitely "
                    "many change points; pass until=",
                )
            return list(self._finite_points)
        until = check_time(until, "until")
        points = self._points_through(until) if self._unbounded else self._finite_points
        return points[: bisect_right(points, until)]

    def phase_names(self, until: float | None = None) -> list[str]:
        """A short label per phase up to ``until``, e.g. ``"preferred=cute, pool=..."``.

        Parameters whose value is constant over a phase and that change at all (abrupt,
        cyclic, change_points, and the dominant side of a gradual shift) name the phases;
        a phase that none of them names is called ``"phase <k>"``.
        """
        starts = [0.0, *self.change_points(until)]
        names = []
        for index, start in enumerate(starts):
            labels = []
            for name, scheduler in self._parameters.items():
                label = scheduler.short_label(start)
                if label is not None:
                    labels.append(f"{name}={label}")
            names.append(", ".join(labels) if labels else f"phase {index}")
        return names

    def validate(self, drift_space: DriftSpace) -> Schedule:
        """Check the schedule against an environment's drift space; returns ``self``.

        Every parameter must exist in ``drift_space`` and every value the schedule can
        produce must be allowed (parameters it leaves out keep the environment's defaults).

        Raises:
            DriftValueError: naming ``parameters.<name>`` (and the field) at fault.
        """
        if not isinstance(drift_space, Mapping):
            raise DriftValueError(
                f"drift_space: expected a mapping of parameter name -> Choice "
                f"or Range, got {type_name(drift_space)}"
            )
        drift_space = normalize_space(drift_space)  # plain lists and (low, high) tuples too
        for name, scheduler in self._parameters.items():
            where = f"parameters.{name}"
            if name not in drift_space:
                raise DriftValueError(
                    f"{where}: unknown drift parameter; the environment has "
                    f"{', '.join(sorted(drift_space)) or 'none'}"
                )
            scheduler.validate(drift_space[name], where)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The YAML form; ``load_schedule(s.to_dict())`` equals ``s``."""
        return {
            "clock": self._clock,
            "seed": self._seed,
            "parameters": {
                name: scheduler.to_dict() for name, scheduler in self._parameters.items()
            },
        }

    def to_yaml(self, path: str | Path | None = None) -> str:
        """The YAML text, one line per parameter as in the design; written to ``path`` if given."""
        lines = [f"clock: {self._clock}", f"seed: {self._seed}"]
        if self._parameters:
            lines.append("parameters:")
            for name, scheduler in self._parameters.items():
                spec = yaml.safe_dump(
                    scheduler.to_dict(), default_flow_style=True, sort_keys=False, width=math.inf
                ).strip()
                lines.append(f"  {yaml.safe_dump(name).splitlines()[0]}: {spec}")
        else:
            lines.append("parameters: {}")
        text = "\n".join(lines) + "\n"
        if path is not None:
            Path(path).write_text(text)
        return text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from the YAML form: caches and locks stay behind, draws come out the same.
        return (Schedule.from_dict, (self.to_dict(),))

    def __repr__(self) -> str:
        kinds = ", ".join(
            f"{name}: {scheduler.kind}" for name, scheduler in self._parameters.items()
        )
        return f"Schedule(clock={self._clock!r}, seed={self._seed}, parameters={{{kinds}}})"


def load_schedule(source: str | Path | Mapping[str, Any] | Schedule) -> Schedule:
    """A schedule from a YAML/JSON file path, its dict form, or a ``Schedule`` (returned as is).

    Raises:
        ScheduleError: for a missing or unreadable file, or naming the field at fault
            (with the file's name appended for files).
    """
    if isinstance(source, Schedule):
        return source
    if isinstance(source, Mapping):
        return Schedule.from_dict(source)
    if not isinstance(source, str | Path):
        raise ScheduleError(
            "",
            f"load_schedule expects a file path, a mapping or a Schedule, got {type_name(source)}",
        )
    path = Path(source)
    if not path.exists():
        raise ScheduleError(str(path), "no such schedule file")
    try:
        data = load_yaml_file(path, "schedule file")
    except YamlInputError as error:
        raise ScheduleError("", str(error)) from None
    try:
        return Schedule.from_dict(data)
    except ScheduleError as error:
        raise ScheduleError(error.field, f"{error.problem} (in {path})") from None
