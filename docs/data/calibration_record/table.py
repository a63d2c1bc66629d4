"""The calibration record: the table that leads ``docs/calibration.md`` and the index
``benchmarks/calibration/README.md``, generated from ``probes.yaml`` and the folders' kept data
(never typed).

Usage: python table.py          # rewrites both

``probes.yaml`` says, per folder of ``benchmarks/calibration/``, what was tried there, each
task's setting in words and the folder's status (canonical, superseded, probe). Everything else
comes from the data and the pages: each task's outcome is the two calibration checks
(:func:`sao_online.benchmark.calibration.checks`) on the folder's own runs, the runs that are
also kept lite results are found by comparing run records with ``benchmarks/lite/``, and the
sections that use a folder are the headings of ``docs/benchmark.md`` and ``docs/calibration.md``
under which its path appears.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

import pandas as pd
import yaml

from sao_online.benchmark.calibration import LEARNABLE, checks
from sao_online.benchmark.scorecard import read_tables
from sao_online.benchmark.scores import normalized_scores

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from marked_table import markdown, replace_marked  # noqa: E402  (docs/data is not a package)

DOCS = HERE.parents[1]
ROOT = DOCS.parent
CALIBRATION = ROOT / "benchmarks" / "calibration"
LITE = ROOT / "benchmarks" / "lite"
PAGE = DOCS / "calibration.md"
#: The pages whose sections may use a calibration folder, the results page first.
PAGES = (DOCS / "benchmark.md", PAGE)
INDEX = CALIBRATION / "README.md"
OPEN, END = "<!-- calibration-record table -->\n", "<!-- end calibration-record table -->"
STATUSES = ("canonical", "superseded", "probe")
FAMILIES = ("CodeShift", "GridShift", "ReasonShift", "StyleShift", "ToolShift")
#: What makes two run records the same run: its task, method, seed and config, and what it did.
RUN_KEY = ["task", "method", "seed", "config_hash", "action_tokens"]


def load_record(path: Path = HERE / "probes.yaml") -> list[dict]:
    """The entries of ``probes.yaml``, each checked for its fields and status."""
    entries = yaml.safe_load(path.read_text())
    for entry in entries:
        missing = {"folder", "status", "tried", "tasks"} - set(entry)
        if missing:
            raise SystemExit(f"{path}: {entry.get('folder', '?')}: no {', '.join(sorted(missing))}")
        if entry["status"] not in STATUSES:
            raise SystemExit(
                f"{path}: {entry['folder']}: status {entry['status']!r} is none of "
                f"{', '.join(STATUSES)}"
            )
    return entries


def slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's ``toc`` slugify)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def sections_using(folder: str, pages: tuple[Path, ...] = PAGES) -> list[tuple[Path, str]]:
    """(page, heading) of every section whose text names ``benchmarks/calibration/<folder>``
    (in a table block's data or in prose), in page order; code blocks are not headings."""
    named = re.compile(r"calibration/" + re.escape(folder) + r"(?![\w-])")
    found: list[tuple[Path, str]] = []
    for page in pages:
        heading, fenced = None, False
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"#{1,6} ", line):
                heading = line.lstrip("#").strip()
            if heading and named.search(line) and (page, heading) not in found:
                found.append((page, heading))
    return found


def _outcome(check: pd.Series, seeds: int) -> str:
    best = check["best score (phase)"]
    learnable = "learnable" if check["learnable"] == "yes" else "not learnable"
    method_score = re.match(r"(\S+) (\S+)", best)
    learnable += f" ({method_score[1]} {method_score[2]})" if method_score else f" ({best})"
    shortfall = re.search(r"\(([+-][\d.]+);", check["frozen shortfall: phase 0 -> 1"])
    cost = "the shift costs" if check["shift costs"] == "yes" else "the shift costs too little"
    cost += f" ({shortfall[1]})" if shortfall else ""
    return f"{learnable}, {cost}; {seeds} seed{'s' if seeds != 1 else ''}"


def folder_checks(folder: Path) -> dict[str, str]:
    """Per task of a kept benchmark folder: its calibration outcome in words."""
    tables, benchmark = read_tables(folder / "results")
    settings = benchmark["protocol"]["score"]
    scores = normalized_scores(
        tables["phases"],
        tables["runs"],
        floor_method=settings["floor"],
        min_gap=settings["min_gap"],
    )
    seeds = tables["runs"].groupby("task")["seed"].nunique()
    frame = checks(scores, settings["floor"])
    return {row["task"]: _outcome(row, int(seeds[row["task"]])) for _, row in frame.iterrows()}


def lite_runs() -> set[tuple]:
    """The run records of the lite tier's kept results (both seed sets)."""
    runs = pd.concat(pd.read_csv(path) for path in sorted(LITE.glob("seeds-*-*/results/runs.csv")))
    return set(map(tuple, runs[RUN_KEY].itertuples(index=False)))


