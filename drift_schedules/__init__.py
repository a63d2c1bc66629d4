"""Drift schedules and clocks: ``Schedule.at(t) -> DriftState(phase, theta)``.

Example:
    >>> from sao_online.drift_schedules import load_schedule
    >>> schedule = load_schedule({"clock": "episodes", "seed": 0, "parameters": {
    ...     "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": [0, 5]}}})
    >>> schedule.at(5).phase
    1
"""

from sao_online.drift_schedules.clocks import (
    CLOCK_NAMES,
    Clock,
    EpisodeClock,
    ManualClock,
    StepClock,
    VersionClock,
    WallClock,
    make_clock,
)
from sao_online.drift_schedules.errors import ScheduleError
from sao_online.drift_schedules.schedule import Schedule, load_schedule
from sao_online.drift_schedules.space import (
    Choice,
    DriftValueError,
    Range,
    as_spec,
    complete_theta,
    default_theta,
    normalize_space,
    validate_theta,
)
from sao_online.drift_schedules.state import DriftState
from sao_online.drift_schedules.timeline import default_horizon, format_timeline, plot_timeline

__all__ = [
    "CLOCK_NAMES",
    "Choice",
    "Clock",
    "DriftState",
    "DriftValueError",
    "EpisodeClock",
    "ManualClock",
    "Range",
    "as_spec",
    "complete_theta",
    "normalize_space",
    "Schedule",
    "ScheduleError",
    "StepClock",
    "VersionClock",
    "WallClock",
    "default_horizon",
    "default_theta",
    "format_timeline",
    "load_schedule",
    "make_clock",
    "plot_timeline",
    "validate_theta",
]
