"""Run directories under damage and misuse: resume fallbacks, crafted checkpoints, the lock."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from machine_time import without_machine_time
from tiny_model import SMALLEST_MODEL, tiny_overrides

from sao_online.analysis import RunLoadError, load_runs
from sao_online.rundir.layout import RunDirError
from sao_online.rundir.lock import RunDirLockedError
from sao_online.rundir.runlog import RunLog


def episodes_of(log: RunLog) -> list[int]:
    return log.read("episodes")["episode"].tolist()


def two_checkpoints(path: Path) -> None:
    """Parts 0-1 (episodes 0-3), checkpoint v1, parts 2-3 (4-7), checkpoint v2, part 4 (8-9)."""
    with RunLog.create(path, {"a": 1}, flush_every=2) as log:
        for episode in range(10):
            log.log("episodes", {"episode": episode})
            if episode == 3:
                log.save_checkpoint(1, {"seen": 4, "weights": torch.arange(3.0)})
            elif episode == 7:
                log.save_checkpoint(2, {"seen": 8, "weights": torch.arange(3.0) * 2})


def resume(path: Path) -> tuple[RunLog, dict | None]:
    log = RunLog.create(path, {"a": 1}, resume=True, flush_every=2)
    return log, log.load_checkpoint()


def test_missing_latest_resumes_from_the_newest_step_folder_and_keeps_its_data(tmp_path):
    two_checkpoints(tmp_path)
    (tmp_path / "checkpoints" / "latest").unlink()
    log, state = resume(tmp_path)
    assert state["seen"] == 8 and torch.equal(state["weights"], torch.tensor([0.0, 2.0, 4.0]))
    assert episodes_of(log) == list(range(8))  # only the part after the checkpoint went
    assert any("latest is missing" in m for m in log.messages)
    assert any(
        "resuming from checkpoints/step-000002" in m and "removed 1" in m for m in log.messages
    )
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step-000002"
    log.close()


def test_latest_naming_a_deleted_folder_falls_back_to_the_older_checkpoint(tmp_path):
    two_checkpoints(tmp_path)
    for file in (tmp_path / "checkpoints" / "step-000002").iterdir():
        file.unlink()
    (tmp_path / "checkpoints" / "step-000002").rmdir()
    log, state = resume(tmp_path)
    assert state["seen"] == 4 and episodes_of(log) == list(range(4))
    assert any("step-000002, which is missing" in m for m in log.messages)
    log.close()


def test_a_checkpoint_covering_a_damaged_part_is_skipped_and_the_data_set_aside(tmp_path):
    two_checkpoints(tmp_path)
    part = tmp_path / "episodes.parquet" / "part-00002.parquet"  # covered by v2 only
    part.write_bytes(part.read_bytes()[:40])  # truncated: "magic bytes not found"
    log, state = resume(tmp_path)
    assert state["seen"] == 4 and episodes_of(log) == list(range(4))
    discarded = list((tmp_path / "discarded").iterdir())
    assert len(discarded) == 1  # nothing deleted: the damaged part and what followed, set aside
    assert sorted(p.name for p in (discarded[0] / "episodes.parquet").iterdir()) == [
        "part-00002.parquet",
        "part-00003.parquet",
        "part-00004.parquet",
    ]
    assert (discarded[0] / "checkpoints" / "step-000002").is_dir()
    assert any("part-00002.parquet differs" in m for m in log.messages)
    log.log("episodes", [{"episode": 4}, {"episode": 5}])  # the run goes on from v1
    assert episodes_of(log) == list(range(6))
    log.close()


def test_a_damaged_part_no_checkpoint_precedes_is_a_named_error_that_changes_nothing(tmp_path):
    two_checkpoints(tmp_path)
    part = tmp_path / "episodes.parquet" / "part-00000.parquet"  # covered by both
    part.write_bytes(part.read_bytes()[:40])
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    log = RunLog.create(tmp_path, {"a": 1}, resume=True)
    with pytest.raises(RunDirError, match=r"part-00000\.parquet differs.*--overwrite"):
        log.load_checkpoint()
    log.close()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_loading_a_run_with_a_damaged_part_names_the_file(tmp_path):
    run = tmp_path / "exp" / "sao" / "seed-0"
    two_checkpoints(run)
    part = run / "episodes.parquet" / "part-00003.parquet"
    part.write_bytes(part.read_bytes()[:40])
    with pytest.raises(RunLoadError, match=r"part-00003\.parquet.*damaged.*--resume"):
        load_runs(tmp_path)
    with pytest.raises(RunDirError, match=r"part-00003\.parquet"):
        RunLog(run).read("episodes")


def test_loading_checks_parts_against_the_checkpoint_hashes(tmp_path):
    run = tmp_path / "exp" / "sao" / "seed-0"
    two_checkpoints(run)
    assert load_runs(tmp_path)["episode"].tolist() == list(range(10))
    part = run / "episodes.parquet" / "part-00001.parquet"
    pd.read_parquet(part).assign(episode=[20, 30]).to_parquet(part, index=False)  # readable
    with pytest.raises(
        RunLoadError,
        match=r"part-00001\.parquet: damaged table part \(differs "
        r"from what checkpoint step-000002 recorded",
    ):
        load_runs(tmp_path)


def test_tampered_tensors_fail_their_hash_and_the_older_checkpoint_is_used(tmp_path):
    two_checkpoints(tmp_path)
    tensors = tmp_path / "checkpoints" / "step-000002" / "tensors.safetensors"
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 0xFF
    tensors.write_bytes(bytes(data))
    log, state = resume(tmp_path)
    assert state["seen"] == 4
    assert any("tensors.safetensors does not match" in m for m in log.messages)
    log.close()


class _RunsCode:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_pickled_checkpoint_is_refused_without_running_its_code(tmp_path):
    run = tmp_path / "run"
    RunLog.create(run, {"a": 1}).close()
    marker = tmp_path / "code-ran"
    folder = run / "checkpoints" / "step-000001"
    folder.mkdir(parents=True)
    (folder / "state.pt").write_bytes(pickle.dumps({"learner": _RunsCode(marker)}))
    (run / "checkpoints" / "latest").write_text("step-000001")
    log = RunLog.create(run, {"a": 1}, resume=True)
    with pytest.raises(RunDirError, match=r"pickled checkpoint.*not loaded.*--overwrite"):
        log.load_checkpoint()
    log.close()
    assert not marker.exists()


def test_latest_and_step_folders_pointing_outside_the_run_are_never_read(tmp_path):
    run = tmp_path / "run"
    two_checkpoints(run)
    outside = tmp_path / "elsewhere"
    (run / "checkpoints" / "step-000002").rename(outside)
    (run / "checkpoints" / "step-000009").symlink_to(outside, target_is_directory=True)
    (run / "checkpoints" / "latest").write_text("../../elsewhere")
    log, state = resume(run)
    assert state["seen"] == 4  # step-000001: the only real folder inside the run
    assert any("'../../elsewhere', which is not a checkpoint" in m for m in log.messages)
    log.close()


def test_checkpoint_state_round_trips_exactly(tmp_path):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.99))
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": torch.Generator().manual_seed(3).get_state(),
        "tied": [model.weight] * 2,  # one tensor twice, like tied embeddings
        "plans": [{"seed": 7, "theta": {"style": "cute"}}],
        "nan": float("nan"),
    }
    with RunLog.create(tmp_path, {}) as log:
        log.save_checkpoint(5, state)
        back = RunLog(tmp_path).load_checkpoint()
    restored = torch.optim.Adam(model.parameters(), betas=(0.9, 0.99))
    restored.load_state_dict(back["optimizer"])  # int parameter keys and tuples survived
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.99)
    assert set(back["optimizer"]["state"]) == {0, 1}
    assert torch.equal(back["model"]["weight"], model.weight)
    assert torch.equal(back["rng"], state["rng"]) and back["plans"] == state["plans"]
    assert back["nan"] != back["nan"]


LOCK_HOLDER = """
import sys, time
from sao_online.rundir.runlog import RunLog
log = RunLog.create(sys.argv[1], {"a": 1}, overwrite=True)
print("locked", flush=True)
time.sleep(120)
"""


def hold_lock(run: Path) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(run)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_writer_is_refused_and_a_dead_writers_lock_is_taken_over(tmp_path):
    run = tmp_path / "run"
    holder = hold_lock(run)
    try:
        for kwargs in ({"resume": True}, {"overwrite": True}):
            with pytest.raises(RunDirLockedError, match=rf"in use by pid {holder.pid} on "):
                RunLog.create(run, {"a": 1}, **kwargs)
        assert (run / "config.yaml").exists()  # --overwrite did not touch the live run
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    log = RunLog.create(run, {"a": 1}, resume=True)
    assert any(f"left by pid {holder.pid}" in m and "no longer running" in m for m in log.messages)
    log.close()
    again = RunLog.create(run, {"a": 1}, resume=True)  # a clean release leaves nothing stale
    assert again.messages == []
    again.close()


@pytest.mark.e2e
def test_cli_overwrite_into_a_live_run_is_a_one_line_error(tmp_path):
    run = tmp_path / "run"
    holder = hold_lock(run)
    try:
        config = tmp_path / "c.yaml"
        config.write_text(
            "experiment: x\nmodel: {warm_start: false, num_layers: 1, "
            "hidden_size: 32}\nruntime: {backend: sync}\n"
        )
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "sao_online.cli",
                "run",
                str(config),
                "--out",
                str(run),
                "--overwrite",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"in use by pid {holder.pid}" in lines[0], result.stderr
    assert (run / "config.yaml").exists()


def test_parts_without_any_checkpoint_are_set_aside_not_deleted(tmp_path):
    with RunLog.create(tmp_path, {"a": 1}, flush_every=2) as log:
        for episode in range(5):
            log.log("episodes", {"episode": episode})
    log, state = resume(tmp_path)
    assert state is None and len(log.read("episodes")) == 0
    (aside,) = (tmp_path / "discarded").iterdir()
    assert sorted(p.name for p in (aside / "episodes.parquet").iterdir()) == [
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    assert any("no checkpoint: moved 2 table part(s)" in m for m in log.messages)
    log.close()


def test_a_real_run_without_latest_resumes_from_its_newest_checkpoint(tmp_path, capsys):
    from sao_online.config import load_config
    from sao_online.runtime.launch import run_experiment

    config = load_config(
        None,
        tiny_overrides(
            "rollout.max_action_tokens=8",
            "rollout.max_episode_tokens=96",
            "runtime.backend=sync",
            "budget.episodes=32",
            "logging.checkpoint_every=2",
            "logging.flush_every=8",
            model=SMALLEST_MODEL,
        ),
    )
    run = tmp_path / "run"
    run_experiment(config, out=run)
    before = load_runs(run)
    (run / "checkpoints" / "latest").unlink()
    summary = run_experiment(config, out=run, resume=True)
    assert summary["episodes"] == 32 and summary["dropped_episodes"] == 0
    pd.testing.assert_frame_equal(load_runs(run), before)  # nothing lost, nothing re-run
    err = capsys.readouterr().err
    assert "checkpoints/latest is missing" in err and "resuming from checkpoints/step-000004" in err


def test_a_lock_file_that_is_a_link_is_never_followed(tmp_path):
    from sao_online.rundir.lock import RunLockError

    run = tmp_path / "run"
    run.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (run / ".lock").symlink_to(target)
    with pytest.raises(RunLockError, match=r"\.lock: cannot open the run's lock file"):
        RunLog.create(run, {"a": 1})
    assert target.read_text() == "keep me"


def test_the_repair_advice_for_a_damaged_part_of_a_finished_run_is_true(tmp_path, capsys):
    """A finished run once kept only checkpoints of its last version, both covering every part,
    while ``report`` advised ``--resume`` for any damaged part: only ``--overwrite`` was left.
    Now it keeps one of an earlier version, and the advice says what works for each part."""
    from sao_online.cli import main
    from sao_online.config import load_config
    from sao_online.runtime.launch import run_experiment

    config = load_config(
        None,
        tiny_overrides(
            "rollout.max_action_tokens=8",
            "rollout.max_episode_tokens=96",
            "runtime.backend=sync",
            "budget.episodes=48",  # 6 updates: checkpoints at 2, 4, 6 and the final one at 6
            "logging.checkpoint_every=2",
            "logging.flush_every=8",
            model=SMALLEST_MODEL,
        ),
    )
    run = tmp_path / "runs" / "exp" / "sao" / "seed-0"
    run_experiment(config, out=run)

    def tables() -> list[pd.DataFrame]:
        return [without_machine_time(load_runs(run, table)) for table in ("episodes", "updates")]

    before = tables()
    assert sorted(p.name for p in (run / "checkpoints").glob("step-*")) == [
        "step-000004",
        "step-000006.1",
    ]

    def report_error() -> str:
        assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1
        return lines[0]

    # The last part (episodes 40-47) came after step-000004: --resume runs it again, exactly.
    last = run / "episodes.parquet" / "part-00005.parquet"
    last.write_bytes(last.read_bytes()[:100])
    line = report_error()
    assert f"{last}: damaged table part" in line
    assert (
        f"`sao-online run CONFIG --out {run} --resume` goes back to checkpoint step-000004" in line
    )
    run_experiment(config, out=run, resume=True)
    for after, original in zip(tables(), before):
        pd.testing.assert_frame_equal(after, original)
    assert main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    # The first part is covered by every checkpoint: the advice says so, and --resume indeed
    # cannot make it again.
    first = run / "episodes.parquet" / "part-00000.parquet"
    first.write_bytes(first.read_bytes()[:100])
    line = report_error()
    assert f"every checkpoint of {run} covers it, so its records cannot be made again" in line
    assert (
        "restore episodes.parquet/part-00000.parquet from a copy" in line and "--overwrite" in line
    )
    with pytest.raises(RunDirError, match="no checkpoint .* can be verified"):
        run_experiment(config, out=run, resume=True)
