"""The test-time tables of ``docs/guides/development.md``, generated from ``tests.csv`` and
``runs.json`` (written by ``collect.py``; never typed).

Usage: python table.py          # rewrites the tables between the page's markers

Three tables: one row per kept run of ``make test`` or ``make test-all`` (what it ran, wall
seconds, worker seconds, tests); the worker seconds of each folder of ``tests/`` per run; the
ten costliest modules of the last run. Under them, each run's worker seconds per worker
against the target of the fast tier: no schedule of the workers finishes a run sooner.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from marked_table import markdown, replace_marked  # noqa: E402

PAGE = HERE.parents[1] / "guides" / "development.md"
OPENING, END = "<!-- test-time tables -->\n", "<!-- end test-time tables -->"
#: The target of `make test`'s wall seconds on a fresh clone of a 2-core machine.
TARGET_SECONDS = 240
#: What a run's make target ran; runs kept before the two tiers ran every test with `make test`.
RAN = {"test": "make test (fast tier)", "test-all": "make test-all (every test)"}
BEFORE_TIERS = "every test (make test before the tiers)"
TOP_MODULES = 10


def _area(module: str) -> str:
    """``tests/learning/test_x.py`` -> ``tests/learning/``; a top-level module stays itself."""
    parts = module.split("/")
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else module


def runs_table(tests: pd.DataFrame, runs: list[dict]) -> str:
    rows = []
    for run in runs:
        mine = tests[tests["run"] == run["label"]]
        rows.append(
            [
                run["label"],
                RAN.get(run.get("target"), BEFORE_TIERS),
                run["setting"],
                run["machine"]["cpu_model"],
                run["workers"],
                f"{run['wall_seconds']:.0f}",
                f"{mine['seconds'].sum():.0f}",
                f"{mine['seconds'].sum() / run['workers'] / run['wall_seconds']:.0%}",
                (mine["outcome"] == "passed").sum(),
                (mine["outcome"] == "skipped").sum(),
                (mine["outcome"].isin(["failed", "error"])).sum(),
            ]
        )
    header = [
        "run",
        "ran",
        "setting",
        "CPU",
        "workers",
        "wall s",
        "worker s",
        "workers busy",
        "passed",
        "skipped",
        "failed",
    ]
    return markdown(pd.DataFrame(rows, columns=header))


def areas_table(tests: pd.DataFrame, runs: list[dict]) -> str:
    labels = [run["label"] for run in runs]
    seconds = (
        tests.assign(area=tests["module"].map(_area))
        .pivot_table(index="area", columns="run", values="seconds", aggfunc="sum", fill_value=0)
        .reindex(columns=labels, fill_value=0)
    )
    seconds = seconds.sort_values(labels[-1], ascending=False)
    last = seconds[labels[-1]]
    rows = [
        [f"`{area}`", *(f"{row[label]:.0f}" for label in labels), f"{last[area] / last.sum():.0%}"]
        for area, row in seconds.iterrows()
    ]
    header = ["tests", *(f"worker s ({label})" for label in labels), f"share ({labels[-1]})"]
    return markdown(pd.DataFrame(rows, columns=header))


def modules_table(tests: pd.DataFrame, runs: list[dict]) -> str:
    label = runs[-1]["label"]
    mine = tests[tests["run"] == label]
    per_module = mine.groupby("module")["seconds"].agg(["sum", "count", "max"])
    per_module = per_module.sort_values("sum", ascending=False).head(TOP_MODULES)
    total = mine["seconds"].sum()
    rows = [
        [
            f"`{module}`",
            int(row["count"]),
            f"{row['sum']:.0f}",
            f"{row['max']:.0f}",
            f"{row['sum'] / total:.0%}",
        ]
        for module, row in per_module.iterrows()
    ]
    header = ["module", "tests", "worker s", "longest test s", "share of the run"]
    return markdown(pd.DataFrame(rows, columns=header))


def floor_sentence(tests: pd.DataFrame, runs: list[dict]) -> str:
    """Each run's worker seconds over its workers (the least wall time any schedule of the
    workers could take), against the fast tier's target."""
    parts = []
    for run in runs:
        seconds = tests.loc[tests["run"] == run["label"], "seconds"].sum()
        parts.append(
            f"{run['label']} {seconds / run['workers']:.0f} s ({seconds:.0f} worker seconds on "
            f"{run['workers']} workers; {run['wall_seconds']:.0f} s measured)"
        )
    return (
        "The least wall time each run's tests allow, their worker seconds shared evenly by the "
        f"workers: {'; '.join(parts)}. The fast tier's target: {TARGET_SECONDS} s of wall time "
        "on a fresh clone of a 2-core machine.\n"
    )


def render(page: str, tests: pd.DataFrame, runs: list[dict]) -> str:
    if not runs:
        raise SystemExit(f"{HERE / 'runs.json'}: no kept run")
    tables = "\n".join(
        [
            runs_table(tests, runs),
            areas_table(tests, runs),
            f"The {TOP_MODULES} costliest modules of {runs[-1]['label']}:\n",
            modules_table(tests, runs),
            floor_sentence(tests, runs),
        ]
    )
    return replace_marked(page, PAGE, OPENING, END, tables)


def load() -> tuple[pd.DataFrame, list[dict]]:
    return pd.read_csv(HERE / "tests.csv"), json.loads((HERE / "runs.json").read_text())


def main() -> int:
    page = PAGE.read_text()
    updated = render(page, *load())
    if updated != page:
        PAGE.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
