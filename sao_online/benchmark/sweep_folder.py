"""A sweep as its folder records it: the field, its values and each value's benchmark folder
(``sweep.json``), read by the sweep that writes it and by its scorecard."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.benchmark.results_files import read_sweep_file
from sao_online.benchmark.runner import SWEEP_FILE
from sao_online.config import ConfigError
from sao_online.config.loading import parse_override

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")


@dataclass(frozen=True)
class Sweep:
    """One field and the values a sweep runs it at (each as written: YAML, as --set reads it)."""

    field: str
    values: tuple[str, ...]

    def override(self, value: str) -> str:
        """The ``--set`` override of ``value``."""
        return f"{self.field}={value}"

    def folder(self, value: str) -> str:
        """The folder of ``value``'s benchmark: ``<field>=<value>``, odd characters as ``_``."""
        return _UNSAFE.sub("_", f"{self.field}={value}")


def is_sweep(folder: str | Path) -> bool:
    """Whether ``folder`` holds a sweep (its ``sweep.json``)."""
    return (Path(folder) / SWEEP_FILE).is_file()


def read_sweep(out: str | Path) -> tuple[Sweep, dict[str, Path]]:
    """The sweep recorded in ``out`` and each value's benchmark folder.

    Raises:
        ConfigError: ``out`` holds no sweep.
        ResultsError: its ``sweep.json`` is damaged (naming the file).
    """
    out = Path(out)
    path = out / SWEEP_FILE
    if not path.is_file():
        raise ConfigError(f"{out}: not a sweep's folder (no {SWEEP_FILE})")
    data = read_sweep_file(path)
    sweep = Sweep(data["field"], tuple(data["values"]))
    return sweep, {value: out / data["folders"][value] for value in sweep.values}


def numeric_values(values: tuple[str, ...]) -> list[float] | None:
    """The values as numbers when every one is a number (YAML's reading), else None."""
    numbers = []
    for value in values:
        _, parsed = parse_override(f"x={value}")
        if isinstance(parsed, bool) or not isinstance(parsed, int | float):
            return None
        numbers.append(float(parsed))
    return numbers


def sweep_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows of (value, axis, method, iqm, lower, upper, scores) as the sweep's long table."""
    columns = ["value", "axis", "method", "iqm", "lower", "upper", "scores"]
    return pd.DataFrame(rows, columns=columns)
