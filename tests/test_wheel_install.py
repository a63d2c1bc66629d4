"""The package as a user gets it: built into a wheel, installed (not editable) into a fresh
virtual environment, run from a folder that has no ``configs/`` in it.

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

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = (".venv", ".git", "runs", "build", "*.egg-info", "__pycache__", ".*_cache")


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


def test_a_wheel_in_a_fresh_environment_runs_a_bundled_config_by_name(tmp_path):
    wheel = build_wheel(tmp_path)
    bin_dir = fresh_environment(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "SAO_ONLINE_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }

    def cli(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(bin_dir / "sao-online"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (args, done.stderr[-3000:])
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
