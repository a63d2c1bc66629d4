"""A run on a disk that fills up, for real: a small tmpfs, mounted in a mount namespace of the
test's own (so nothing is left mounted), sized from a reference run so that the disk is full
when the run takes its lock, writes its first table part (pyarrow), or its first checkpoint's
tensors (safetensors). Each time the command exits with code 2 and one line naming the file;
once the tmpfs is grown the same command (``--resume`` where a run exists) finishes the run
with exactly the reference run's records. Full-disk errors from any other writer are caught by
the command line as one line too (``is_disk_full``)."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from built_once import built_once
from machine_time import without_machine_time
from tiny_model import model_section

CONFIG = {
    "model": model_section(),
    "rollout": {
        "batch_size": 8,
        "num_slots": 8,
        "max_turns": 1,
        "max_action_tokens": 8,
        "max_episode_tokens": 96,
    },
    "runtime": {"backend": "sync", "torch_threads": 1},
    "budget": {"episodes": 32},
    # Parts are written only at checkpoints: lock, config, parts, tensors, in that order.
    "logging": {"checkpoint_every": 2, "flush_every": 1000, "transcripts_every": 0},
}
PAGE = os.sysconf("SC_PAGE_SIZE")

#: Mounts a tmpfs of $SIZE bytes on $1, fills $FILL bytes, runs the command, grows the tmpfs,
#: runs it again (with --resume once the run has its config), and copies the run out.
SCRIPT = r"""
set -u
mount -t tmpfs -o "size=$SIZE" tmpfs "$1" || exit 99
[ "$FILL" = 0 ] || head -c "$FILL" /dev/zero > "$1/filler" 2>/dev/null
"$SAO" run "$CONFIG" --out "$1/run" > /dev/null 2> "$OUT/first.err"
echo $? > "$OUT/first.rc"
rm -f "$1/filler"
mount -o remount,size=64m "$1" || exit 98
again=""; [ -f "$1/run/config.yaml" ] && again="--resume"
"$SAO" run "$CONFIG" --out "$1/run" $again > /dev/null 2> "$OUT/second.err"
echo $? > "$OUT/second.rc"
cp -a "$1/run" "$OUT/run"
"""


def private_mounts() -> list[str] | None:
    """The ``unshare`` prefix that lets this process mount a tmpfs of its own, or None."""
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--user", "-r", "-m"]
    probe = subprocess.run(
        [*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True
    )
    return prefix if probe.returncode == 0 else None


def pages(path: Path) -> int:
    return -(-path.stat().st_size // PAGE)


def table(run: Path, name: str) -> pd.DataFrame:
    parts = sorted((run / f"{name}.parquet").glob("part-*.parquet"))
    frame = pd.concat(pd.read_parquet(part) for part in parts)
    frame = without_machine_time(frame)
    key = "version" if name == "updates" else "episode"
    return frame.sort_values(key).reset_index(drop=True)


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run every disk-full case resumes to: run once per session."""

    def run(folder: Path) -> None:
        config = folder / "config.yaml"
        config.write_text(yaml.safe_dump(CONFIG))
        command = [str(Path(sys.executable).parent / "sao-online"), "run", str(config)]
        subprocess.run(
            [*command, "--out", str(folder / "run")], check=True, capture_output=True, timeout=600
        )

    return built_once(tmp_path_factory, "disk-full-reference", run) / "run"


