"""Render the tables of ``docs/families/*.md`` from the measurements in ``docs/families/data/``.

A table sits between ``<!-- table: NAME -->`` and ``<!-- /table -->`` in a page; this script
rewrites what is between them. ``--check`` changes nothing and exits 1 when a page's table
differs from what its data gives (the test suite runs it).

    python docs/families/tables.py          # rewrite the tables
    python docs/families/tables.py --check  # are they up to date?
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
MARKER = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def read_rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def grid_attempts() -> str:
    """Every GridShift warm start measured, in the order it was measured."""
    rows = []
    for row in read_rows("grid_shift_warm_starts.jsonl"):
        reach = row["reach_by_distance"]
        rows.append(
            [
                row["label"],
                row["code"] + ("".join(f" +{v}" for v in row["variant"])),
                row["theta"]["moves"],
                str(row["sft_steps"]),
                f"{row['loss_last']:.2f}",
                f"{row['reward_mean']:.2f}",
                f"{row['reached']:.2f}",
                " / ".join(f"{reach[d]:.2f}" for d in sorted(reach, key=int)),
                f"{row['moves_closer']:.2f}",
                f"{row['tokens_mean']:.0f}",
            ]
        )
    header = [
        "attempt",
        "env",
        "sampled under",
        "SFT steps",
        "SFT loss",
        "reward",
        "reached",
        "reached from distance 1 / 2 / ... / 7",
        "moves closer",
        "tokens / episode",
    ]
    return markdown(header, rows)


def calibration() -> str:
    """Per family: the warm start and the oracle in each regime, and the short runs."""
    rows = []
    for row in read_rows("calibration.jsonl"):
        for regime in row["regimes"]:
            runs = []
            for run in row["runs"]:
                phase = run["phases"][regime["phase"]]
                score = phase["normalized"]
                runs.append(
                    f"{run['method']} {phase['mean_reward']:.2f}"
                    + ("" if score is None else f" ({score:+.2f})")
                )
            theta = ", ".join(f"{k}={v}" for k, v in regime["theta"].items())
            rows.append(
                [
                    row["family"],
                    f"{regime['phase']}: {theta}",
                    f"{regime['start']:.0f}-{regime['end']:.0f}",
                    f"{regime['warm_start_reward']:.2f}",
                    f"{regime['oracle_reward']:.2f}",
                    "; ".join(runs) or "-",
                ]
            )
    header = [
        "family",
        "phase: regime",
        "episodes",
        "warm start",
        "oracle",
        "mean reward of each run (normalized score)",
    ]
    return markdown(header, rows)


@cache
def test_source(module: str) -> str:
    return (HERE.parent.parent / "tests" / "learning" / f"{module}.py").read_text()


def current_margin(module: str) -> float:
    """The margin the test module asserts today (its ``MARGIN``), not the one a row recorded."""
    found = re.search(r"^MARGIN = ([0-9.]+)$", test_source(module), re.M)
    if found is None:
        raise SystemExit(f"tests/learning/{module}.py: no MARGIN = <number> line")
    return float(found[1])


@cache
def current_setting(module: str) -> dict:
    """The test module's ``SETTING`` today, read without importing the module (a literal)."""
    for node in ast.parse(test_source(module)).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["SETTING"]:
            return ast.literal_eval(node.value)
    raise SystemExit(f"tests/learning/{module}.py: no SETTING = {{...}} literal")


def cpu_or_cached(seconds: float) -> str:
    """A warm start read from the cache took no training: say so rather than print 0."""
    return "cached" if seconds < 1 else f"{seconds:.0f}"


def seconds_or_dash(rows: list[dict], name: str) -> str:
    """Mean of a seconds field over rows; rows measured before it was recorded give "-"."""
    if any(name not in row for row in rows):
        return "-"
    return f"{sum(row[name] for row in rows) / len(rows):.0f}"


def learning_groups(current: bool) -> dict[tuple[str, ...], list[dict]]:
    """The learning-test rows measured with the module's current ``SETTING`` (or with another).

    Grouped by module, method, CPU and setting, in the order the rows were written. Runs at
    one seed take different paths on different CPUs (sampling turns floating-point
    differences into different tokens), so each CPU gets its rows; rows from before the CPU
    was recorded say so.
    """
    grouped: dict[tuple[str, ...], list[dict]] = {}
    for row in read_rows("learning_tests.jsonl"):
        module = row["module"]
        if (row["setting"] == current_setting(module)) != current:
            continue
        setting = json.dumps(row["setting"], sort_keys=True)
        key = (module, row["method"], row.get("cpu_model", "not recorded"), setting)
        grouped.setdefault(key, []).append(row)
    return grouped


