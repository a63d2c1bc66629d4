"""Fit the learning tests' warm starts again and keep them in ``tests/learning/kept/``.

Usage (from the repository root; a few minutes of CPU per family):

    python tests/learning/fit_warm_starts.py                 # every family
    python tests/learning/fit_warm_starts.py style_shift     # one (a test module's family)

Each family's warm start is fitted from its test module's ``SETTING`` and replaces the kept
one, with ``fitted.json``: what it was fitted for (the tests check it against their setting),
its weights id, the commit that fitted it (and whether tracked files differed from it), the
machine and the seconds it took. A warm start of
the config's own (``cached_warm_start``) is built in an empty cache, not taken from this
machine's. After a refit, run the family's learning test: its margin was set from runs of the
earlier weights.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from learning_kit import KEPT, RECORD, ROOT, LearningSetting, fit_warm_start, fitted_for

from sao_online.rundir.provenance import machine
from sao_online.util.cache import weights_id

HERE = Path(__file__).resolve().parent


def families() -> list[str]:
    """Every learning test module's family, e.g. ``style_shift``."""
    return sorted(
        path.stem.removeprefix("test_").removesuffix("_learns")
        for path in HERE.glob("test_*_learns.py")
    )


def refit(family: str, kept: Path = KEPT) -> Path:
    """Fit ``family``'s warm start and replace its kept folder; returns the folder."""
    module = importlib.import_module(f"test_{family}_learns")
    setting = LearningSetting(**module.SETTING)
    staging = Path(tempfile.mkdtemp(prefix=f"fit-{family}-"))
    cache = os.environ.get("SAO_ONLINE_CACHE")
    os.environ["SAO_ONLINE_CACHE"] = str(staging / "cache")  # the config's own: fitted anew
    try:
        started, cpu = time.perf_counter(), time.process_time()
        folder = fit_warm_start(setting, staging / family)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    finally:
        if cache is None:
            os.environ.pop("SAO_ONLINE_CACHE")
        else:
            os.environ["SAO_ONLINE_CACHE"] = cache

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    commit = git("rev-parse", "HEAD").strip()
    dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    record = {
        "fitted_for": fitted_for(setting),
        "weights": weights_id(folder),
        "commit": commit,
        "dirty": dirty,
        "machine": machine(),
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu_seconds, 1),
    }
    (folder / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    target = kept / family
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(folder, target)
    shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("families", nargs="*", help=f"default: all ({', '.join(families())})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.families) - set(families()))
    if unknown:
        parser.error(f"no learning test for {', '.join(unknown)}; known: {', '.join(families())}")
    for family in args.families or families():
        folder = refit(family)
        print(f"{family}: weights {weights_id(folder)} kept in {folder.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
