"""The columns of a run's tables that measure the machine's time: two runs of one config differ
there and nowhere else (for the ``sync`` backend; the simulated one keeps its real seconds under
``sim/``)."""

from __future__ import annotations

import pandas as pd

#: Seconds a run reports that come from its seed, not from the machine.
SEEDED_SECONDS = ("env_latency_seconds",)


def machine_time_columns(frame: pd.DataFrame) -> list[str]:
    """``wall_time``, ``finished_time`` and every ``*_seconds`` column but the seeded ones.

    Example:
        >>> machine_time_columns(pd.DataFrame(columns=["reward", "wall_time", "env_seconds"]))
        ['wall_time', 'env_seconds']
    """
    return [
        column
        for column in frame.columns
        if column in ("wall_time", "finished_time")
        or (column.endswith("_seconds") and column not in SEEDED_SECONDS)
    ]


def without_machine_time(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without its ``machine_time_columns``."""
    return frame.drop(columns=machine_time_columns(frame))
