"""The package as a user gets it: built into a wheel, installed (not editable) into a fresh
virtual environment, run from a folder that has no ``configs/`` in it: a bundled config by
name, then a new user's path with a task, a method and a suite of their own (the method raises
once, its traceback is found in the run folder, it is fixed and the benchmark continues; edited
again, the kept results are refused), and a report.

The new environment gets its dependencies (torch, transformers, ...) from this one through a
``.pth`` line, added after the wheel is installed with ``--no-deps --no-index``: nothing is
downloaded and pip never sees, let alone replaces, the torch build installed here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from tiny_model import model_section, rollout_section
from user_modules import coin_task

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = (".venv", ".git", "runs", "build", "*.egg-info", "__pycache__", ".*_cache")

#: A drifting task of the user's own: call heads or tails; which side pays drifts.
COINS = coin_task("coins")

#: A method of the user's own: REINFORCE with a running-mean baseline and PPO clipping; the
#: first version crashes at its second update, as a bug would.
METHOD = """
from sao_online.algorithms import Method, PPOClip, RunningMeanAdvantage


class Clipped(PPOClip):
    calls = 0

    def __call__(self, logprobs, batch, advantages):
        Clipped.calls += 1
        if BUGGY and Clipped.calls == 2:
            return logprobs.stats
        return super().__call__(logprobs, batch, advantages)


def make(cfg, max_action_tokens):
    return Method(name="mine", group_size=1, estimator=RunningMeanAdvantage(window=32),
                  objective=Clipped(eps_low=0.2, eps_high=0.2))
"""

SUITE = {
    "suite": "mine",
    "methods": ["mine:make"],
    "tasks": {
        "Coins": {
            "config": {
                "env": {"id": "coins:coins/CoinCall-v0"},
                "schedule": {
                    "parameters": {
                        "side": {"kind": "abrupt", "values": ["heads", "tails"], "at": [0, 16]}
                    }
                },
                "model": model_section(),
                "rollout": rollout_section(),
                "runtime": {"backend": "sync"},
                "budget": {"episodes": 32},
                "logging": {"checkpoint_every": 0},
            }
        }
    },
    "tiers": {"smoke": {"seeds": 1}},
}


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT, ".hypothesis"))
    try:
        import setuptools

        isolation = [] if int(setuptools.__version__.split(".")[0]) >= 68 else None
    except ImportError:
        isolation = None
    # The build backend from this environment when it has one (no download at all).
    flags = ["--no-build-isolation", "--no-index"] if isolation is not None else []
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *flags, "-w", "dist", "./source"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    [wheel] = (tmp_path / "dist").glob("sao_online-*.whl")
    return wheel


def fresh_environment(tmp_path: Path, wheel: Path) -> Path:
    """A virtual environment with the wheel installed; returns its ``bin`` folder."""
    home = tmp_path / "venv"
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        + ["--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "dependencies_from_the_test_environment.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    return home / "bin"


def test_a_wheel_in_a_fresh_environment_runs_a_bundled_config_and_a_new_users_path(tmp_path):
    wheel = build_wheel(tmp_path)
    bin_dir = fresh_environment(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "SAO_ONLINE_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }

    def cli(*args: str, code: int = 0) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(bin_dir / "sao-online"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == code, (args, done.stderr[-3000:])
        assert "Traceback" not in done.stderr or code == 0, done.stderr[-3000:]
        return done

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sao_online; print(sao_online.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv")  # the wheel's copy, not this checkout
    assert cli("--version").stdout.strip().startswith("sao-online ")
    assert "smoke " in cli("configs", "list").stdout

    # A bundled config by name: the run lands under ./runs as the config's logging.out says.
    summary = cli(
        "run",
        "smoke",
        "--threads",
        "1",
        "--set",
        "budget.episodes=16",
        "--set",
        "model.warm_start_steps=4",
    ).stdout
    assert json.loads(summary)["episodes"] == 16
    assert (elsewhere / "runs" / "smoke" / "sao" / "seed-0" / "episodes.parquet").is_dir()

    # The README's form, configs/NAME.yaml, works too, and a copy brings its schedule along.
    cli("schedules", "show", "configs/schedules/style_shift_demo.yaml")
    cli("configs", "copy", "demo")
    assert (elsewhere / "demo.yaml").is_file()
    assert "1000" in cli("schedules", "show", "schedules/style_shift_demo.yaml").stdout

    # A new user's path: a task, a method and a suite of their own, the suite's smoke tier.
    (elsewhere / "coins.py").write_text(COINS)
    method = elsewhere / "mine.py"
    method.write_text("BUGGY = True\n" + METHOD)
    (elsewhere / "mine.yaml").write_text(json.dumps(SUITE))
    bench = ["benchmark", "--suite", "mine.yaml", "--out", "bench", "--reps", "100"]
    failed = cli(*bench, code=2).stderr
    run_dir = elsewhere / "bench" / "runs" / "Coins" / "mine" / "seed-0"
    assert (
        "1 run(s) failed" in failed and "AttributeError: 'Tensor' object has no attribute" in failed
    )
    assert f"(traceback: {Path('bench/runs/Coins/mine/seed-0/error.txt')})" in failed
    evidence = (run_dir / "error.txt").read_text()
    assert "Traceback (most recent call last)" in evidence and "logprobs.stats" in evidence
    assert (run_dir / "config.yaml").is_file()  # what it logged is kept
    # Fixed: the benchmark continues, the failed run started again as the new code.
    method.write_text("BUGGY = False\n" + METHOD)
    fixed = cli(*bench, "--resume").stderr
    assert "failed before: starting it again (its code changed: module mine (mine.py)" in fixed
    assert (run_dir / "error.previous.txt").is_file() and not (run_dir / "error.txt").exists()
    card = (elsewhere / "bench" / "scorecard.md").read_text()
    assert "| mine:make |" in card  # the user's code in the provenance
    assert (elsewhere / "bench" / "figures" / "recovery_grid.pdf").is_file()
    cli("report", "bench/runs/Coins", "--dpi", "80")
    assert (elsewhere / "bench" / "runs" / "Coins" / "report" / "report.md").is_file()
    # Edited once more, the module is not the one the kept results ran: refused, named.
    method.write_text("BUGGY = False  # tuned\n" + METHOD)
    refused = cli(*bench, "--resume", code=2).stderr
    assert "ran other code than this benchmark runs (module mine (mine.py): source" in refused


def test_every_package_folder_is_in_the_wheel():
    # The packages are listed by hand in pyproject.toml (the top-level folders map into
    # sao_online); a subpackage missing there would import in this checkout and be absent
    # from the wheel.
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *relative)))
    assert found - listed == set(), "add these to [tool.setuptools] packages"
