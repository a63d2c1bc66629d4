"""The benchmark's results files, read and checked: a damaged or foreign file is one line naming
the file and what is wrong, never a traceback or a value silently taken for another.

A results folder (``OUT/results``) holds ``benchmark.json`` (the protocol, provenance records,
sessions), the tables ``runs.csv``, ``phases.csv``, ``shifts.csv`` and ``curves.csv`` (and
``controls.csv`` where re-adaptation controls ran), and one JSON record per finished run
(``runs/<task>/<method>/seed-<k>.json``) and control
(``controls/<task>/<method>/seed-<k>/shift-<n>.json``). Each reader checks what it
reads before anything uses it: text that is not UTF-8, a truncated file, a value of the wrong
kind, a missing column or field. Everything here raises :class:`ResultsError` (a ``ValueError``:
the command line prints it as one line and exits with code 2).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sao_online.benchmark.results import RUN_COLUMNS, SHIFT_COLUMNS

TABLES = ("runs", "phases", "shifts", "curves")


class ResultsError(ValueError):
    """A results file that is damaged or foreign, a folder that lacks one, or tables that do
    not belong together (the message names the file)."""


def read_text(path: Path, what: str) -> str:
    """``path``'s text, or :class:`ResultsError` naming it (missing, unreadable, not UTF-8)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such {what}") from None
    except OSError as error:
        raise ResultsError(f"{path}: cannot read the {what} ({error.strerror})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ResultsError(
            f"{path}: damaged {what}: not UTF-8 text (byte 0x{raw[error.start]:02x} at line {line})"
        ) from None


