"""Config, suite and schedule files are read as text a person wrote: regular files only, no
binary content or control characters (named by position), errors that never echo a file's
content beyond the key at fault, and an empty config refused rather than taken as all
defaults."""

from __future__ import annotations

import json
import os

import pytest

from sao_online.benchmark import SuiteError, plan_tier
from sao_online.cli import main
from sao_online.config import ConfigError, load_config
from sao_online.drift_schedules import ScheduleError, load_schedule
from sao_online.util.safe_yaml import YamlInputError, load_yaml_text, read_yaml_file

SECRET = "s3cr3t-HASH-e8Dq0"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\nb: c\x00d\n", "binary content (a NUL byte) at line 2, column 5; not a text file"),
        ("a: \x01\n", "control character U+0001 at line 1, column 4"),
        ("a: 1\n\x1b[31mb: 2\n", "control character U+001B at line 2, column 1"),
    ],
)
def test_control_characters_are_named_by_position(text, message):
    with pytest.raises(YamlInputError) as caught:
        load_yaml_text(text, "cfg.yaml")
    assert str(caught.value) == f"cfg.yaml: {message}" or message in str(caught.value)


def test_a_set_value_with_a_control_character_is_one_line(capsys):
    assert main(["run", "smoke", "--set", "experiment=a\x01b", "--dry-run"]) == 2
    assert _one_line(capsys).endswith(
        "error: --set experiment: control character U+0001 at line 1, column 2; configs are "
        "plain text (remove it)"
    )


def test_files_that_are_not_text_or_not_regular_are_refused(tmp_path):
    binary = tmp_path / "weights.yaml"
    binary.write_bytes(b"model:\n  name: \xff\xfe\n")
    with pytest.raises(YamlInputError, match=r"not UTF-8 text \(byte 0xff at line 2, column 9\)"):
        read_yaml_file(binary, "config file")
    with pytest.raises(YamlInputError, match="a folder; a config file must be a regular file"):
        read_yaml_file(tmp_path, "config file")
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # reading it would block until someone writes: never opened
    with pytest.raises(YamlInputError, match="not a regular file"):
        read_yaml_file(fifo, "config file")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(str(fifo))
    huge = tmp_path / "huge.yaml"
    huge.write_text("a: " + "x" * (1 << 20) + "\n")
    with pytest.raises(YamlInputError, match="more than the 1048576 bytes allowed"):
        read_yaml_file(huge, "config file")


def test_proc_files_and_devices_are_one_line(capsys):
    assert main(["run", "/proc/self/environ", "--dry-run"]) == 2
    assert "binary content (a NUL byte) at line 1" in _one_line(capsys)
    assert main(["run", "/dev/zero", "--dry-run"]) == 2
    assert "/dev/zero: not a regular file" in _one_line(capsys)


def test_an_error_never_echoes_a_files_content(tmp_path, capsys):
    shadow = tmp_path / "shadow"
    shadow.write_text(f"root:$6${SECRET}:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n")
    assert main(["run", str(shadow), "--dry-run"]) == 2
    err = _one_line(capsys)
    assert SECRET not in err and "unknown key" in err and "not a name" in err
    repeated = tmp_path / "repeated"
    repeated.write_text(f"root:$6${SECRET}: 1\nroot:$6${SECRET}: 2\n")
    assert main(["run", str(repeated), "--dry-run"]) == 2
    err = _one_line(capsys)
    assert SECRET not in err and "line 2: duplicate key" in err and "not a name" in err
    suite = tmp_path / "suite.yaml"
    suite.write_text(json.dumps({"tasks": {"A": {"config": str(shadow)}}, "tiers": {"smoke": {}}}))
    with pytest.raises(SuiteError) as caught:
        plan_tier(suite, "smoke")
    assert SECRET not in str(caught.value)
    long_key = tmp_path / "long.yaml"
    long_key.write_text("experiment_name_that_goes_on_and_on_and_on_forever: 1\n")
    with pytest.raises(ConfigError, match=r"^experiment_name_that_goes_on_and_on_a\.\.\.: unknown"):
        load_config(str(long_key))


@pytest.mark.parametrize("content", ["", "# only a comment\n", "{}\n", "\n\n"])
def test_an_empty_config_is_refused_not_run_at_the_defaults(tmp_path, capsys, content):
    path = tmp_path / "mine.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match="mine.yaml: empty config"):
        load_config(str(path))
    assert main(["run", str(path)]) == 2  # not a 300-step warm start, then 4,500 episodes
    assert "empty config (no section set)" in _one_line(capsys)


def test_schedule_and_suite_files_are_checked_the_same_way(tmp_path):
    schedule = tmp_path / "schedule.yaml"
    schedule.write_bytes(b"parameters:\n  side: {kind: abrupt\x00}\n")
    with pytest.raises(ScheduleError, match="binary content"):
        load_schedule(schedule)
    suite = tmp_path / "suite.yaml"
    suite.write_bytes(b"tasks:\n  A: {config: demo}\x07\n")
    with pytest.raises(SuiteError, match="control character U\\+0007 at line 2"):
        plan_tier(suite, "smoke")