def kept_tasks(folder: Path, kept: set[tuple]) -> tuple[list[str], bool]:
    """(the tasks with runs among the kept lite results, whether every run of it is one)."""
    runs = pd.read_csv(folder / "results" / "runs.csv")
    inside = [tuple(row) in kept for row in runs[RUN_KEY].itertuples(index=False)]
    return sorted(set(runs.loc[inside, "task"])), all(inside)


def family_of(task: str) -> str:
    """The family a probe's task belongs to: ``ToolShift-h128`` -> ``ToolShift``."""
    for family in FAMILIES:
        if task == family or task.startswith(f"{family}-"):
            return family
    raise SystemExit(f"{CALIBRATION}: task {task!r} is a variant of none of {', '.join(FAMILIES)}")


def _link(page: Path, heading: str, source: Path) -> str:
    relative = Path(*([".."] * (len(source.parent.relative_to(ROOT).parts)))) / page.relative_to(
        ROOT
    )
    target = "" if page == source else relative.as_posix()
    return f"[{heading}]({target}#{slug(heading)})"


def record_table(entries: list[dict]) -> str:
    """The page's lead table: one row per task of every folder, grouped by family."""
    rows = []
    for order, entry in enumerate(entries):
        folder = CALIBRATION / entry["folder"]
        outcomes = folder_checks(folder)
        families = {task: family_of(task) for task in outcomes}
        sections = [heading for page, heading in sections_using(entry["folder"]) if page == PAGE]
        if not sections:
            raise SystemExit(f"{PAGE}: no section names benchmarks/calibration/{entry['folder']}")
        if set(entry["tasks"]) != set(outcomes):
            raise SystemExit(
                f"probes.yaml: {entry['folder']}: tasks {sorted(entry['tasks'])}, but its runs "
                f"hold {sorted(outcomes)}"
            )
        for task, setting in entry["tasks"].items():
            name = "" if task == families[task] else f"`{task}`: "
            rows.append(
                {
                    "family": families[task],
                    "order": order,
                    "setting": name + setting,
                    "what was tried": entry["tried"],
                    "outcome": outcomes[task],
                    "folder": f"[{entry['folder']}](#{slug(sections[0])})",
                }
            )
    frame = pd.DataFrame(rows).sort_values(["family", "order"], kind="stable")
    return markdown(frame.drop(columns="order"))


def index(entries: list[dict]) -> str:
    """``benchmarks/calibration/README.md``: every folder, its status and where it is used."""
    kept = lite_runs()
    rows = []
    for entry in sorted(entries, key=lambda entry: entry["folder"]):
        folder = CALIBRATION / entry["folder"]
        tasks, _ = kept_tasks(folder, kept)
        used = [_link(page, heading, INDEX) for page, heading in sections_using(entry["folder"])]
        rows.append(
            {
                "folder": f"[{entry['folder']}]({entry['folder']}/scorecard.md)",
                "status": entry["status"],
                "what was tried": entry["tried"],
                "runs kept as lite results": ", ".join(tasks) or "—",
                "used in": "; ".join(used),
            }
        )
    return (
        "# Calibration runs\n\n"
        "Every folder here is one benchmark kept with its data (`results/`), its scorecard and,\n"
        "where it ran a suite of its own, that `suite.yaml`: run it again with\n"
        "`sao-online benchmark --suite benchmarks/calibration/NAME/suite.yaml --tier lite`.\n"
        "What each one tried, and what came of it, is told on the\n"
        "[calibration page](../../docs/calibration.md); the lite tier's results are on\n"
        "[the benchmark page](../../docs/benchmark.md#the-lite-tiers-results).\n\n"
        "Status: **canonical**, its runs are runs of the lite tier's kept results\n"
        "(`benchmarks/lite/`); **superseded**, the tier's own tasks at settings it has since\n"
        "left (some of its runs may still be kept results, named in the table); **probe**, a\n"
        f"setting tried on the way (learnable means a mean first-phase score of {LEARNABLE} or\n"
        "more, as the calibration checks define it).\n\n"
        "This file is generated by `python docs/data/calibration_record/table.py` from\n"
        "`docs/data/calibration_record/probes.yaml` and the folders' data.\n\n"
        + markdown(pd.DataFrame(rows))
    )


def render(page: str, entries: list[dict]) -> tuple[str, str]:
    """(the calibration page with its record table regenerated, the index's text)."""
    return replace_marked(page, PAGE, OPEN, END, record_table(entries)), index(entries)


def main() -> int:
    page = PAGE.read_text()
    updated, readme = render(page, load_record())
    if updated != page:
        PAGE.write_text(updated)
    if not INDEX.is_file() or INDEX.read_text() != readme:
        INDEX.write_text(readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
