"""Measure the learning tests' settings over several seeds, and with learning switched off.

For each module of ``tests/learning/`` this fits its warm start anew (its ``SETTING``), then
trains each method with each seed, and again with the learning rate at 1e-12 (the policy
cannot move: the rise must be 0), and appends one JSON line per run to ``--out``: the module's
``SETTING`` it was measured with, the paired mean reward before and after, the rise, the
test's margin, the CPU and wall seconds of the warm start and of each run (with its two
evaluations; wall counts what CPU seconds miss, e.g. CodeShift's sandbox child processes), and
the machine's CPU (runs at one seed differ between CPUs). ``python docs/families/tables.py``
renders the tables of ``docs/families/learning_tests.md`` from those lines.

    python docs/families/learning_tests.py --seeds 0,1,2 \\
        --out docs/families/data/learning_tests.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from sao_online.rundir.provenance import machine

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "learning"


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default="", help="comma-separated test modules (all)")
    parser.add_argument("--methods", default="sao,grpo")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--no-learning-off",
        action="store_true",
        help="skip the runs at learning rate 1e-12 (to screen a setting; keep them for the data)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    harness = load_module(TESTS / "learning_kit.py", "learning_kit")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    cpu_model = machine()["cpu_model"]
    names = [n for n in args.modules.split(",") if n] or sorted(
        p.stem for p in TESTS.glob("test_*_learns.py")
    )
    for name in names:
        module = load_module(TESTS / f"{name}.py", name)
        setting = harness.LearningSetting(**module.SETTING)
        with tempfile.TemporaryDirectory() as folder:
            started, started_wall = time.process_time(), time.perf_counter()
            warm = harness.fit_warm_start(setting, Path(folder) / "warm-start")
            warm_seconds = time.process_time() - started
            warm_wall_seconds = time.perf_counter() - started_wall
            runs = [(m, s, None) for m in args.methods.split(",") for s in args.seeds.split(",")]
            if not args.no_learning_off:
                runs += [(m, "0", "1e-12") for m in args.methods.split(",")]
            for method, seed, lr in runs:
                if lr:
                    os.environ["SAO_LEARNING_TESTS_LR"] = lr
                else:
                    os.environ.pop("SAO_LEARNING_TESTS_LR", None)
                seeded = harness.LearningSetting(
                    **{**module.SETTING, "run": [*setting.run, f"seed={seed}"]}
                )
                started, started_wall = time.process_time(), time.perf_counter()
                result = harness.learn(seeded, warm, method, Path(folder) / f"{method}-{seed}")
                row = {
                    "module": name,
                    "method": method,
                    "seed": int(seed),
                    "learning_rate_override": lr,
                    "before": result.before,
                    "after": result.after,
                    "rise": result.rise,
                    "margin": module.MARGIN,
                    "warm_start_cpu_seconds": round(warm_seconds, 1),
                    "run_cpu_seconds": round(time.process_time() - started, 1),
                    "warm_start_wall_seconds": round(warm_wall_seconds, 1),
                    "run_wall_seconds": round(time.perf_counter() - started_wall, 1),
                    "training_wall_seconds": round(result.run_seconds, 1),
                    "setting": module.SETTING,
                    "commit": commit,
                    "cpu_model": cpu_model,
                }
                with open(args.out, "a") as handle:
                    handle.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    os.environ.pop("SAO_LEARNING_TESTS_LR", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
