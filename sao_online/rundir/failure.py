"""A run that fails keeps its evidence: ``error.txt`` in its run directory, and a rerun that
continues or restarts it without ``--overwrite``.

When a run raises (a user's method or task that crashes mid-run, say), ``error.txt`` gets the
whole traceback, the run's last records (its last updates and episodes, written or not yet) and
its messages; everything the run wrote before stays as it was. ``compare`` and ``benchmark``
print the failing run, the exception and this file's path.

Running the same command again continues the failed run from its last checkpoint when nothing
about it changed, and starts it again otherwise (it had no checkpoint, or its config or code
changed: a fixed module is new code), saying which; the previous ``error.txt`` is kept as
``error.previous.txt``.
"""

from __future__ import annotations

import datetime
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from sao_online.rundir.layout import checkpoint_folders, read_config_file, write_text_atomically
from sao_online.util.code_identity import code_difference

ERROR_FILE = "error.txt"
PREVIOUS_ERROR_FILE = "error.previous.txt"
#: Columns of the last records shown in ``error.txt`` (those a table has).
_SHOWN = {
    "updates": ["version", "episodes", "losses/policy", "losses/value", "charts/reward_mean"],
    "episodes": ["episode", "phase", "reward", "behavior", "world_time", "version"],
}


def failed_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a run that failed (and has not been run again since)."""
    run_dir = Path(run_dir)
    return (run_dir / ERROR_FILE).is_file() and (run_dir / "config.yaml").is_file()


def _records(tables: Mapping[str, pd.DataFrame | None]) -> list[str]:
    lines = []
    for name, count in (("updates", 3), ("episodes", 5)):
        table = tables.get(name)
        if table is None or not len(table):
            lines.append(f"{name}: none")
            continue
        columns = [c for c in _SHOWN[name] if c in table.columns] or list(table.columns)[:6]
        lines.append(f"{name} (the last {min(count, len(table))} of {len(table)}):")
        lines.append(table[columns].tail(count).to_string(index=False))
    return lines


def write_failure(
    run_dir: str | Path,
    error: BaseException,
    what: str,
    tables: Mapping[str, pd.DataFrame | None],
    messages: list[str],
) -> Path:
    """Write ``error.txt`` for a run that raised ``error``; return its path.

    Args:
        run_dir: the run directory.
        error: what it raised (its traceback is written whole).
        what: the run in words (``sao seed 0 on my_task``).
        tables: the run's tables as far as it got (``updates``, ``episodes``).
        messages: what the run said (resume notes and the like).
    """
    path = Path(run_dir) / ERROR_FILE
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    text = [
        f"The run {what} failed at {when}: {type(error).__name__}: {error}",
        "",
        "".join(traceback.format_exception(error)).rstrip(),
        "",
        "Its last records:",
        *_records(tables),
    ]
    if messages:
        text += ["", "What it said:", *messages]
    text += [
        "",
        "Everything it wrote before is kept. Running the same command again continues it from "
        "its last checkpoint, or starts it again when it has none or its config or code "
        "changed.",
    ]
    write_text_atomically(path, "\n".join(text) + "\n")
    return path


def failure_summary(run_dir: str | Path) -> str | None:
    """The first line of a failed run's ``error.txt`` (None when there is none)."""
    path = Path(run_dir) / ERROR_FILE
    try:
        first = path.read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    return first


@dataclass(frozen=True)
class Rerun:
    """How a failed run is run again: continued (``resume``) or started over; ``previous`` is
    its ``error.txt``, which :meth:`keep_previous` writes back once the run is open again."""

    resume: bool
    message: str
    previous: str

    def keep_previous(self, run_dir: str | Path) -> None:
        """Keep the earlier failure as ``error.previous.txt``; no ``error.txt`` remains."""
        run_dir = Path(run_dir)
        write_text_atomically(run_dir / PREVIOUS_ERROR_FILE, self.previous)
        (run_dir / ERROR_FILE).unlink(missing_ok=True)


def plan_rerun(run_dir: str | Path, config: dict[str, Any]) -> Rerun:
    """Continue a failed run when its checkpoint and config (code included) are still its own,
    else start it again (nothing is changed here).

    Args:
        run_dir: the failed run's directory.
        config: the config the run would be written with now (``config.yaml``'s content).
    """
    run_dir = Path(run_dir)
    saved = read_config_file(run_dir / "config.yaml")
    now = yaml.safe_load(yaml.safe_dump(config))
    reason = None
    code = code_difference(saved.get("code"), now.get("code"))
    if code is not None:
        reason = f"its code changed: {code}"
    elif {k: v for k, v in saved.items() if k != "code"} != {
        k: v for k, v in now.items() if k != "code"
    }:
        reason = "its config changed"
    elif not checkpoint_folders(run_dir):
        reason = "it had no checkpoint"
    previous = (run_dir / ERROR_FILE).read_text(errors="replace")
    if reason is None:
        return Rerun(
            True,
            f"{run_dir} failed before: continuing it from its last checkpoint (its error is "
            f"kept in {PREVIOUS_ERROR_FILE})",
            previous,
        )
    return Rerun(
        False,
        f"{run_dir} failed before: starting it again ({reason}; its error is kept in "
        f"{PREVIOUS_ERROR_FILE})",
        previous,
    )


def failure_line(error: BaseException, run_dir: str | Path | None) -> str:
    """``"<Type>: <first line>"`` of a run's failure, with where its traceback is kept."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")
    if run_dir is not None and (Path(run_dir) / ERROR_FILE).is_file():
        text += f" (traceback: {Path(run_dir) / ERROR_FILE})"
    return text


def with_tracebacks(failures: list[str]) -> list[str]:
    """``failures`` with each kept traceback appended under its line (``--verbose``)."""
    shown = []
    for line in failures:
        shown.append(line)
        found = re.search(r"\(traceback: (.+)\)$", line)
        if found:
            try:
                text = Path(found.group(1)).read_text(errors="replace")
            except OSError:
                continue
            shown.extend("    " + row for row in text.rstrip().splitlines())
    return shown
