import pandas as pd
import pytest

from sao_online.rundir.layout import RunDirError
from sao_online.rundir.runlog import RunLog


def test_chunks_are_written_atomically_and_read_back(tmp_path):
    log = RunLog.create(tmp_path / "run", {"experiment": "x"}, flush_every=3)
    for i in range(7):
        log.log("episodes", {"episode": i, "reward": float(i)})
    parts = sorted((tmp_path / "run" / "episodes.parquet").iterdir())
    assert [p.name for p in parts] == ["part-00000.parquet", "part-00001.parquet"]
    assert list(log.read("episodes")["episode"]) == list(range(7))
    log.flush()
    on_disk = pd.read_parquet(tmp_path / "run" / "episodes.parquet")
    assert sorted(on_disk["episode"]) == list(range(7))


def test_existing_run_is_never_silently_replaced(tmp_path):
    RunLog.create(tmp_path / "run", {"a": 1}).close()
    with pytest.raises(RunDirError, match="--resume"):
        RunLog.create(tmp_path / "run", {"a": 2})
    with pytest.raises(RunDirError, match="no run"):
        RunLog.create(tmp_path / "other", {"a": 2}, resume=True)


def test_resume_drops_records_written_after_the_checkpoint(tmp_path):
    log = RunLog.create(tmp_path / "run", {"a": 1}, flush_every=2)
    for i in range(4):
        log.log("episodes", {"episode": i})
    log.save_checkpoint(1, {"counter": 4})
    for i in range(4, 9):  # these follow the checkpoint; 4 of them reach disk
        log.log("episodes", {"episode": i})
    log.close()
    resumed = RunLog.create(tmp_path / "run", {"a": 1}, resume=True, flush_every=2)
    state = resumed.load_checkpoint()
    assert state["counter"] == 4
    assert list(resumed.read("episodes")["episode"]) == [0, 1, 2, 3]
    resumed.log("episodes", [{"episode": 4}, {"episode": 5}])
    assert list(pd.read_parquet(tmp_path / "run" / "episodes.parquet")["episode"]) == list(range(6))


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    log = RunLog.create(tmp_path / "run", {})
    for version in range(4):
        log.save_checkpoint(version, {"v": version}, keep=2)
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step-*"))
    assert names == ["step-000002", "step-000003"]
    assert RunLog(tmp_path / "run").load_checkpoint()["v"] == 3


def test_a_second_checkpoint_at_the_same_version_never_replaces_the_first_in_place(
    tmp_path, monkeypatch
):
    from sao_online.rundir import runlog

    log = RunLog.create(tmp_path / "run", {})
    log.save_checkpoint(2, {"v": "earlier"})
    log.save_checkpoint(3, {"v": "periodic"})
    written = []
    write = runlog.write_checkpoint
    monkeypatch.setattr(
        runlog,
        "write_checkpoint",
        lambda folder, *a: (written.append(folder.name), write(folder, *a)),
    )
    log.save_checkpoint(3, {"v": "final"})
    assert written == [".step-000003.1.tmp"]  # a new name: `latest` may point at the old one
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step-*"))
    # The periodic one covered the same parts as the final one: the one before it is kept.
    assert names == ["step-000002", "step-000003.1"]
    assert RunLog(tmp_path / "run").load_checkpoint()["v"] == "final"


def test_the_checkpoint_kept_beside_the_newest_is_of_an_earlier_version(tmp_path):
    """A finished run used to keep only checkpoints of its final version, all covering every
    part: a damaged part then had nothing to be run again from."""
    log = RunLog.create(tmp_path / "run", {}, flush_every=2)
    for version in range(1, 4):
        log.log("episodes", [{"episode": 2 * version}, {"episode": 2 * version + 1}])
        log.save_checkpoint(version, {"v": version})
    log.save_checkpoint(3, {"v": "final"})
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step-*"))
    assert names == ["step-000002", "step-000003.1"]


def test_resume_refuses_a_different_config_and_names_what_changed(tmp_path):
    RunLog.create(tmp_path / "run", {"budget": {"episodes": 10}, "seed": 0}).close()
    RunLog.create(tmp_path / "run", {"budget": {"episodes": 10}, "seed": 0}, resume=True).close()
    with pytest.raises(RunDirError, match="budget.episodes"):
        RunLog.create(tmp_path / "run", {"budget": {"episodes": 20}, "seed": 0}, resume=True)


def test_resume_takes_a_config_field_added_since_the_run_started_at_its_default(tmp_path):
    # The run was started by a version without algorithm.tis_cap; this one writes it.
    RunLog.create(tmp_path / "run", {"algorithm": {"name": "sao"}, "seed": 0}).close()
    newer = {"algorithm": {"name": "sao", "tis_cap": 2.0}, "seed": 0}
    RunLog.create(tmp_path / "run", newer, resume=True).close()
    newer["algorithm"]["tis_cap"] = 3.0
    with pytest.raises(RunDirError, match=r"differs in algorithm.tis_cap$"):
        RunLog.create(tmp_path / "run", newer, resume=True)
