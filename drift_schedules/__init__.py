"""Drift schedules and clocks: ``Schedule.at(t) -> DriftState(phase, theta)``."""

from sao_online.drift_schedules.space import Choice, DriftValueError, Range, default_theta, validate_theta
from sao_online.drift_schedules.state import DriftState

__all__ = ["Choice", "DriftState", "DriftValueError", "Range", "default_theta", "validate_theta"]
