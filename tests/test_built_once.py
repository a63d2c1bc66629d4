"""The tests' shared builder (``tests/built_once.py``): one build per session, none left by a
build that failed."""

from __future__ import annotations

import pytest
from built_once import built_once, session_folder


def test_a_second_caller_reads_what_the_first_built(tmp_path_factory):
    calls = []

    def build(folder):
        calls.append(folder)
        (folder / "data.txt").write_text("built")

    first = built_once(tmp_path_factory, "shared-once", build)
    second = built_once(tmp_path_factory, "shared-once", build)
    assert first == second == session_folder(tmp_path_factory) / "shared-once"
    assert len(calls) == 1 and (second / "data.txt").read_text() == "built"


def test_a_failed_build_leaves_nothing_and_the_next_caller_builds_again(tmp_path_factory):
    def broken(folder):
        (folder / "half.txt").write_text("half")
        raise RuntimeError("the reference run failed")

    with pytest.raises(RuntimeError, match="the reference run failed"):
        built_once(tmp_path_factory, "shared-broken", broken)
    assert not (session_folder(tmp_path_factory) / "shared-broken").exists()
    folder = built_once(tmp_path_factory, "shared-broken", lambda f: (f / "ok.txt").touch())
    assert sorted(p.name for p in folder.iterdir()) == [".built", "ok.txt"]