def rises(mine: list[dict]) -> tuple[list[dict], list[dict]]:
    """A group's learning runs by seed, and its runs with learning off."""
    on = sorted(
        (row for row in mine if row["learning_rate_override"] is None), key=lambda row: row["seed"]
    )
    off = [row for row in mine if row["learning_rate_override"] is not None]
    return on, off


def learning_off(off: list[dict]) -> str:
    return ", ".join(f"{row['rise']:+.2f} (lr {row['learning_rate_override']})" for row in off)


#: The columns both learning-test tables show: what a setting measured, and what it cost.
RESULT_HEADER = ["warm start's reward", "rise per seed (0, 1, 2)", "rise with learning off"]
COST_HEADER = ["warm start CPU s", "warm start wall s", "CPU s per run", "wall s per run"]


def result_cells(on: list[dict], off: list[dict]) -> list[str]:
    return [
        f"{on[0]['before']:.2f}",
        ", ".join(f"{row['rise']:+.2f}" for row in on),
        learning_off(off) or "-",
    ]


def cost_cells(on: list[dict]) -> list[str]:
    return [
        cpu_or_cached(on[0]["warm_start_cpu_seconds"]),
        seconds_or_dash(on[:1], "warm_start_wall_seconds"),
        seconds_or_dash(on, "run_cpu_seconds"),
        seconds_or_dash(on, "run_wall_seconds"),
    ]


def learning_tests() -> str:
    """Per learning test, method and CPU: the rise per seed, with learning off, the margin.

    Only rows measured with the module's current ``SETTING``: a row of another setting says
    nothing about the test as it stands (see :func:`learning_tests_earlier`).
    """
    table = []
    for (module, method, cpu, _), mine in learning_groups(current=True).items():
        on, off = rises(mine)
        margin = current_margin(module)
        passes = (
            min(row["rise"] for row in on)
            >= margin
            > max([row["rise"] for row in off], default=float("-inf"))
        )
        table.append(
            [
                f"`{module}`",
                method,
                cpu,
                *result_cells(on, off),
                f"{margin:.2f}",
                "yes" if passes else "no",
                *cost_cells(on),
            ]
        )
    header = [
        "test module",
        "method",
        "CPU",
        *RESULT_HEADER,
        "margin asserted",
        "every seed passes, learning off fails",
        *COST_HEADER,
    ]
    return markdown(header, table)


def setting_change(earlier: dict, now: dict) -> str:
    """What an earlier ``SETTING`` had where today's differs, e.g. ``sft_steps 800``."""

    def shown(value) -> str:
        return " ".join(map(str, value)) if isinstance(value, list) else str(value)

    keys = [key for key in {**now, **earlier} if earlier.get(key) != now.get(key)]
    return "; ".join(f"{key} {shown(earlier.get(key, '(unset)'))}" for key in keys)


def learning_tests_earlier() -> str:
    """The learning-test rows of settings a module no longer has: the history of its calibration."""
    table = []
    for (module, method, cpu, setting), mine in learning_groups(current=False).items():
        on, off = rises(mine)
        change = setting_change(json.loads(setting), current_setting(module))
        table.append([f"`{module}`", method, cpu, change, *result_cells(on, off), *cost_cells(on)])
    header = [
        "test module",
        "method",
        "CPU",
        "setting then (where it differs from today's)",
        *RESULT_HEADER,
        *COST_HEADER,
    ]
    return markdown(header, table)


TABLES: dict[str, Callable[[], str]] = {
    "grid-shift-attempts": grid_attempts,
    "calibration": calibration,
    "learning-tests": learning_tests,
    "learning-tests-earlier": learning_tests_earlier,
}


def render(text: str) -> str:
    def replace(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise SystemExit(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        return match.group(1) + TABLES[name]() + match.group(4)

    return MARKER.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    args = parser.parse_args(argv)
    stale = []
    for page in sorted(HERE.glob("*.md")):
        text = page.read_text()
        rendered = render(text)
        if rendered != text:
            stale.append(page.name)
            if not args.check:
                page.write_text(rendered)
    if args.check and stale:
        print(f"stale tables in {', '.join(stale)}: run python docs/families/tables.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