def read_json(path: Path, what: str) -> Any:
    """``path`` parsed as JSON, or :class:`ResultsError` naming the file and the position."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        cut = error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated")
        problem = "truncated: it ends inside a value" if cut else error.msg
        raise ResultsError(
            f"{path}: damaged {what}: not valid JSON ({problem}; line {error.lineno}, "
            f"column {error.colno})"
        ) from None
    except RecursionError:
        raise ResultsError(f"{path}: damaged {what}: nested too deeply") from None


# -- field checks -------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and math.isnan(value))
    )


Check = Callable[[Any], bool]
_STR: Check = lambda value: isinstance(value, str)  # noqa: E731
_INT: Check = _is_int
_NUM: Check = _is_number
_OPT_NUM: Check = lambda value: value is None or _is_number(value)  # noqa: E731
_BOOL: Check = lambda value: isinstance(value, bool)  # noqa: E731
_DICT: Check = lambda value: isinstance(value, dict)  # noqa: E731
_LIST: Check = lambda value: isinstance(value, list)  # noqa: E731
_OPT_STR: Check = lambda value: value is None or isinstance(value, str)  # noqa: E731
_WHAT = {
    _STR: "a string",
    _INT: "an integer",
    _NUM: "a number",
    _OPT_NUM: "a number or null",
    _BOOL: "true or false",
    _DICT: "an object",
    _LIST: "a list",
    _OPT_STR: "a string or null",
}

_RECORD = {
    "key": _DICT,
    "run": _DICT,
    "phases": _LIST,
    "shifts": _LIST,
    "curve": _LIST,
    "config_hash": _STR,
    "provenance": _DICT,
}
_RECORD_OPTIONAL = {"warm_start": _OPT_STR, "provenance_id": _STR, "code": _DICT, "session": _STR}
_KEY = {
    "task": _STR,
    "family": _STR,
    "method": _STR,
    "method_spec": _STR,
    "seed": _INT,
    "tier": _STR,
}
_RUN = {
    "episodes": _INT,
    "dropped_episodes": _INT,
    "updates": _INT,
    "seconds": _OPT_NUM,
    "action_tokens": _OPT_NUM,
}
_PHASE = {
    "phase": _INT,
    "phase_name": _STR,
    "start": _NUM,
    "end": _NUM,
    "episodes": _INT,
    "reward_mean": _NUM,
    "oracle_mean": _OPT_NUM,
}
_SHIFT = {
    "shift": _INT,
    "tau": _NUM,
    "phase_before": _STR,
    "phase_after": _STR,
    "time_to_half_oracle": _OPT_NUM,
    "censored": _BOOL,
    "time_available": _OPT_NUM,
}
_CURVE = {"start": _NUM, "end": _NUM, "episodes": _INT, "reward_mean": _NUM}


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_fields(
    value: Any, fields: dict[str, Check], where: str, optional: dict[str, Check] | None = None
) -> None:
    """Raise a one-line problem (without the file) when ``value`` lacks a field or has one of
    the wrong kind."""
    if not isinstance(value, dict):
        raise ValueError(f"{where or 'the file'}: expected an object, got {_short(value)}")
    prefix = f"{where}." if where else ""
    for name, check in fields.items():
        if name not in value:
            raise ValueError(f"{prefix}{name}: missing")
        if not check(value[name]):
            raise ValueError(f"{prefix}{name}: expected {_WHAT[check]}, got {_short(value[name])}")
    for name, check in (optional or {}).items():
        if name in value and not check(value[name]):
            raise ValueError(f"{prefix}{name}: expected {_WHAT[check]}, got {_short(value[name])}")


def check_record(record: Any) -> None:
    """Check a per-run result record's fields (see ``results.result_tables``).

    Raises:
        ValueError: the first field that is missing or of the wrong kind (without the file).
    """
    _check_fields(record, _RECORD, "", _RECORD_OPTIONAL)
    _check_fields(record["key"], _KEY, "key")
    _check_fields(record["run"], _RUN, "run")
    for name, fields in (("phases", _PHASE), ("shifts", _SHIFT), ("curve", _CURVE)):
        for index, row in enumerate(record[name]):
            _check_fields(row, fields, f"{name}[{index}]")


def read_record(path: Path) -> dict[str, Any]:
    """A per-run result record, checked.

    Raises:
        ResultsError: naming the file: damaged, not a result record, or filed under another
            run's name.
    """
    record = read_json(path, "result record")
    try:
        check_record(record)
    except ValueError as error:
        raise ResultsError(f"{path}: not a benchmark result record ({error})") from None
    key = record["key"]
    if "control" in key:  # results/controls/<task>/<method>/seed-<k>/shift-<n>.json
        expected: tuple[str, ...] = (
            key["task"],
            key["method"],
            f"seed-{key['seed']}",
            f"shift-{key['control']}.json",
        )
        filed = (path.parent.parent.parent.name, path.parent.parent.name, path.parent.name)
        filed += (path.name,)
    else:
        expected = (key["task"], key["method"], f"seed-{key['seed']}.json")
        filed = (path.parent.parent.name, path.parent.name, path.name)
    if filed != expected:
        raise ResultsError(
            f"{path}: holds the result of {key['task']} {key['method']} seed {key['seed']}, "
            "not of the run its path names"
        )
    return record


def read_kept(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(file, record) of every per-run result record under ``out/results/runs``, checked."""
    folder = out / "results" / "runs"
    if not folder.is_dir():
        return []
    return [(path, read_record(path)) for path in sorted(folder.rglob("seed-*.json"))]


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every per-run result record under ``out/results/runs``, each checked."""
    return [record for _, record in read_kept(out)]


# -- benchmark.json ------------------------------------------------------------------------------

_BENCHMARK = {"protocol": _DICT}
_BENCHMARK_OPTIONAL = {"provenance": _DICT, "sessions": _LIST, "sources": _LIST, "code": _DICT}
_PROTOCOL = {"format": _INT, "tier": _STR, "score": _DICT, "tasks": _DICT, "methods": _DICT}
_SCORE = {"floor": _STR, "half_oracle": _NUM, "min_gap": _NUM, "curve_bins": _INT}
_TASK = {"family": _STR, "cpus": _INT, "config": _DICT, "config_hash": _STR}
_METHOD = {"spec": _STR, "algorithm": _DICT}


def check_benchmark(data: Any) -> None:
    """Check ``benchmark.json``'s structure.

    Raises:
        ValueError: the first field that is missing or of the wrong kind (without the file).
    """
    _check_fields(data, _BENCHMARK, "", _BENCHMARK_OPTIONAL)
    protocol = data["protocol"]
    _check_fields(protocol, _PROTOCOL, "protocol")
    _check_fields(protocol["score"], _SCORE, "protocol.score")
    for name, task in protocol["tasks"].items():
        where = f"protocol.tasks.{str(name)[:40]}"
        _check_fields(task, _TASK, where)
        _check_fields(task["config"].get("budget"), {"episodes": _INT}, f"{where}.config.budget")
    for name, method in protocol["methods"].items():
        _check_fields(method, _METHOD, f"protocol.methods.{str(name)[:40]}")
    for index, session in enumerate(data.get("sessions", [])):
        if not isinstance(session, dict):
            raise ValueError(f"sessions[{index}]: expected an object, got {_short(session)}")


def read_benchmark(path: Path) -> dict[str, Any]:
    """``benchmark.json``, checked.

    Raises:
        ResultsError: naming the file: missing, damaged, or not a benchmark's.
    """
    data = read_json(path, "benchmark file")
    try:
        check_benchmark(data)
    except ValueError as error:
        raise ResultsError(f"{path}: not a benchmark's benchmark.json ({error})") from None
    return data


def read_sweep_file(path: Path) -> dict[str, Any]:
    """A sweep's ``sweep.json``, checked: its field, its values (strings) and each value's
    folder.

    Raises:
        ResultsError: naming the file: missing, damaged, or not a sweep's.
    """
    data = read_json(path, "sweep file")
    try:
        _check_fields(data, {"field": _STR, "values": _LIST, "folders": _DICT}, "")
        for index, value in enumerate(data["values"]):
            if not isinstance(value, str):
                raise ValueError(f"values[{index}]: expected a string, got {_short(value)}")
            if not isinstance(data["folders"].get(value), str):
                raise ValueError(f"folders: no folder for the value {_short(value)}")
    except ValueError as error:
        raise ResultsError(f"{path}: not a sweep's sweep.json ({error})") from None
    return data


# -- tables ---------------------------------------------------------------------------------------

#: Per table: column -> kind ("str", "int", "num", "num?" and "int?" may be empty, "bool",
#: "any").
COLUMNS: dict[str, dict[str, str]] = {
    "runs": {
        "task": "str",
        "family": "str",
        "method": "str",
        "method_spec": "str",
        "seed": "int",
        "tier": "str",
        "episodes": "int",
        "dropped_episodes": "int",
        "updates": "int",
        "seconds": "num?",
        "action_tokens": "num?",
        "config_hash": "str",
        "provenance_id": "str",
    },
    "phases": {
        "task": "str",
        "method": "str",
        "seed": "int",
        "phase": "int",
        "phase_name": "str",
        "start": "num",
        "end": "num",
        "episodes": "int",
        "reward_mean": "num",
        "oracle_mean": "num?",
    },
    "shifts": {
        "task": "str",
        "method": "str",
        "seed": "int",
        "shift": "int",
        "tau": "num",
        "phase_before": "str",
        "phase_after": "str",
        "time_to_half_oracle": "num?",
        "censored": "bool",
        "time_available": "num?",
    },
    "curves": {
        "task": "str",
        "method": "str",
        "seed": "int",
        "start": "num",
        "end": "num",
        "episodes": "int",
        "reward_mean": "num",
    },
    "controls": {  # only where re-adaptation controls ran (``controls.py``)
        "task": "str",
        "method": "str",
        "seed": "int",
        "shift": "int",
        "start": "int",
        "phase": "int",
        "phase_name": "str",
        "episodes": "int",
        "reward_mean": "num",
        "oracle_mean": "num?",
        "warm_start": "any",
        "provenance_id": "str",
    },
}
#: Columns added after results were first kept: filled with nothing where a table lacks them.
LATER_COLUMNS = {
    "runs": {
        "warm_start": "config_hash",
        "warm_start_seed": "warm_start",
        "code_id": "warm_start_seed",
    }
}
#: The kind of a later column that is not text.
LATER_KINDS = {"warm_start_seed": "int?"}


def _column_problem(values: pd.Series, kind: str) -> int | None:
    """The index of the first value of ``values`` that is not of ``kind``, or None."""
    missing = values.isna()
    if kind in ("str", "int", "num", "bool") and missing.any():
        return int(missing.to_numpy().nonzero()[0][0])
    present = values[~missing]
    if kind in ("int", "int?", "num", "num?"):
        numbers = pd.to_numeric(present, errors="coerce")
        bad = numbers.isna()
        if kind in ("int", "int?"):
            bad |= numbers.notna() & (numbers != numbers.round())
        if bad.any():
            return int(values.index.get_loc(bad[bad].index[0]))
    if kind == "bool":
        bad = ~present.astype(str).str.lower().isin(["true", "false", "1", "0"])
        if bad.any():
            return int(values.index.get_loc(bad[bad].index[0]))
    return None


def read_table(path: Path, name: str) -> pd.DataFrame:
    """One of a results folder's tables, checked: its columns and each value's kind.

    Raises:
        ResultsError: naming the file, and the line and column at fault.
    """
    text = read_text(path, f"{name} table")
    if text and not text.endswith("\n"):  # every table is written whole, line by line
        line = text.count("\n") + 1
        raise ResultsError(f"{path}: damaged {name} table: truncated (line {line} is cut short)")
    columns = COLUMNS[name]
    # Text columns as text: a hash of digits and one "e" would otherwise read as a float.
    text_columns = [c for c, kind in columns.items() if kind in ("str", "any")]
    text_columns += [c for c in LATER_COLUMNS.get(name, {}) if c not in LATER_KINDS]
    try:
        table = pd.read_csv(
            io.StringIO(text),
            keep_default_na=False,
            na_values=[""],
            dtype=dict.fromkeys(text_columns, str),
        )
    except pd.errors.EmptyDataError:
        raise ResultsError(f"{path}: damaged {name} table: empty") from None
    except (pd.errors.ParserError, ValueError) as error:
        first = str(error).strip().splitlines()[0][:120] if str(error).strip() else "unreadable"
        raise ResultsError(f"{path}: damaged {name} table ({first})") from None
    absent = [column for column in columns if column not in table.columns]
    if absent:
        raise ResultsError(
            f"{path}: not a benchmark {name} table: no column {absent[0]!r}"
            + (" (a truncated file?)" if len(table) <= 1 else "")
        )
    later = {c: LATER_KINDS[c] for c in LATER_COLUMNS.get(name, {}) if c in LATER_KINDS}
    checked = {**columns, **{c: kind for c, kind in later.items() if c in table}}
    for column, kind in checked.items():
        row = _column_problem(table[column], kind)
        if row is not None:
            value = table[column].iloc[row]
            shown = "nothing" if pd.isna(value) else repr(str(value)[:40])
            raise ResultsError(
                f"{path}: damaged {name} table: line {row + 2}, column {column}: expected "
                f"{'a value' if kind == 'str' else kind.rstrip('?')}, got {shown}"
                + (" (a truncated file?)" if row == len(table) - 1 else "")
            )
    for column, kind in checked.items():
        if kind == "int":
            table[column] = pd.to_numeric(table[column]).astype(int)
        elif kind in ("num", "num?", "int?"):  # int? as float: it may be empty
            table[column] = pd.to_numeric(table[column]).astype(float)
        elif kind == "bool":
            table[column] = table[column].astype(str).str.lower().isin(["true", "1"])
        elif kind == "str":
            table[column] = table[column].astype(str)
    for column, after in LATER_COLUMNS.get(name, {}).items():
        if column not in table:
            table.insert(list(table.columns).index(after) + 1, column, None)
    return table


def read_tables(folder: str | Path) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """The result tables and ``benchmark.json`` of a results folder (``OUT/results``), each
    checked, and checked to belong together (every row's run in ``runs.csv``).

    Raises:
        ResultsError: a file that is missing, damaged or foreign (named).
    """
    folder = Path(folder)
    if not (folder / "benchmark.json").is_file():
        raise ResultsError(f"{folder}: no benchmark.json (not a benchmark results folder)")
    benchmark = read_benchmark(folder / "benchmark.json")
    tables = {}
    for name in TABLES:
        path = folder / f"{name}.csv"
        if not path.is_file():
            raise ResultsError(f"{folder}: no {name}.csv")
        tables[name] = read_table(path, name)
    controls = folder / "controls.csv"  # the re-adaptation controls, when it ran them
    tables["controls"] = (
        read_table(controls, "controls")
        if controls.is_file()
        else pd.DataFrame(columns=list(COLUMNS["controls"]))
    )
    runs = set(zip(tables["runs"]["task"], tables["runs"]["method"], tables["runs"]["seed"]))
    if len(runs) != len(tables["runs"]):
        raise ResultsError(f"{folder / 'runs.csv'}: a run is listed twice")
    for name in ("phases", "shifts", "curves", "controls"):
        table = tables[name]
        for task, method, seed in zip(table["task"], table["method"], table["seed"]):
            if (task, method, seed) not in runs:
                raise ResultsError(
                    f"{folder / (name + '.csv')}: rows of {task} {method} seed {seed}, a run "
                    "runs.csv does not list (files of two benchmarks mixed?)"
                )
    tasks = set(benchmark["protocol"]["tasks"])
    stray = sorted(set(tables["runs"]["task"]) - tasks)
    if stray:
        raise ResultsError(
            f"{folder / 'runs.csv'}: task {stray[0]} is no task of benchmark.json's protocol"
        )
    for name, columns in (("runs", RUN_COLUMNS), ("shifts", SHIFT_COLUMNS)):
        # Results kept before a column was recorded (warm starts, what runs exercised, the time
        # axis) lack it: empty, in its place.
        tables[name] = tables[name].reindex(
            columns=[*columns, *(c for c in tables[name].columns if c not in columns)]
        )
    tables["runs"] = with_warm_start_seeds(tables["runs"], benchmark["protocol"])
    return tables, benchmark


def with_warm_start_seeds(runs: pd.DataFrame, protocol: dict[str, Any]) -> pd.DataFrame:
    """``runs`` with every run's warm-start seed: results kept before runs recorded it started
    from their task config's (``model.warm_start_seed``, 0 unless set)."""
    recorded = (
        runs["warm_start_seed"] if "warm_start_seed" in runs else pd.Series(np.nan, runs.index)
    )
    configured = runs["task"].map(
        {
            name: task["config"].get("model", {}).get("warm_start_seed", 0)
            for name, task in protocol["tasks"].items()
        }
    )
    seeds = pd.to_numeric(recorded).fillna(configured).fillna(0).astype(int)
    runs = runs.drop(columns="warm_start_seed", errors="ignore")
    runs.insert(list(runs.columns).index("warm_start") + 1, "warm_start_seed", seeds)
    return runs
