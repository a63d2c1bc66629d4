"""Find run directories and load their tables into one long-format DataFrame.

A run directory is any folder holding a ``config.yaml``; the runtime writes them as
``<root>/<experiment>/<method>/seed-<k>/``. Each table (``episodes``, ``updates``, ``evals``) is
either a single ``<table>.parquet`` file or a folder of part files written atomically (hidden
``.part-*.tmp`` files of a chunk still being written are ignored).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

TABLES = ("episodes", "updates", "evals")
RUN_KEYS = ["experiment", "method", "seed"]

# Tables a run may lack: evaluations are optional in the run-directory contract.
OPTIONAL_TABLES = {"evals"}
EVAL_COLUMNS = [
    "policy_version",
    "world_time",
    "current_phase",
    "eval_phase",
    "mean_reward",
    "num_episodes",
]

#: Prefix of the episode columns that record what kind of prompt an episode got (an env's
#: ``prompt_keys``, e.g. ``prompt/difficulty``); the report groups rewards by them.
PROMPT_COLUMN_PREFIX = "prompt/"

_SEED_FOLDER = re.compile(r"^seed-(-?\d+)$")


class RunLoadError(ValueError):
    """A path that holds no runs, a run without a table it needs, or an unreadable config."""


PathsLike = str | os.PathLike | Sequence[str | os.PathLike]


def find_run_dirs(paths: PathsLike) -> list[Path]:
    """Every directory at or below ``paths`` that holds a ``config.yaml``, sorted, no duplicates.

    Symbolic links to folders are followed; a run reached twice (through a link and directly)
    counts once, by its resolved path.

    Args:
        paths: one or more run roots, experiment dirs, method dirs or single seed dirs.

    Raises:
        RunLoadError: when a path does not exist or holds no run at all.
    """
    found: list[Path] = []
    for root in _as_path_list(paths):
        if not root.exists():
            raise RunLoadError(f"{root}: no such file or directory")
        if not root.is_dir():
            raise RunLoadError(f"{root}: expected a directory of runs, got a file")
        here: list[Path] = []
        # Symlinked folders are followed (pooling seed sets from two --out roots by linking
        # their runs into one folder is the natural first try); a link back up is walked once.
        visited: set[str] = set()
        for folder, subfolders, files in os.walk(root, followlinks=True):
            real = os.path.realpath(folder)
            if real in visited:
                subfolders[:] = []
                continue
            visited.add(real)
            if "config.yaml" in files:
                here.append(Path(folder))
                subfolders[:] = []  # a run's own folders (tables, checkpoints) hold no runs
            else:
                subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        if not here:
            raise RunLoadError(f"no runs found under {root} (no config.yaml at or below it)")
        found.extend(here)
    unique = sorted({path.resolve() for path in found})
    return unique


def load_run_configs(paths: PathsLike) -> pd.DataFrame:
    """One row per run with its identity and the config fields the analysis uses.

    ``experiment``, ``method`` and ``seed`` come from ``config.yaml`` and fall back to the folder
    names (``<experiment>/<method>/seed-<k>``) when the config lacks them.

    Args:
        paths: one or more run roots, experiment dirs, method dirs or single seed dirs.

    Returns:
        Columns ``experiment``, ``method``, ``seed``, ``path`` (str), ``change_points`` (list of
        float, shift times in clock units), ``phase_names`` (list of str), ``clock`` (str),
        ``budget_episodes`` (int or None) and ``config`` (the whole resolved config as a dict).

    Raises:
        RunLoadError: no runs under a path, or a config that is not a YAML mapping.
    """
    rows = [_config_row(path) for path in find_run_dirs(paths)]
    configs = pd.DataFrame(
        rows,
        columns=[
            *RUN_KEYS,
            "path",
            "change_points",
            "phase_names",
            "clock",
            "budget_episodes",
            "config",
        ],
    )
    duplicated = configs.duplicated(RUN_KEYS, keep=False)
    if duplicated.any():
        clash = configs[duplicated].sort_values(RUN_KEYS)
        raise RunLoadError(
            "two run directories claim the same experiment/method/seed: "
            + ", ".join(clash["path"].head(2))
        )
    return configs


def load_runs(paths: PathsLike, table: str = "episodes") -> pd.DataFrame:
    """Load one table of every run at or below ``paths`` into one long-format frame.

    Args:
        paths: one or more run roots, experiment dirs, method dirs or single seed dirs.
        table: ``"episodes"``, ``"updates"`` or ``"evals"``.

    Returns:
        The table's rows from every run with ``experiment``, ``method`` and ``seed`` columns in
        front. ``frame.attrs["runs"]`` maps ``(experiment, method, seed)`` to that run's
        ``change_points``, ``phase_names`` and ``clock``, which :func:`recovery_metrics` and the
        plots use when not given them explicitly. Runs without evaluations contribute no rows to
        ``table="evals"`` (an empty frame with the eval columns when none has any).

    Raises:
        RunLoadError: an unknown table, no runs under a path, or a run missing its
            ``episodes``/``updates`` table.

    Example:
        >>> episodes = load_runs("runs/style-shift")  # doctest: +SKIP
        >>> episodes.groupby("method").reward.mean()  # doctest: +SKIP
    """
    if table not in TABLES:
        raise RunLoadError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
    configs = load_run_configs(paths)
    frames = []
    for run in configs.itertuples(index=False):
        frame = read_table(Path(run.path), table)
        if frame is None:
            continue
        frame = frame.drop(columns=[c for c in RUN_KEYS if c in frame.columns])
        frame.insert(0, "experiment", run.experiment)
        frame.insert(1, "method", run.method)
        frame.insert(2, "seed", run.seed)
        frames.append(frame)
    frames = [frame for frame in frames if len(frame)] or frames[:1]
    if frames:
        combined = pd.concat(frames, ignore_index=True)
    else:
        columns = EVAL_COLUMNS if table == "evals" else []
        combined = pd.DataFrame(columns=[*RUN_KEYS, *columns])
    if table == "evals":  # runs whose evals folder holds no part yet still give the columns
        combined = combined.reindex(
            columns=[*combined.columns, *[c for c in EVAL_COLUMNS if c not in combined]]
        )
    combined["seed"] = combined["seed"].astype("int64")
    combined.attrs["runs"] = {
        (run.experiment, run.method, int(run.seed)): {
            "change_points": list(run.change_points),
            "phase_names": list(run.phase_names),
            "clock": run.clock,
        }
        for run in configs.itertuples(index=False)
    }
    return combined


def read_table(run_dir: Path, table: str) -> pd.DataFrame | None:
    """Read ``<run_dir>/<table>.parquet`` (a file or a folder of part files).

    Part files are read one by one and concatenated, so chunks with different metric columns
    (a metric first logged halfway through a run) line up by name with NaN where absent.

    Returns:
        The table, or None for an optional table (``evals``) the run does not have.

    Raises:
        RunLoadError: a required table is missing.
    """
    location = run_dir / f"{table}.parquet"
    if not location.exists():
        if table in OPTIONAL_TABLES:
            return None
        raise RunLoadError(f"run {run_dir} has no {table} table ({location.name} is missing)")
    if location.is_file():
        return _read_part(location)
    parts = sorted(
        part for part in location.glob("*.parquet") if not part.name.startswith((".", "_"))
    )
    if not parts:
        return pd.DataFrame()
    _check_recorded_parts(run_dir, table, parts)
    frames = [_read_part(part) for part in parts]
    frames = [frame for frame in frames if len(frame)] or frames[:1]
    return pd.concat(frames, ignore_index=True)


def _check_recorded_parts(run_dir: Path, table: str, parts: list[Path]) -> None:
    """Parts the newest checkpoint covers must match its recorded size and hash."""
    from sao_online.rundir.layout import recorded_parts, verify_part
    from sao_online.rundir.repair import repair_advice

    recorded = recorded_parts(run_dir)
    if recorded is None:
        return
    checkpoint, tables = recorded
    for part in parts:
        record = tables.get(table, {}).get(part.name)
        if record is not None and not verify_part(part, record):
            raise RunLoadError(
                f"{part}: damaged table part (differs from what checkpoint {checkpoint} recorded); "
                + repair_advice(run_dir, table, part.name)
            )


def _read_part(part: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(part)
    except Exception as error:  # noqa: BLE001  (pyarrow raises several unrelated types)
        from sao_online.rundir.repair import repair_advice

        first = str(error).strip().splitlines()[0][:80] if str(error).strip() else ""
        table = part.parent.name.removesuffix(".parquet")
        advice = (
            repair_advice(part.parent.parent, table, part.name)
            if part.parent.name.endswith(".parquet")
            else "the run cannot make it again: restore it from a copy of the run"
        )
        raise RunLoadError(
            f"{part}: damaged table part ({type(error).__name__}: {first}); {advice}"
        ) from None


def _config_row(run_dir: Path) -> dict[str, Any]:
    config_path = run_dir / "config.yaml"
    from sao_online.util.safe_yaml import YamlInputError, load_yaml_file

    try:
        config = load_yaml_file(config_path, "run config")
    except YamlInputError as error:
        raise RunLoadError(str(error)) from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise RunLoadError(f"{config_path}: expected a mapping, got {type(config).__name__}")
    seed_match = _SEED_FOLDER.match(run_dir.name)
    seed = config.get("seed", int(seed_match.group(1)) if seed_match else None)
    if seed is None:
        raise RunLoadError(f"{config_path}: no 'seed' key and the folder is not named seed-<k>")
    try:
        seed = int(seed)
    except (TypeError, ValueError) as error:
        raise RunLoadError(f"{config_path}: seed must be an integer, got {seed!r}") from error
    change_points = config.get("change_points") or []
    if not isinstance(change_points, list):
        raise RunLoadError(f"{config_path}: change_points must be a list, got {change_points!r}")
    try:
        change_points = [float(value) for value in change_points]
    except (TypeError, ValueError) as error:
        raise RunLoadError(
            f"{config_path}: change_points must be numbers, got {change_points!r}"
        ) from error
    budget = config.get("budget") if isinstance(config.get("budget"), dict) else {}
    experiment, method = config.get("experiment"), config.get("method")
    return {
        "experiment": experiment
        if isinstance(experiment, str) and experiment
        else run_dir.parent.parent.name,
        "method": method if isinstance(method, str) and method else run_dir.parent.name,
        "seed": seed,
        "path": str(run_dir),
        "change_points": change_points,
        "phase_names": [str(name) for name in (config.get("phase_names") or [])],
        "clock": str(config.get("clock") or "episodes"),
        "budget_episodes": budget.get("episodes"),
        "config": config,
    }


def _as_path_list(paths: PathsLike | Iterable[str | os.PathLike]) -> list[Path]:
    if isinstance(paths, str | os.PathLike):
        return [Path(paths)]
    as_list = [Path(path) for path in paths]
    if not as_list:
        raise RunLoadError("no paths given")
    return as_list
