"""Kept results come from committed code: a benchmark or a merge refuses to write into the
checkout's ``benchmarks/`` from a dirty tree unless ``--allow-dirty``, and a scorecard's first
lines name dirty runs, several commits and mixed versions of a dependency."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
from benchmark_synthetic import PROVENANCE, protocol, record, write_results

from sao_online.benchmark import clean_tree, merge_results
from sao_online.benchmark.clean_tree import check_clean_tree, provenance_notes
from sao_online.benchmark.scorecard import write_scorecard
from sao_online.config import ConfigError

TASKS = {"T": "F"}


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A fake checkout at tmp_path/repo whose tree is dirty until the test says otherwise."""
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir(parents=True)
    state = {"commit": "c" * 40, "dirty": True}
    monkeypatch.setattr(clean_tree, "checkout_root", lambda: root)
    monkeypatch.setattr(clean_tree, "source_state", lambda: state)
    return root, state


def test_a_dirty_tree_may_not_write_kept_results_unless_allowed(checkout, tmp_path):
    root, state = checkout
    kept = root / "benchmarks" / "lite" / "seeds-0-2"
    with pytest.raises(ConfigError, match=r"--out: .*inside benchmarks/.*uncommitted changes"):
        check_clean_tree(kept, allow_dirty=False)
    assert check_clean_tree(kept, allow_dirty=True) is True  # allowed, and said to be
    assert check_clean_tree(tmp_path / "elsewhere", allow_dirty=False) is False
    state["dirty"] = False
    assert check_clean_tree(kept, allow_dirty=False) is False


def test_not_a_checkout_keeps_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(clean_tree, "checkout_root", lambda: None)
    assert check_clean_tree(tmp_path / "benchmarks", allow_dirty=False) is False


def _provenance(commit="a" * 40, dirty=False, transformers="5.24.0"):
    record_ = copy.deepcopy(PROVENANCE)
    record_.update(commit=commit, dirty=dirty)
    record_["packages"]["transformers"] = transformers
    return record_


def test_first_lines_name_dirty_runs_commits_and_mixed_versions():
    runs = pd.DataFrame({"provenance_id": ["p", "p", "q", "r"]})
    benchmark = {
        "provenance": {
            "p": _provenance(dirty=True, transformers="5.25.0"),
            "q": _provenance(),
            "r": _provenance(commit="b" * 40),
        },
        "sessions": [{"allow_dirty": True}],
    }
    notes = provenance_notes(runs, benchmark)
    assert notes == [
        "2 of 4 runs ran from a tree with uncommitted changes: their code is not the commit "
        "they name (written with --allow-dirty).",
        "The runs come from 2 commits: aaaaaaaaaaaa (3 runs), bbbbbbbbbbbb (1 run).",
        "Mixed versions of a dependency: transformers 5.24.0 (2 runs), 5.25.0 (2 runs).",
    ]
    clean = {"provenance": {"q": _provenance()}}
    assert provenance_notes(pd.DataFrame({"provenance_id": ["q", "q"]}), clean) == []


def _records(dirty: bool):
    records = []
    for seed in (0, 1):
        for method, rewards in (("frozen", [0.2, 0.2]), ("a", [0.4, 0.6])):
            one = record("T", "F", method, seed, rewards, [1.0, 1.0])
            one["provenance"] = _provenance(dirty=dirty and method == "a")
            records.append(one)
    return records


def test_the_scorecard_opens_with_what_its_runs_do_not_share(tmp_path):
    out = write_results(tmp_path / "bench", _records(dirty=True), protocol(TASKS, ["frozen", "a"]))
    card = write_scorecard(out, reps=50).read_text().splitlines()
    assert card[0].startswith("# Benchmark scorecard")
    assert card[2] == (
        "**2 of 4 runs ran from a tree with uncommitted changes: their code is not the commit "
        "they name.**"
    )


def test_merge_refuses_dirty_runs_into_kept_results(checkout, tmp_path):
    root, state = checkout
    state["dirty"] = False  # the code that merges is committed; two of the runs were not
    source = write_results(
        tmp_path / "bench", _records(dirty=True), protocol(TASKS, ["frozen", "a"])
    )
    kept = root / "benchmarks" / "pooled"
    with pytest.raises(ConfigError, match=r"2 of the 4 runs pooled ran from a tree with"):
        merge_results([source], kept, reps=50)
    assert not kept.exists()  # refused before anything was written
    card = merge_results([source], kept, reps=50, allow_dirty=True).read_text()
    assert "(written with --allow-dirty).**" in card
    clean = write_results(
        tmp_path / "clean", _records(dirty=False), protocol(TASKS, ["frozen", "a"])
    )
    assert merge_results([clean], root / "benchmarks" / "clean", reps=50).is_file()