@pytest.mark.e2e
@pytest.mark.parametrize("full_at", ["lock", "table part", "checkpoint"])
def test_a_full_disk_is_one_line_naming_the_file_and_resume_is_exact(tmp_path, reference, full_at):
    prefix = private_mounts()
    if prefix is None:
        pytest.skip("cannot mount a tmpfs here (needs root or unprivileged user namespaces)")
    # Pages the run writes before the write that is to fail (lock and config: a page each).
    before = {
        "lock": 0,
        "table part": 2,
        "checkpoint": 2
        + pages(reference / "episodes.parquet" / "part-00000.parquet")
        + pages(reference / "updates.parquet" / "part-00000.parquet"),
    }[full_at]
    size = 64 * PAGE
    fill = size - (before + 1) * PAGE  # one page more: less than the failing write needs
    assert pages(reference / "episodes.parquet" / "part-00000.parquet") > 1
    assert pages(next(reference.glob("checkpoints/step-*/tensors.safetensors"))) > 64
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    environment = {
        **os.environ,
        "SIZE": str(size),
        "FILL": str(fill if full_at != "lock" else size),
        "SAO": str(Path(sys.executable).parent / "sao-online"),
        "CONFIG": str(config),
        "OUT": str(tmp_path),
        "OMP_NUM_THREADS": "1",
    }
    subprocess.run(
        [*prefix, "sh", "-c", SCRIPT, "sh", str(mount_point)],
        env=environment,
        check=True,
        timeout=900,
    )
    first = (tmp_path / "first.err").read_text()
    errors = [
        line
        for line in re.split(r"[\r\n]", first)
        if line.strip() and not line.startswith(("sao seed", "sao-online run: warning: "))
    ]
    assert (tmp_path / "first.rc").read_text().strip() == "2", first
    assert len(errors) == 1 and "Traceback" not in first, first
    named = {
        "lock": str(mount_point / "run" / ".lock"),
        "table part": str(mount_point / "run" / "episodes.parquet" / "part-00000.parquet"),
        "checkpoint": str(mount_point / "run" / "checkpoints" / "step-000002"),
    }[full_at]
    assert errors[0].startswith(f"sao-online run: error: disk full: could not write {named} ")
    assert (tmp_path / "second.rc").read_text().strip() == "0", (
        tmp_path / "second.err"
    ).read_text()
    for name in ("episodes", "updates"):
        pd.testing.assert_frame_equal(table(tmp_path / "run", name), table(reference, name))
    # Nothing half-written was left behind by the failed write.
    assert not list((tmp_path / "run").rglob(".*.tmp"))


def test_every_writers_way_of_saying_it_is_recognised(tmp_path):
    from safetensors import SafetensorError

    from sao_online.rundir.disk_full import DiskFullError, is_disk_full, reporting_a_full_disk

    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_disk_full(OSError(28, "Error writing bytes to file. Detail: [errno 28] No space"))
    assert is_disk_full(
        SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    )
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    partial = tmp_path / ".part-00000.parquet.tmp"
    partial.write_text("half")
    expected = r"disk full: could not write .*part-00000.parquet "
    with (
        pytest.raises(DiskFullError, match=expected),
        reporting_a_full_disk(tmp_path / "part-00000.parquet", partial),
    ):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert not partial.exists()
    # Anything else passes through unchanged.
    with pytest.raises(PermissionError), reporting_a_full_disk(tmp_path / "x", partial):
        raise PermissionError(errno.EACCES, "Permission denied")


def test_a_full_disk_names_the_file_everywhere_and_advises_what_is_true(tmp_path, monkeypatch):
    from sao_online.benchmark.results import write_json_atomically
    from sao_online.rundir import runlog
    from sao_online.rundir.disk_full import START_ADVICE, DiskFullError, describe_disk_full

    # Another writer's error: the file when it carries one, else said to be unknown.
    named = OSError(errno.ENOSPC, "No space left on device", "/data/bench/results/runs.csv")
    assert describe_disk_full(named) == (
        "disk full: could not write /data/bench/results/runs.csv (no space left on its disk)"
    )
    assert describe_disk_full(OSError(errno.ENOSPC, "No space left on device")) == (
        "disk full: No space left on device (a write failed; the file is not known)"
    )

    # The benchmark's own writers name their file.
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("json.dump", full)
    with pytest.raises(DiskFullError, match=r"could not write .*benchmark.json .*--resume"):
        write_json_atomically(tmp_path / "results" / "benchmark.json", {"a": 1})
    assert not list((tmp_path / "results").iterdir())  # nothing half-written
    monkeypatch.undo()

    # A new run's config.yaml: nothing to --resume yet, so the advice says to run it again.
    def no_room(path, text, advice=None):
        raise DiskFullError(
            f"disk full: could not write {path} (no space left on its disk); {advice}"
        )

    monkeypatch.setattr(runlog, "write_text_atomically", no_room)
    with pytest.raises(DiskFullError) as caught:
        runlog.RunLog.create(tmp_path / "run", {"seed": 0})
    assert str(caught.value).endswith(START_ADVICE) and "--resume" not in str(caught.value)
