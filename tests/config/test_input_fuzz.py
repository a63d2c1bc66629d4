"""Random mutations of every bundled config and suite, checked as a command would check them
(``run --dry-run``, ``benchmark --dry-run``): each case ends in exit 0 or in one error line with
exit 2, never a traceback and never a hang.

The mutations are what a careless edit or a damaged file does: a line deleted, doubled, cut or
indented, a value replaced by another kind (a negative, a huge number, NaN, a list, a path to a
device), a key renamed, bytes that are no text (NUL, control characters, invalid UTF-8), the
file cut short or emptied. Seeded: a failing case names its seed, and reruns the same.
"""

from __future__ import annotations

import random
import shutil
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest

from sao_online.cli import main
from sao_online.config.bundled import bundled_configs, configs_folder

#: Cases per bundled config and for the suite; with 7 configs, 280 + 60 cases.
CASES_PER_CONFIG = 40
SUITE_CASES = 60
#: A case that takes longer than this hangs (a dry run takes well under a second).
CASE_SECONDS = 60

VALUES = [
    "-1",
    "0",
    "1e309",
    "-1e309",
    ".nan",
    "99999999999999999999999",
    "''",
    "null",
    "[]",
    "{}",
    "[1, [2, [3]]]",
    "true",
    "abc",
    "/dev/zero",
    "/etc/passwd",
    "/proc/self/environ",
    "x:y/Z-v0",
    "'a: b'",
    "0.5",
    "3",
]


def _mutate(text: str, rng: random.Random) -> bytes:
    """One random damage of ``text`` (see the module)."""
    lines = text.splitlines(keepends=True) or ["\n"]
    index = rng.randrange(len(lines))
    kind = rng.randrange(11)
    if kind == 0:  # a line deleted
        del lines[index]
    elif kind == 1:  # a line doubled
        lines.insert(index, lines[index])
    elif kind == 2 and ":" in lines[index]:  # a value replaced
        key, _, _ = lines[index].partition(":")
        lines[index] = f"{key}: {rng.choice(VALUES)}\n"
    elif kind == 3:  # indentation changed
        lines[index] = (" " * rng.choice([1, 2, 4])) + lines[index].lstrip(" ")
    elif kind == 4 and ":" in lines[index]:  # a key renamed
        key, sep, rest = lines[index].partition(":")
        indent = key[: len(key) - len(key.lstrip())]
        lines[index] = f"{indent}{rng.choice(['colour', 'x', 'budget', 'a.b', '1'])}{sep}{rest}"
    elif kind == 5:  # cut short
        joined = "".join(lines)
        return joined[: rng.randrange(len(joined) + 1)].encode()
    elif kind == 6:  # a control character or NUL
        joined = "".join(lines)
        at = rng.randrange(len(joined) + 1)
        return (joined[:at] + rng.choice(["\x00", "\x01", "\x1b", "\x7f"]) + joined[at:]).encode()
    elif kind == 7:  # bytes that are no UTF-8
        raw = "".join(lines).encode()
        at = rng.randrange(len(raw) + 1)
        return raw[:at] + bytes(rng.randrange(128, 256) for _ in range(3)) + raw[at:]
    elif kind == 8:  # emptied, or only a comment
        return rng.choice([b"", b"# nothing\n", b"\n\n"])
    elif kind == 9:  # a number changed
        lines[index] = "".join(
            rng.choice(["0", "-5", "1e12", "2.5"]) if ch.isdigit() else ch for ch in lines[index]
        )
    else:  # a line of another file
        lines.insert(index, rng.choice(["root:x:0:0:root:/root:/bin/bash\n", "- a\n", "? x\n"]))
    return "".join(lines).encode()


@contextmanager
def _deadline(seconds: int, case: str):
    def hung(signum, frame):
        raise TimeoutError(f"{case}: no answer in {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _check_case(args: list[str], case: str, capsys) -> int:
    with _deadline(CASE_SECONDS, case):
        code = main(args)  # an exception here is a traceback: the test fails on it
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line and ": warning: " not in line]
    if code == 0:
        assert not lines, f"{case}: exit 0 with {lines}"
    else:
        assert code == 2, f"{case}: exit {code}: {err}"
        assert len(lines) == 1 and ": error: " in lines[0], f"{case}: {err!r}"
        assert "Traceback" not in err
    return code


@pytest.fixture
def config_copy(tmp_path):
    """The bundled configs and their schedules, copied to edit."""
    folder = tmp_path / "configs"
    shutil.copytree(configs_folder(), folder, ignore=shutil.ignore_patterns("__*", "*.json"))
    return folder


@pytest.mark.parametrize("name", sorted(bundled_configs()))
def test_damaged_configs_are_refused_in_one_line_or_run(name, config_copy, capsys, monkeypatch):
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(config_copy.parent / "cache"))
    original = (config_copy / f"{name}.yaml").read_text()
    codes = []
    for seed in range(CASES_PER_CONFIG):
        rng = random.Random(f"{name}-{seed}")
        path = config_copy / f"fuzz-{name}.yaml"
        path.write_bytes(_mutate(original, rng))
        codes.append(_check_case(["run", str(path), "--dry-run"], f"{name} seed {seed}", capsys))
    assert 2 in codes  # the mutations do damage


def test_damaged_suites_are_refused_in_one_line_or_planned(config_copy, capsys, monkeypatch):
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(config_copy.parent / "cache"))
    original = (config_copy / "suites" / "core.yaml").read_text()
    codes = []
    for seed in range(SUITE_CASES):
        rng = random.Random(f"core-{seed}")
        path = config_copy / "suites" / "fuzz-core.yaml"
        path.write_bytes(_mutate(original, rng))
        args = ["benchmark", "--suite", str(path), "--dry-run", "--out", str(config_copy / "out")]
        codes.append(_check_case(args, f"suite seed {seed}", capsys))
    assert codes.count(0) and codes.count(2)  # some still plan, some are refused
    assert not (config_copy / "out").exists()  # a dry run writes nothing


def test_the_mutations_are_seeded():
    text = Path(configs_folder() / "demo.yaml").read_text()
    assert _mutate(text, random.Random("a-1")) == _mutate(text, random.Random("a-1"))
