"""Keep where one ``make test`` (or ``make test-all``) spent its time: one row per test, read
from pytest's JUnit report.

Usage (on a quiet machine; the label names the run in the tables):

    python docs/data/test_time/collect.py --label fresh-1 --setting "fresh clone, empty cache" \
        --checkout PATH_OF_THE_CLONE     # runs `make test` there, keeping its JUnit report
    python docs/data/test_time/collect.py --label all-1 --target test-all --setting "..." \
        --checkout PATH_OF_THE_CLONE     # every test (what CI runs)
    python docs/data/test_time/collect.py --label mine --setting "..." \
        --report tests.xml --commit HASH  # a report of a `make test PYTEST_ARGS=--junitxml=...`
    python docs/data/test_time/table.py

Each test's seconds are its setup, call and teardown together (what pytest reports per test);
a module-scoped fixture's setup counts in the test that built it. The run's wall seconds are
pytest's own (the report's ``time``), so the set-up ``make`` does before pytest starts is not
in them. Rows go to ``tests.csv`` (column ``run``: the label), the run's record to
``runs.json``: the commit and whether tracked files differed from it when the run started, the
make target, the machine, the number of workers and the totals. Collecting a label again
replaces that run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from sao_online.rundir.provenance import machine, package_versions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TESTS, RUNS = HERE / "tests.csv", HERE / "runs.json"


def module_of(classname: str, checkout: Path) -> str:
    """``tests.bench.test_x`` (or ``tests.bench.test_x.TestClass``) -> ``tests/bench/test_x.py``."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (checkout / path).is_file():
            return path
    raise SystemExit(f"collect.py: no test module in {checkout} for JUnit class {classname!r}")


def read_report(report: Path, checkout: Path) -> tuple[pd.DataFrame, dict]:
    """(one row per test, the run's totals) from a JUnit XML report of pytest."""
    root = ET.parse(report).getroot()
    [suite] = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    rows = []
    for case in suite.iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
        rows.append(
            {
                "module": module_of(case.get("classname", ""), checkout),
                # pytest-xdist appends "@<group>" to grouped tests: not part of the test's name
                "test": case.get("name", "").split("@")[0],
                "outcome": outcome,
                "seconds": round(float(case.get("time", 0.0)), 3),
            }
        )
    totals = {
        "wall_seconds": round(float(suite.get("time", 0.0)), 1),
        "tests": len(rows),
        "failures": int(suite.get("failures", 0)),
        "errors": int(suite.get("errors", 0)),
        "skipped": int(suite.get("skipped", 0)),
    }
    return pd.DataFrame(rows), totals


def git(checkout: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"collect.py: git {' '.join(args)} in {checkout}: {result.stderr.strip()}")
    return result.stdout.strip()


#: The make targets that run tests: the fast tier and every test.
TARGETS = ("test", "test-all")


def run_make_test(checkout: Path, report: Path, target: str = "test") -> None:
    """``make TARGET`` in ``checkout`` with its JUnit report at ``report``; exit if it failed."""
    command = ["make", target, f"PYTEST_ARGS=--junitxml={report}"]
    if subprocess.run(command, cwd=checkout).returncode:
        raise SystemExit(f"collect.py: `{' '.join(command)}` failed in {checkout}: nothing kept")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="the run's name in the tables")
    parser.add_argument("--setting", required=True, help="how it ran, in words")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (-n)")
    parser.add_argument("--target", choices=TARGETS, default="test", help="the make target run")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout that runs it")
    parser.add_argument("--report", type=Path, help="an existing report (default: run make test)")
    parser.add_argument("--commit", help="the commit an existing report ran (with --report)")
    args = parser.parse_args(argv)
    if args.report is not None:
        if not args.report.is_file():
            raise SystemExit(f"collect.py: no report {args.report}")
        if not args.commit:
            raise SystemExit("collect.py: --report needs --commit, the commit that ran it")
        commit, dirty = git(args.checkout, "rev-parse", args.commit), False
        report = args.report
    else:
        commit = git(args.checkout, "rev-parse", "HEAD")
        dirty = bool(git(args.checkout, "status", "--porcelain", "--untracked-files=no"))
        report = Path(tempfile.mkdtemp()) / "tests.xml"
        run_make_test(args.checkout, report, args.target)
    tests, totals = read_report(report, args.checkout)
    tests.insert(0, "run", args.label)
    record = {
        "label": args.label,
        "setting": args.setting,
        "workers": args.workers,
        "target": args.target,
        "commit": commit,
        "dirty": dirty,
        **totals,
        "machine": machine(),
        "packages": {k: v for k, v in package_versions().items() if k in ("torch", "pytest")},
    }
    kept = pd.read_csv(TESTS) if TESTS.is_file() else tests.iloc[:0]
    pd.concat([kept[kept["run"] != args.label], tests]).to_csv(TESTS, index=False)
    runs = json.loads(RUNS.read_text()) if RUNS.is_file() else []
    runs = [run for run in runs if run["label"] != args.label]
    RUNS.write_text(json.dumps([*runs, record], indent=2) + "\n")
    print(f"{args.label}: {len(tests)} tests in {totals['wall_seconds']} s, kept in {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
