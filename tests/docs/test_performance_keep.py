"""Keeping a benchmark's result for the performance page: refused where it would mislead, kept
with its load and provenance, and a replaced result moved to the history, never lost."""

import itertools
import json
import os
import subprocess
import sys

import pytest

from sao_online.commands import performance_keep
from sao_online.commands.performance_keep import KeepError, MachineWatch, keep_result


def _printing(result: dict) -> list[str]:
    """A stand-in for the benchmark: prints ``result`` as its JSON."""
    return [sys.executable, "-c", f"import json; print(json.dumps({result!r}))"]


@pytest.fixture
def quiet_clean(monkeypatch):
    monkeypatch.setattr(performance_keep, "source_state", lambda: {"commit": "c0", "dirty": False})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.3, 0.4))


@pytest.mark.e2e  # runs a stand-in benchmark as a child process
def test_a_kept_result_holds_the_command_its_load_and_provenance(tmp_path, quiet_clean):
    result = {"measured_at": "2026-12-07T01:02:03Z", "ratio": 1.5}
    path = keep_result("bench_throughput_trl", tmp_path, command=_printing(result))
    kept = json.loads(path.read_text())
    assert path == tmp_path / "bench_throughput_trl.json"
    assert kept["command"] == "sao-online bench throughput --peer trl"
    assert kept["result"] == result
    assert {"commit", "dirty", "packages", "machine"} <= set(kept["provenance"])
    load = kept["machine_load"]
    assert load["load_average_before"] == 0.2 and load["load_average"] == {"min": 0.2, "max": 0.2}
    assert 0 <= load["others_cpu_share"] <= 1 and load["cores"] == os.cpu_count()
    assert kept["load"].startswith("load average 0.2-0.2 over the run, other processes using")


@pytest.mark.e2e  # runs a stand-in benchmark as a child process
def test_a_replaced_result_moves_to_the_history_numbered_in_order(tmp_path, quiet_clean):
    for ratio in (1.0, 2.0, 3.0):
        keep_result("bench_learner", tmp_path, command=_printing({"ratio": ratio}))
    history = tmp_path / "history"
    assert sorted(path.name for path in history.iterdir()) == [
        "bench_learner-1.json",
        "bench_learner-2.json",
    ]
    ratios = [
        json.loads((history / f"bench_learner-{number}.json").read_text())["result"]["ratio"]
        for number in (1, 2)
    ]
    assert ratios == [1.0, 2.0]
    assert json.loads((tmp_path / "bench_learner.json").read_text())["result"]["ratio"] == 3.0


@pytest.mark.e2e  # runs a stand-in benchmark as a child process
def test_a_dirty_tree_a_busy_machine_and_a_failed_command_are_refused(tmp_path, monkeypatch):
    command = _printing({"ratio": 1})
    monkeypatch.setattr(performance_keep, "source_state", lambda: {"commit": "c0", "dirty": True})
    with pytest.raises(KeepError, match="uncommitted changes"):
        keep_result("bench_learner", tmp_path, command=command)
    monkeypatch.setattr(performance_keep, "source_state", lambda: {"commit": "c0", "dirty": False})
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    with pytest.raises(KeepError, match=r"busy \(1-minute load average 1.50, >= 0.5\).*--busy-ok"):
        keep_result("bench_learner", tmp_path, command=command)
    path = keep_result("bench_learner", tmp_path, command=command, busy_ok=True)
    assert json.loads(path.read_text())["machine_load"]["quiet"] is False
    with pytest.raises(KeepError, match="cannot measure 'bench_async'"):
        keep_result("bench_async", tmp_path, busy_ok=True)
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    with pytest.raises(KeepError, match=r"failed \(exit 3\)"):
        keep_result("bench_learner", tmp_path, command=failing, busy_ok=True)
    with pytest.raises(KeepError, match="printed no JSON object"):
        keep_result(
            "bench_learner", tmp_path, command=[sys.executable, "-c", "print('hi')"], busy_ok=True
        )
    # Nothing refused touched the kept result.
    assert json.loads(path.read_text())["result"] == {"ratio": 1}


def test_measure_names_the_table_and_returns_2_on_refusal(monkeypatch, capsys):
    from sao_online.commands import performance_page

    monkeypatch.setattr(performance_keep, "source_state", lambda: {"commit": "c0", "dirty": True})
    assert performance_page.main(["--measure", "throughput"]) == 2
    assert "uncommitted changes" in capsys.readouterr().err


@pytest.mark.e2e  # runs a stand-in benchmark as a child process
def test_the_benchmarks_own_children_count_as_its_own_cpu_time():
    before = performance_keep._own_seconds()
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert performance_keep._own_seconds() - before >= 0.3


@pytest.mark.e2e  # runs a stand-in benchmark as a child process
def test_the_watch_samples_the_load_while_the_command_runs(monkeypatch):
    loads = itertools.chain([0.1, 0.7, 0.4], itertools.repeat(0.2))
    monkeypatch.setattr(os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    with MachineWatch(sample_seconds=0.05) as watch:
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.3)"], check=True)
    summary = watch.summary()
    assert summary["load_average_before"] == 0.1
    assert summary["load_average"]["min"] == 0.1 and summary["load_average"]["max"] == 0.7
