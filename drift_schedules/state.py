"""The state a schedule gives at one clock reading."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DriftState:
    """What the environment looks like at one time.

    Attributes:
        phase: index of the regime: the number of declared change points at or before t.
        theta: drift parameter name -> value in force.
    """

    phase: int
    theta: dict[str, Any] = field(default_factory=dict)
