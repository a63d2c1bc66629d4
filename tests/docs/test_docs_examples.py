"""Every code example of the README and the documentation pages, run or checked as a user
would use it.

- ``python`` blocks: the blocks of a page run in order as one script, in a process of their own
  in an empty folder (a script, so ``if __name__ == "__main__":`` guards work as for a user).
  An ``Output:`` block right after a python block must be what the script printed there.
- ``yaml`` blocks: a schedule (keys among ``clock``, ``seed``, ``parameters``) is loaded with
  ``load_schedule``, a benchmark suite (a ``suite`` key) read as the benchmark reads one, and
  anything else loaded as an experiment config with ``load_config``.
- ``bash`` blocks, command by command: ``sao-online`` commands are parsed by the real parser;
  those that only list or write small files run, in order, in one empty folder per block (so
  ``init task my_task`` and then ``envs --import my_task`` works); those that train, or read
  runs, get their config loaded with their ``--set`` overrides. ``make T``: T is a target of
  the Makefile; ``pip install`` extras exist; ``python FILE``: FILE exists. A config shown on
  the same page with ``experiment: NAME`` is there as ``NAME.yaml`` (as a reader saves it).
- A block right after ``<!-- not run: REASON -->`` is left out; right after
  ``<!-- run by tests/FILE.py -->``, that test module runs it (it must exist and name the page).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", flags=re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run: .+ -->")
RUN_BY = re.compile(r"<!-- run by (?P<test>tests/[\w/]+\.py) -->")
SHELL = ("bash", "sh", "console", "shell")
# sao-online commands that only list, print or write small files: run for real.
QUICK_COMMANDS = {"envs", "configs", "init", "schedules", "schema"}
# Tools a page may show that this project does not provide: not checked.
OTHER_TOOLS = {"tensorboard", "wandb", "ray", "docker", "git", "cd", "export", "for", "do", "done"}
SCHEDULE_KEYS = {"clock", "seed", "parameters"}


@dataclass
class Example:
    page: Path
    lang: str
    body: str
    line: int
    marker: str | None  # the comment right before the block, if any

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples(page: Path) -> list[Example]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1].strip()
        marker = before if before.startswith("<!--") else None
        line = text.count("\n", 0, match.start()) + 1
        found.append(Example(page, match["lang"], match["body"], line, marker))
    return found


def to_check(lang: tuple[str, ...]) -> list[Example]:
    """The examples in these languages that this module runs (not marked otherwise)."""
    chosen = []
    for page in PAGES:
        for example in examples(page):
            if example.lang in lang and not (
                example.marker
                and (NOT_RUN.fullmatch(example.marker) or RUN_BY.fullmatch(example.marker))
            ):
                chosen.append(example)
    return chosen


def pages_with(lang: tuple[str, ...]) -> list[Path]:
    return sorted({example.page for example in to_check(lang)})


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def user_env(folder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "SAO_ONLINE_CACHE": str(folder / "cache"),
        "PYTHONPATH": str(folder),
    }


# ----------------------------------------------------------------------------- python


def output_after(page: Path, example: Example) -> str | None:
    """The ``Output:`` block that follows ``example``, if one does."""
    text = page.read_text()
    start = sum(len(line) + 1 for line in text.split("\n")[: example.line - 1])
    rest = text[start:]
    fence_end = FENCE.match(rest).end()
    follow = re.match(r"\s*Output:\s*\n```[^\n]*\n(.*?)^```", rest[fence_end:], flags=re.M | re.S)
    return follow.group(1) if follow else None


@pytest.mark.e2e
@pytest.mark.parametrize("page", pages_with(("python",)), ids=page_id)
def test_python_examples_run_as_a_script(page, tmp_path):
    blocks = [example for example in to_check(("python",)) if example.page == page]
    marker = "=== sao-online docs example output {} ===\n"
    script = ""
    for index, example in enumerate(blocks):
        script += f"print({marker.format(index)!r}, end='')\n" + example.body + "\n"
    (tmp_path / "example.py").write_text(script)
    result = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=user_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (
        f"{blocks[0].where}: the page's python examples failed:\n" + (result.stderr[-4000:])
    )
    printed = result.stdout.split(marker.format(0), 1)[1]
    for index, example in enumerate(blocks):
        here, _, printed = printed.partition(marker.format(index + 1))
        shown = output_after(page, example)
        if shown is not None:
            assert here == shown, f"{example.where}: the example printed\n{here}\nnot\n{shown}"


# ----------------------------------------------------------------------------- yaml


@pytest.mark.parametrize("page", pages_with(("yaml",)), ids=page_id)
def test_yaml_examples_load(page, tmp_path):
    from sao_online.benchmark.suite import read_suite
    from sao_online.config import load_config
    from sao_online.drift_schedules import load_schedule

    for example in to_check(("yaml",)):
        if example.page != page:
            continue
        data = yaml.safe_load(example.body)
        assert isinstance(data, dict), f"{example.where}: not a mapping"
        if set(data) <= SCHEDULE_KEYS:
            load_schedule(data)
        elif "suite" in data:
            suite = tmp_path / "suite.yaml"
            suite.write_text(example.body)
            read_suite(suite)
        else:
            load_config(data)


# ----------------------------------------------------------------------------- shell


def commands(body: str) -> list[list[str]]:
    """The commands of a shell block: continuations joined, comments and redirections cut."""
    joined = body.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        for index, word in enumerate(words):
            if word in ("|", ">", ">>", "&&", ";") or word.endswith(";"):
                words = words[:index]
                break
        if words:
            found.append(words)
    return found


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), flags=re.M))


def package_extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"])


def check_commands(blocks: list[tuple[str, list[list[str]]]]) -> None:
    """Each block's ``sao-online`` commands in its folder: quick ones run, the others parsed
    and their config (with ``--set``) loaded. Runs in the process that calls it."""
    from sao_online.api import as_config
    from sao_online.cli import build_parser, main

    for folder, block in blocks:
        os.chdir(folder)
        for argv in block:
            print("sao-online", *argv, file=sys.stderr)
            if argv[0] == "--version" or argv[0] in QUICK_COMMANDS:
                code = main(argv)
                if code:
                    sys.exit(f"exit code {code}")
                continue
            args = build_parser().parse_args(argv)
            config = getattr(args, "config", None)
            if config is not None and not any("$" in word for word in argv):
                as_config(config, args.set)


# Quick commands register environments and import the user's modules: a process of their own.
DRIVER = """
import json, sys
sys.path.insert(0, {here!r})
from test_docs_examples import check_commands
check_commands(json.loads(sys.argv[1]))
"""


@pytest.mark.parametrize("page", pages_with(SHELL), ids=page_id)
def test_shell_examples_name_real_commands(page, tmp_path, monkeypatch):
    blocks = []
    for example in to_check(SHELL):
        if example.page != page:
            continue
        folder = tmp_path / f"block-{example.line}"
        blocks.append((str(folder), []))
        for words in commands(example.body):
            where = f"{example.where}: {' '.join(words)}"
            while re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):  # VAR=value before a command
                words = words[1:]
            program, *arguments = words
            if program == "sao-online":
                blocks[-1][1].append(arguments)
            elif program == "make":
                targets = [word for word in arguments if "=" not in word and word[0] != "-"]
                assert set(targets) <= makefile_targets(), f"{where}: no such make target"
            elif program == "python" and arguments[:2] == ["-m", "pytest"]:
                paths = [word for word in arguments[2:] if not word.startswith("-")]
                missing = [path for path in paths if not (ROOT / path.split("::")[0]).exists()]
                assert not missing, f"{where}: no such test path {missing}"
            elif program in ("pip", "python"):
                if program == "pip" or arguments[:2] == ["-m", "pip"]:
                    extras = re.findall(r"\[([\w,-]+)\]", " ".join(arguments))
                    wanted = {extra for group in extras for extra in group.split(",")}
                    assert wanted <= package_extras(), f"{where}: no such extra"
                else:
                    assert (ROOT / arguments[0]).is_file(), f"{where}: no such file"
            elif program.startswith(".") or "/" in program:  # a script of the repository
                assert (ROOT / program).is_file(), f"{where}: no such file"
            else:
                assert program in OTHER_TOOLS, f"{where}: unknown command {program!r}"
    blocks = [(folder, block) for folder, block in blocks if block]
    if not blocks:
        return
    configs = [yaml.safe_load(example.body) for example in to_check(("yaml",))]
    for folder, _ in blocks:
        Path(folder).mkdir()
        for example, config in zip(to_check(("yaml",)), configs):
            if example.page == page and isinstance(config.get("experiment"), str):
                (Path(folder) / f"{config['experiment']}.yaml").write_text(example.body)
    if not any(argv[0] in QUICK_COMMANDS for _, block in blocks for argv in block):
        monkeypatch.chdir(tmp_path)
        check_commands(blocks)  # parsing and loading configs only: here, which is quicker
        return
    driver = DRIVER.format(here=str(Path(__file__).resolve().parent))
    result = subprocess.run(
        [sys.executable, "-c", driver, json.dumps(blocks)],
        cwd=tmp_path,
        env=user_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{page_id(page)}: a sao-online example failed:\n" + (result.stderr[-4000:])
    )


# ----------------------------------------------------------------------------- markers


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_examples_left_out_say_why_or_who_runs_them(page):
    for example in examples(page):
        if example.marker is None:
            continue
        tested_by = RUN_BY.fullmatch(example.marker)
        if tested_by:
            test = ROOT / tested_by["test"]
            assert test.is_file(), f"{example.where}: {tested_by['test']} does not exist"
            assert page.name in test.read_text(), f"{example.where}: {test.name} never reads it"
        elif example.marker.startswith("<!-- not"):
            assert NOT_RUN.fullmatch(example.marker), f"{example.where}: say why it is not run"


def test_the_mechanism_finds_examples_of_every_kind():
    # A page set with no python, yaml or shell examples left would make the tests above vacuous.
    assert pages_with(("python",)) and pages_with(("yaml",)) and pages_with(SHELL)
    assert commands("a b \\\n  c  # note\nx > out.txt\nfor k in 1 2; do\n") == [
        ["a", "b", "c"],
        ["x"],
        ["for", "k", "in", "1"],
    ]
