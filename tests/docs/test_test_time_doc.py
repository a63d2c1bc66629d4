"""docs/guides/development.md, "The test suite's time": its tables come from the kept runs of
``make test``, and those runs are what their JUnit reports said."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
from docs_scripts import ROOT, docs_script

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="12.5">
<testcase classname="tests.learning.test_code_shift_learns"
    name="test_reward_rises[sao]@learning-code-shift" time="7.25"/>
<testcase classname="tests.runtime.test_guardrails.TestCaps" name="test_cap" time="0.5">
  <failure message="assert 1 == 2"/></testcase>
<testcase classname="tests.test_api" name="test_example" time="2.0">
  <skipped message="needs Docker"/></testcase>
<testcase classname="tests.test_api" name="test_other" time="1.0"/>
</testsuite></testsuites>
"""


def test_the_page_tables_are_generated_from_the_kept_runs():
    table = docs_script("data/test_time/table")
    page = table.PAGE.read_text()
    assert table.render(page, *table.load()) == page, "run docs/data/test_time/table.py"


def test_each_kept_run_holds_every_test_of_its_report_and_a_commit_of_this_repository():
    tests, runs = docs_script("data/test_time/table").load()
    assert [run["label"] for run in runs] == list(dict.fromkeys(tests["run"]))
    for run in runs:
        mine = tests[tests["run"] == run["label"]]
        assert len(mine) == run["tests"]
        assert (mine["outcome"] == "skipped").sum() == run["skipped"]
        assert (mine["outcome"] == "failed").sum() == run["failures"]
        assert (mine["seconds"] >= 0).all() and mine["seconds"].sum() > 0
        known = subprocess.run(
            ["git", "cat-file", "-e", f"{run['commit']}^{{commit}}"], cwd=ROOT, capture_output=True
        )
        assert known.returncode == 0, f"{run['label']}: commit {run['commit']} is not in git"


def test_a_report_becomes_one_row_per_test_with_its_module_outcome_and_seconds(tmp_path):
    collect = docs_script("data/test_time/collect")
    report = tmp_path / "tests.xml"
    report.write_text(REPORT)
    rows, totals = collect.read_report(report, ROOT)
    assert rows.to_dict("records") == [
        {
            "module": "tests/learning/test_code_shift_learns.py",
            "test": "test_reward_rises[sao]",  # the xdist group suffix dropped
            "outcome": "passed",
            "seconds": 7.25,
        },
        {
            "module": "tests/runtime/test_guardrails.py",  # the class name dropped
            "test": "test_cap",
            "outcome": "failed",
            "seconds": 0.5,
        },
        {"module": "tests/test_api.py", "test": "test_example", "outcome": "skipped", "seconds": 2},
        {"module": "tests/test_api.py", "test": "test_other", "outcome": "passed", "seconds": 1},
    ]
    assert totals == {"wall_seconds": 12.5, "tests": 4, "failures": 1, "errors": 0, "skipped": 1}


def test_a_report_naming_no_module_of_the_checkout_is_an_error_naming_the_class(tmp_path):
    collect = docs_script("data/test_time/collect")
    report = tmp_path / "tests.xml"
    report.write_text(REPORT.replace("tests.test_api", "tests.not_a_module"))
    with pytest.raises(SystemExit, match="tests.not_a_module"):
        collect.read_report(report, ROOT)


@pytest.fixture
def kept_in(tmp_path, monkeypatch):
    """The collect script with its kept files in ``tmp_path``."""
    collect = docs_script("data/test_time/collect")
    monkeypatch.setattr(collect, "TESTS", tmp_path / "tests.csv")
    monkeypatch.setattr(collect, "RUNS", tmp_path / "runs.json")
    return collect


def test_collecting_runs_make_test_keeps_its_report_and_replaces_a_run_of_the_same_label(
    kept_in, tmp_path, monkeypatch
):
    calls = []

    def make_test(checkout, report, target):  # what `make TARGET PYTEST_ARGS=--junitxml=...` leaves
        calls.append((checkout, target))
        report.write_text(REPORT)

    monkeypatch.setattr(kept_in, "run_make_test", make_test)
    assert kept_in.main(["--label", "mine", "--setting", "first"]) == 0
    assert kept_in.main(["--label", "mine", "--setting", "again", "--target", "test-all"]) == 0
    assert calls == [(ROOT, "test"), (ROOT, "test-all")]
    [run] = json.loads((tmp_path / "runs.json").read_text())
    assert run["setting"] == "again" and run["tests"] == 4 and run["wall_seconds"] == 12.5
    assert run["target"] == "test-all"
    assert len(run["commit"]) == 40
    tests = pd.read_csv(tmp_path / "tests.csv")
    assert list(tests["run"]) == ["mine"] * 4 and tests["seconds"].sum() == 10.75


def test_a_kept_report_needs_the_commit_it_ran(kept_in, tmp_path):
    report = tmp_path / "tests.xml"
    report.write_text(REPORT)
    with pytest.raises(SystemExit, match="--report needs --commit"):
        kept_in.main(["--label", "x", "--setting", "y", "--report", str(report)])
    with pytest.raises(SystemExit, match="no report"):
        kept_in.main(["--label", "x", "--setting", "y", "--report", str(tmp_path / "none.xml")])
    assert not (tmp_path / "runs.json").exists()
