"""``--resume`` pools only runs of this benchmark: each kept result is checked against the run the
benchmark would make in its place (tier, config hash, code), sessions count what they ran, and
a user's module that hangs or dies is named before anything starts."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap

import pytest
from tiny_model import model_section, rollout_section

from sao_online.benchmark import run_benchmark
from sao_online.benchmark.results_files import ResultsError
from sao_online.config import ConfigError

pytestmark = pytest.mark.e2e

METHODS = textwrap.dedent("""
    from sao_online.algorithms import DoubleSidedIS, Method, RunningMeanAdvantage


    def make(cfg, max_action_tokens):
        return Method(
            name="mine",
            group_size=1,
            estimator=RunningMeanAdvantage(window=16),
            objective=DoubleSidedIS(eps_low=cfg.dis_eps_low, eps_high=cfg.dis_eps_high),
        )
""")

TINY = {
    "env": {"id": "sao_online/StyleShift-v0", "latency_mean": 0.0},
    "schedule": {
        "parameters": {
            "preferred": {"kind": "abrupt", "values": ["cute", "chuunibyou"], "at": [0, 8]}
        }
    },
    "model": model_section(),
    "rollout": rollout_section(),
    "runtime": {"backend": "sync"},
    "budget": {"episodes": 16},
    "eval": {"every_updates": 0},
    "logging": {"checkpoint_every": 0, "transcripts_every": 0},
}


def _suite(folder):
    suite = {
        "suite": "tiny",
        "methods": ["mymethods:make"],
        "tasks": {"Style": {"config": TINY}},
        "tiers": {"smoke": {"seeds": 1}, "lite": {"seeds": 1}},
    }
    path = folder / "tiny.yaml"
    path.write_text(json.dumps(suite))
    return path


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A finished benchmark of ``frozen`` and a plug-in method, one seed."""
    folder = tmp_path_factory.mktemp("resume")
    (folder / "mymethods.py").write_text(METHODS)
    sys.path.insert(0, str(folder))
    try:
        run_benchmark(out=folder / "bench", suite=_suite(folder), progress=False, reps=50)
        yield folder
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("mymethods", None)


def _copy(kept, name):
    target = kept / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(kept / "bench", target)
    return target


def _sessions(folder):
    return json.loads((folder / "results" / "benchmark.json").read_text())["sessions"]


def test_a_session_counts_the_runs_it_ran(kept):
    folder = _copy(kept, "sessions")
    (session,) = _sessions(folder)
    assert session["runs"] == 2 and session["ended"] == "finished" and session["pid"]
    run_benchmark(out=folder, suite=kept / "tiny.yaml", resume=True, progress=False, reps=50)
    assert len(_sessions(folder)) == 1  # a resume that ran nothing is no session


def test_a_result_of_another_tier_is_refused(kept):
    folder = _copy(kept, "tier")
    (folder / "results" / "benchmark.json").unlink()  # not even the protocol to compare with
    with pytest.raises(ResultsError, match=r"seed-0.json: a result of tier smoke, and this "):
        run_benchmark(
            out=folder, suite=kept / "tiny.yaml", tier="lite", resume=True, progress=False
        )


def test_a_result_copied_in_from_another_setup_is_refused(kept):
    folder = _copy(kept, "foreign")
    path = folder / "results" / "runs" / "Style" / "frozen" / "seed-0.json"
    record = json.loads(path.read_text())
    record["config_hash"] = "0123456789abcdef"
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match=r"its config hash 0123456789abcdef is not this "):
        run_benchmark(out=folder, suite=kept / "tiny.yaml", resume=True, progress=False)


def test_an_edited_plugin_module_is_refused_naming_it(kept):
    folder = _copy(kept, "edited")
    module = kept / "mymethods.py"
    module.write_text(METHODS.replace("window=16", "window=32"))
    try:
        with pytest.raises(ResultsError, match=r"ran other code .*module mymethods \(mymethods.py"):
            run_benchmark(out=folder, suite=kept / "tiny.yaml", resume=True, progress=False)
    finally:
        module.write_text(METHODS)


def test_a_folder_in_use_is_refused(kept):
    from sao_online.rundir.lock import RunDirLockedError, RunLock

    folder = _copy(kept, "busy")
    held = RunLock.acquire(folder)
    try:
        with pytest.raises(RunDirLockedError, match=r"is in use by pid \d+ .*another benchmark"):
            run_benchmark(out=folder, suite=kept / "tiny.yaml", resume=True, progress=False)
    finally:
        held.release()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "import time\ntime.sleep(3600)\n" + METHODS,
            r"loading it \(the import .*\) took more than 3 s",
        ),
        ("import os\nos._exit(3)\n" + METHODS, r"the process loading it exited with code 3"),
        (  # the import is quick; the factory call never returns
            "import time\n\n\ndef make(cfg, max_action_tokens):\n    time.sleep(3600)\n",
            r"loading it \(the import and, for a method, the factory call\) took more than 3 s",
        ),
        (
            "import os\n\n\ndef make(cfg, max_action_tokens):\n    os._exit(4)\n",
            r"the process loading it exited with code 4",
        ),
    ],
)
def test_a_plugin_that_hangs_or_exits_is_named_before_anything_runs(
    tmp_path, monkeypatch, body, message
):
    (tmp_path / "badmethods.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SAO_ONLINE_PLUGIN_SECONDS", "3")
    with pytest.raises(ConfigError, match=r"^--methods: method 'badmethods:make': " + message):
        run_benchmark(out=tmp_path / "bench", suite=_suite(tmp_path), methods=["badmethods:make"])
    assert not (tmp_path / "bench").exists()
