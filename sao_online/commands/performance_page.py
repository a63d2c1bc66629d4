"""The tables of ``docs/performance.md`` and its appendix, generated from the kept results.

Each file ``docs/performance/<name>.json`` holds one benchmark run: the ``command`` that produced
it, the machine's ``load`` at the time (in words), and the benchmark's own JSON output under
``result`` (results kept by :mod:`.performance_keep` also hold their ``provenance`` and the
load as numbers). A kept result that a newer one replaced lives on under
``docs/performance/history/``, rendered on the appendix page. Each table of a page sits
between the markers ``<!-- table: NAME -->`` and ``<!-- end table -->``; this module renders
them from the files and rewrites them in place, so a number on a page always comes from a kept
file:

    python -m sao_online.commands.performance_page            # rewrite the pages' tables
    python -m sao_online.commands.performance_page --check    # exit 1 if a table is stale
    python -m sao_online.commands.performance_page --measure throughput   # run, keep, rewrite

``--measure NAME`` runs the benchmark behind table NAME on this machine now, keeps its result
(refusing a dirty tree, and a busy machine unless ``--busy-ok``) and rewrites the pages.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sao_online.commands.performance_tables import (
    async_table,
    learner_table,
    rollout_table,
    simulated_table,
    throughput_runs_table,
    throughput_table,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "performance.md"
HISTORY_PAGE = DOCS / "performance_history.md"
PAGES = (PAGE, HISTORY_PAGE)
DATA = DOCS / "performance"
_BLOCK = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)

#: Table name -> (kept file under ``docs/performance/``, without ``.json``; its renderer).
TABLES: dict[str, tuple[str, Callable[[Any], str]]] = {
    "learner": ("bench_learner", learner_table),
    "rollout": ("bench_rollout", rollout_table),
    "rollout-smollm2": ("bench_rollout_smollm2", rollout_table),
    "throughput": ("bench_throughput_trl", throughput_table),
    "async": ("bench_async", async_table),
    "simulated": ("bench_simulated", simulated_table),
    "throughput-gpu-defaults": ("history/bench_throughput_trl-1", throughput_runs_table),
}
#: Tables whose renderer says in words that nothing is kept yet (it gets None).
MAY_BE_MISSING = {"throughput", "simulated"}


def _load(name: str, data: Path, may_be_missing: bool = False) -> dict[str, Any] | None:
    path = data / f"{name}.json"
    if not path.is_file():
        if may_be_missing:
            return None
        raise ValueError(f"performance page: no kept result {path}")
    return json.loads(path.read_text())


def render(page: str, data: Path = DATA) -> str:
    """``page`` with every table block rendered from its kept result.

    Raises:
        ValueError: a block names an unknown table, or its result file is missing.
    """

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in TABLES:
            raise ValueError(f"performance page: unknown table {name!r}; known: {sorted(TABLES)}")
        file_name, renderer = TABLES[name]
        kept = _load(file_name, data, may_be_missing=name in MAY_BE_MISSING)
        return match.group(1) + renderer(kept) + match.group(4)

    return _BLOCK.sub(fill, page)


def _measure(table: str, busy_ok: bool) -> None:
    from sao_online.commands.performance_keep import keep_result

    if table not in TABLES:
        raise SystemExit(f"performance page: unknown table {table!r}; known: {sorted(TABLES)}")
    path = keep_result(TABLES[table][0], DATA, busy_ok=busy_ok)
    print(f"kept {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    parser.add_argument(
        "--measure",
        metavar="TABLE",
        help="run the benchmark behind TABLE (throughput, learner, rollout, simulated) now, keep "
        "its result "
        "and rewrite the pages",
    )
    parser.add_argument(
        "--busy-ok",
        action="store_true",
        help="with --measure: keep a result measured on a busy machine (its load is kept)",
    )
    args = parser.parse_args(argv)
    if args.measure:
        from sao_online.commands.performance_keep import KeepError

        try:
            _measure(args.measure, args.busy_ok)
        except KeepError as error:
            print(error, file=sys.stderr)
            return 2
    stale = []
    for page in PAGES:
        current = page.read_text()
        rendered = render(current)
        if rendered == current:
            continue
        if args.check:
            stale.append(page)
        else:
            page.write_text(rendered)
    for page in stale:
        print(f"{page}: tables differ from the kept results; regenerate them", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
