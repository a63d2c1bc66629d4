"""Kept results come from committed code: the rule and what a scorecard says about it.

A result written into the repository's ``benchmarks/`` folder is kept: the README and the docs
are generated from it. Its provenance names the commit that produced it, which says nothing when
the tree had uncommitted changes. So the benchmark refuses to write there from a dirty tree
unless told (``--allow-dirty``), and every scorecard names, in its first lines, what its runs do
not share: runs from a dirty tree, several commits, several versions of one dependency.

Example:
    >>> records = {"a": {"commit": "1" * 40, "dirty": True, "packages": {"torch": "2.1"}},
    ...            "b": {"commit": "1" * 40, "dirty": False, "packages": {"torch": "2.2"}}}
    >>> runs = pd.DataFrame({"provenance_id": ["a", "b"]})
    >>> for note in provenance_notes(runs, {"provenance": records}):
    ...     print(note)
    1 of 2 runs ran from a tree with uncommitted changes: their code is not the commit they name.
    Mixed versions of a dependency: torch 2.1 (1 run), 2.2 (1 run).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.config import ConfigError
from sao_online.rundir.provenance import checkout_root, source_state

#: The folder of a checkout that holds the kept results.
KEPT_FOLDER = "benchmarks"


def kept_folder() -> Path | None:
    """The ``benchmarks/`` folder of the checkout this code runs from (None: not a checkout)."""
    root = checkout_root()
    return None if root is None else root / KEPT_FOLDER


def writes_kept_results(out: str | Path) -> bool:
    """Whether ``out`` lies inside the checkout's ``benchmarks/`` folder."""
    folder = kept_folder()
    if folder is None:
        return False
    return Path(out).resolve().is_relative_to(folder.resolve())


def check_clean_tree(out: str | Path, *, allow_dirty: bool, option: str = "--out") -> bool:
    """Refuse to keep results in ``benchmarks/`` from code with uncommitted changes.

    Returns:
        Whether results are written there from a dirty tree (allowed by ``allow_dirty``): the
        session records it and the scorecard says so in its first lines.

    Raises:
        ConfigError: ``out`` is inside ``benchmarks/``, tracked files differ from the commit,
            and ``allow_dirty`` is not set.
    """
    if not writes_kept_results(out):
        return False
    state = source_state()
    if not state["dirty"]:
        return False
    if allow_dirty:
        return True
    raise ConfigError(
        f"{option}: {out} is inside {KEPT_FOLDER}/, where results are kept, and the tree has "
        f"uncommitted changes (commit {str(state['commit'])[:12]}; `git status` names them): a "
        "kept result names the commit that produced it. Commit them first, or pass "
        "--allow-dirty (the scorecard then says so in its first lines)"
    )


def check_pooled_runs(
    out: str | Path, runs: pd.DataFrame, records: dict[str, Any], *, allow_dirty: bool
) -> bool:
    """:func:`check_clean_tree` for results pooled into ``out`` (``merge``): the code that pools
    them, and every run pooled (its provenance record in ``records``), must be committed.

    Returns:
        Whether something dirty is written into ``benchmarks/`` (allowed by ``allow_dirty``).

    Raises:
        ConfigError: dirty runs pooled into ``benchmarks/`` without ``allow_dirty`` (counted).
    """
    if check_clean_tree(out, allow_dirty=allow_dirty):
        return True
    if not writes_kept_results(out):
        return False
    dirty = sum(1 for ident in runs["provenance_id"] if records.get(ident, {}).get("dirty"))
    if not dirty:
        return False
    if allow_dirty:
        return True
    raise ConfigError(
        f"--out: {out} is inside {KEPT_FOLDER}/, where results are kept, and {dirty} of the "
        f"{len(runs)} runs pooled ran from a tree with uncommitted changes; run them again from "
        "a commit, or pass --allow-dirty (the scorecard then says so in its first lines)"
    )


def _listed(counts: list[tuple[str, int]]) -> str:
    return ", ".join(f"{value} ({count} run{'s' * (count != 1)})" for value, count in counts)


def provenance_notes(runs: pd.DataFrame, benchmark: dict[str, Any]) -> list[str]:
    """The scorecard's first lines: what the runs' provenance records do not share.

    One line each, when it happens: runs from a tree with uncommitted changes (and whether a
    session wrote them with ``--allow-dirty``), runs from several commits, and every
    distribution of which the runs used several versions.
    """
    records = benchmark.get("provenance", {})
    used = [records.get(ident, {}) for ident in runs["provenance_id"]]
    notes = []
    dirty = sum(1 for record in used if record.get("dirty"))
    if dirty:
        allowed = benchmark.get("allow_dirty") or any(
            session.get("allow_dirty") for session in benchmark.get("sessions", [])
        )
        notes.append(
            f"{dirty} of {len(used)} runs ran from a tree with uncommitted changes: their code "
            "is not the commit they name" + (" (written with --allow-dirty)." if allowed else ".")
        )
    commits = Counter(str(record.get("commit"))[:12] for record in used).most_common()
    if len(commits) > 1:
        notes.append(f"The runs come from {len(commits)} commits: {_listed(commits)}.")
    versions: dict[str, Counter] = {}
    for record in used:
        for name, version in (record.get("packages") or {}).items():
            versions.setdefault(name, Counter())[str(version)] += 1
    mixed = [
        f"{name} {_listed(sorted(counter.items()))}"
        for name, counter in sorted(versions.items())
        if len(counter) > 1
    ]
    if mixed:
        notes.append("Mixed versions of a dependency: " + "; ".join(mixed) + ".")
    return notes
