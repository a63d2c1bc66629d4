"""Results files are inputs too: a damaged or foreign one is one line naming the file, nothing is
half-written, a folder that holds results is not overwritten unless told, and one process writes
a folder at a time."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from benchmark_synthetic import protocol, record, write_results

from sao_online.benchmark import merge_results
from sao_online.benchmark.out_folder import close_stale_sessions
from sao_online.benchmark.results_files import ResultsError, read_record, read_tables
from sao_online.benchmark.runner import result_path
from sao_online.cli import main
from sao_online.rundir.lock import RunDirLockedError, RunLock

TASKS = {"T": "F"}
METHODS = ["frozen", "a"]


def _folder(path, seeds=(0, 1)):
    records = [
        record(task, family, method, seed, [0.2, 0.2 + 0.3 * (method == "a")], [1.0, 1.0])
        for task, family in TASKS.items()
        for method in METHODS
        for seed in seeds
    ]
    write_results(path, records, protocol(TASKS, METHODS))
    for item in records:  # the per-run records a benchmark keeps beside its tables
        key = item["key"]
        target = result_path(path, key)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(item))
    return path


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda text: text[:300],
            r"damaged result record: not valid JSON \(truncated: it ends inside a value; line",
        ),
        (lambda text: "[1, 2]", r"not a benchmark result record \(the file: expected an object"),
        (lambda text: "{}", r"not a benchmark result record \(key: missing\)"),
        (
            lambda text: text.replace('"seed": 1', '"seed": "one"'),
            r"key.seed: expected an integer",
        ),
        (
            lambda text: text.replace('"seed": 1', '"seed": 0'),
            r"holds the result of T a seed 0, not of the run its path names",
        ),
    ],
)
def test_a_damaged_result_record_is_named(tmp_path, damage, message):
    folder = _folder(tmp_path / "bench")
    path = folder / "results" / "runs" / "T" / "a" / "seed-1.json"
    path.write_text(damage(path.read_text()))
    with pytest.raises(ResultsError, match=message) as caught:
        read_record(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_a_control_record_filed_under_another_name_is_named(tmp_path):
    item = record("T", "F", "a", 1, [0.2, 0.5], [1.0, 1.0])
    item["key"].update(control=2, start=16)
    path = result_path(tmp_path, {**item["key"], "control": 1})
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(item))
    assert path.parts[-5:] == ("controls", "T", "a", "seed-1", "shift-1.json")
    with pytest.raises(ResultsError, match=r"shift-1.json: holds the result of T a seed 1, not of"):
        read_record(path)
    path.rename(path.with_name("shift-2.json"))
    assert read_record(path.with_name("shift-2.json"))["key"]["control"] == 2


CONTROLS_HEADER = (
    "task,method,seed,shift,start,phase,phase_name,episodes,reward_mean,oracle_mean,warm_start,"
    "provenance_id\n"
)


def _truncate(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: raw.index(b"\n") + 20])  # cut inside the first row


def _flip(path):
    raw = bytearray(path.read_bytes())
    raw[100:102] = b"\xff\xfe"
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    ("name", "damage", "message"),
    [
        ("runs.csv", _truncate, r"runs.csv: damaged runs table: truncated \(line 2 is cut short"),
        (
            "runs.csv",
            lambda path: path.write_text(path.read_text().replace(",smoke,", ",,", 1)),
            r"runs.csv: damaged runs table: line 2, column tier: expected a value, got nothing",
        ),
        ("phases.csv", _flip, r"phases.csv: damaged phases table: not UTF-8 text \(byte 0xff"),
        (
            "benchmark.json",
            lambda path: path.write_text('{"protocol": '),
            r"benchmark.json: damaged benchmark file: not valid JSON \(truncated",
        ),
        (
            "benchmark.json",
            lambda path: path.write_text('{"protocol": {"tier": 3}}'),
            r"benchmark.json: not a benchmark's benchmark.json \(protocol.format: missing\)",
        ),
        (
            "curves.csv",
            lambda path: path.write_text("task,method\nT,a\n"),
            r"curves.csv: not a benchmark curves table: no column 'seed'",
        ),
        (
            "shifts.csv",
            lambda path: path.write_text(path.read_text().replace("\nT,a,0,", "\nT,a,7,", 1)),
            r"shifts.csv: rows of T a seed 7, a run runs.csv does not list",
        ),
        (
            "controls.csv",
            lambda path: path.write_text(CONTROLS_HEADER + "T,a,7,1,16,1,x,8,0.5,1.0,,p\n"),
            r"controls.csv: rows of T a seed 7, a run runs.csv does not list",
        ),
        (
            "controls.csv",
            lambda path: path.write_text(CONTROLS_HEADER + "T,a,0,one,16,1,x,8,0.5,1.0,,p\n"),
            r"controls.csv: damaged controls table: line 2, column shift: expected int",
        ),
    ],
)
def test_merging_a_damaged_results_folder_is_one_line_and_writes_nothing(
    tmp_path, capsys, name, damage, message
):
    damaged = _folder(tmp_path / "damaged")
    other = _folder(tmp_path / "other", seeds=(2, 3))
    damage(damaged / "results" / name)
    with pytest.raises(ResultsError, match=message):
        merge_results([damaged, other], tmp_path / "pooled", reps=50)
    assert not (tmp_path / "pooled").exists()
    code = main(["benchmark", "merge", str(damaged), str(other), "--out", str(tmp_path / "p")])
    assert code == 2 and name in _one_line(capsys)
    assert not (tmp_path / "p").exists()
    assert not list(tmp_path.glob(".*merging*"))


def test_merge_never_overwrites_results_unless_told(tmp_path, capsys):
    first, second = _folder(tmp_path / "one"), _folder(tmp_path / "two", seeds=(2, 3))
    target = _folder(tmp_path / "kept", seeds=(7,))
    before = (target / "results" / "runs.csv").read_text()
    with pytest.raises(ResultsError, match="holds results already; --force replaces them"):
        merge_results([first, second], target, reps=50)
    assert (target / "results" / "runs.csv").read_text() == before
    assert main(["benchmark", "merge", str(first), str(second), "--out", str(target)]) == 2
    assert "--force" in _one_line(capsys)
    (target / "notes.txt").write_text("mine")
    merge_results([first, second], target, reps=50, force=True)
    runs = pd.read_csv(target / "results" / "runs.csv")
    assert sorted(set(runs["seed"])) == [0, 1, 2, 3]
    assert not (target / "results" / "runs").exists()  # the old per-run records went too
    assert (target / "notes.txt").read_text() == "mine"  # what is not the benchmark's stays


def test_a_folder_in_use_is_refused_naming_its_writer(tmp_path, capsys):
    first, second = _folder(tmp_path / "one"), _folder(tmp_path / "two", seeds=(2, 3))
    held = RunLock.acquire(first)  # as a benchmark writing it holds it
    try:
        with pytest.raises(ResultsError, match=r"one is in use by pid \d+ on "):
            merge_results([first, second], tmp_path / "pooled", reps=50)
        out = RunLock.acquire(tmp_path / "busy")
        try:
            with pytest.raises(RunDirLockedError, match=r"busy is in use by pid \d+"):
                merge_results([second], tmp_path / "busy", reps=50)
        finally:
            out.release()
    finally:
        held.release()
    merge_results([first, second], tmp_path / "pooled", reps=50)  # free again


def test_a_killed_session_is_kept_and_marked_with_what_it_ran(tmp_path):
    folder = _folder(tmp_path / "bench")
    path = folder / "results" / "benchmark.json"
    data = json.loads(path.read_text())
    # What SIGKILL leaves: the session recorded at its start, never closed; one result its own.
    data["sessions"] = [{"id": "s1", "started": "then", "pid": 4321, "runs": 0, "ended": "running"}]
    path.write_text(json.dumps(data))
    kept = folder / "results" / "runs" / "T" / "a" / "seed-0.json"
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "session": "s1"}))
    said: list[str] = []
    close_stale_sessions(folder, said.append)
    assert said == ["the session started then (pid 4321) was killed: it had finished 1 run(s)"]
    (session,) = json.loads(path.read_text())["sessions"]
    assert session["ended"] == "killed" and session["runs"] == 1


def test_tables_read_back_with_their_kinds(tmp_path):
    folder = _folder(tmp_path / "bench")
    tables, benchmark = read_tables(folder / "results")
    runs = tables["runs"]
    assert runs["seed"].dtype.kind == "i" and runs["config_hash"].map(type).eq(str).all()
    assert tables["shifts"]["censored"].dtype == bool
    assert benchmark["protocol"]["tier"] == "smoke"
    shutil.rmtree(folder / "results" / "runs")
    assert read_tables(folder / "results")[0]["runs"].equals(runs)  # the tables alone suffice


def _code(sha: str) -> dict:
    module = {"module": "mine", "file": "mine.py", "sha256": sha}
    return {
        "package": {"package": "sao-online", "version": "0.1.0", "commit": None, "dirty": None},
        "method": {"spec": "mine:make", "settings": {"name": "a"}, "modules": [module]},
        "env": {"id": "x/T-v0", "modules": []},
    }


def test_runs_of_one_method_with_different_code_are_not_pooled(tmp_path, capsys):
    def coded(path, seeds, sha):
        records = [
            {**record("T", "F", method, seed, [0.2, 0.5], [1.0, 1.0]), "code": _code(sha)}
            for method in METHODS
            for seed in seeds
        ]
        return write_results(path, records, protocol(TASKS, METHODS))

    first = coded(tmp_path / "one", (0, 1), "aa11")
    second = coded(tmp_path / "two", (2, 3), "bb22")  # the module edited between the two
    with pytest.raises(ResultsError) as caught:
        merge_results([first, second], tmp_path / "pooled", reps=50)
    assert str(caught.value) == (
        "results: a on T ran two codes, seeds 0, 1 and seeds 2, 3: module mine (mine.py): "
        "source aa11 vs bb22; a result pools runs of one code"
    )
    assert not (tmp_path / "pooled").exists()
    same = coded(tmp_path / "three", (2, 3), "aa11")
    merge_results([first, same], tmp_path / "pooled", reps=50)  # one code: pooled
    benchmark = json.loads((tmp_path / "pooled" / "results" / "benchmark.json").read_text())
    assert [c["method"]["modules"][0]["sha256"] for c in benchmark["code"].values()] == ["aa11"]


def test_the_provenance_says_what_ran_where_in_full(tmp_path):
    from sao_online.benchmark.scorecard_tables import code_table, provenance_table

    folder = _folder(tmp_path / "bench")
    tables, benchmark = read_tables(folder / "results")
    record = next(iter(benchmark["provenance"].values()))
    benchmark["provenance"] = {"p1": {**record, "commit": None, "dirty": None}}
    tables["runs"]["provenance_id"] = "p1"
    assert provenance_table(tables, benchmark).loc[0, "commit"] == "not a git checkout"
    benchmark["code"] = {"c1": _code("aa11")}
    tables["runs"]["code_id"] = "c1"
    row = code_table(tables, benchmark).iloc[0]
    assert row["runs"] == 4 and row["method"] == "mine:make"
    assert row["method from"] == "mine (mine.py, sha256 aa11)"
    assert row["sao-online"] == "0.1.0 at no git checkout"
