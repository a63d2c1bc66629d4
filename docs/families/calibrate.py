"""Calibrate a task family: what its warm start earns in each regime, and what short runs learn.

For one experiment config (plus ``--set`` overrides) it

1. builds (or reuses) the config's warm start, as ``sao-online pretrain`` does;
2. samples the warm start in the regime each phase of the schedule starts with (``--episodes``
   seeded episodes; the same prompts for every regime's sample size), and reads the env's
   oracle return there: this is the ``frozen`` floor of the benchmark's normalized score, and
   whether the family pays for its shift (the warm start earning less after it);
3. optionally runs methods (``--methods sao,grpo``) for the config's budget and records each
   phase's mean reward, the mean over its last quarter, and the normalized score
   ``(phase mean - warm start) / (oracle - warm start)``;

and appends one JSON line with all of it, the commit and the package versions to ``--out``.
``python docs/families/tables.py`` renders the tables of ``docs/families/*.md`` from those lines.

Example (from the repository root; one torch thread, as measured here)::

    python docs/families/calibrate.py configs/grid_shift.yaml --family GridShift \\
        --methods sao,grpo --out docs/families/data/calibration.jsonl
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from sao_online.commands.policy_summary import behavior_summary
from sao_online.config import load_config
from sao_online.config.run_schedule import resolve_schedule
from sao_online.learning.warm_start import load_warm_start, schedule_phases, warm_start_path
from sao_online.rundir.episode_rows import oracle_reward
from sao_online.runtime.launch import run_experiment

ROOT = Path(__file__).resolve().parents[2]


def provenance() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch thread(s)",
    }


def regimes(config) -> list[dict]:
    schedule = resolve_schedule(config)
    return [
        {"phase": k, "start": start, "end": end, "theta": dict(schedule.at(start).theta)}
        for k, (start, end) in enumerate(schedule_phases(config))
    ]


def sample_warm_start(config, phases: list[dict], episodes: int) -> list[dict]:
    policy, tokenizer = load_warm_start(config)
    rows = []
    for phase in phases:
        summary = behavior_summary(
            config, policy, tokenizer, theta=phase["theta"], episodes=episodes, seed=0
        )
        rows.append(
            {
                **phase,
                "episodes": summary["episodes"],
                "warm_start_reward": summary["reward_mean"],
                "oracle_reward": oracle_reward(config, phase["theta"]),
                "behavior_shares": summary["behavior_shares"],
                "by_difficulty": summary.get("by_difficulty"),
            }
        )
    return rows


def run_method(config, method: str, seed: int, sampled: list[dict]) -> dict:
    overrides = [f"algorithm.name={method}", f"seed={seed}", "runtime.torch_threads=1"]
    with tempfile.TemporaryDirectory() as folder:
        run_config = load_config(config.to_dict(), overrides)
        started = time.perf_counter()
        run_experiment(run_config, out=Path(folder) / "run")
        seconds = time.perf_counter() - started
        episodes = pd.read_parquet(Path(folder) / "run" / "episodes.parquet")
    episodes = episodes[~episodes["dropped"]].sort_values("episode")
    phases = []
    for phase in sampled:
        rewards = episodes.loc[episodes["phase"] == phase["phase"], "reward"].to_numpy()
        floor, ceiling = phase["warm_start_reward"], phase["oracle_reward"]
        mean = float(rewards.mean()) if len(rewards) else float("nan")
        phases.append(
            {
                "phase": phase["phase"],
                "episodes": int(len(rewards)),
                "mean_reward": mean,
                "last_quarter_reward": float(rewards[-max(1, len(rewards) // 4) :].mean()),
                "normalized": (mean - floor) / (ceiling - floor) if ceiling != floor else None,
            }
        )
    return {"method": method, "seed": seed, "seconds": round(seconds, 1), "phases": phases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--family", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--methods", default="")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--note", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = load_config(args.config, args.set)
    started = time.perf_counter()
    folder = warm_start_path(config)
    phases = sample_warm_start(config, regimes(config), args.episodes)
    build = json.loads((folder / "warm_start.json").read_text())
    row = {
        "family": args.family,
        "config": args.config,
        "overrides": args.set,
        "note": args.note,
        "env": config.env.id,
        "model": f"{config.model.num_layers} x {config.model.hidden_size}",
        "warm_start": {
            "steps": build["steps"],
            "seconds": round(build["seconds"], 1),
            "loss_last": build["loss_last"],
        },
        "budget": config.budget.episodes,
        "regimes": phases,
        "runs": [
            run_method(config, method, seed, phases)
            for method in filter(None, args.methods.split(","))
            for seed in range(args.seeds)
        ],
        "provenance": provenance(),
    }
    row["seconds"] = round(time.perf_counter() - started, 1)
    with open(args.out, "a") as handle:
        handle.write(json.dumps(row, default=float) + "\n")
    print(json.dumps({k: row[k] for k in ("family", "warm_start", "seconds")}))
    for phase in phases:
        print(
            f"phase {phase['phase']}: warm start {phase['warm_start_reward']:.3f}, "
            f"oracle {phase['oracle_reward']:.3f}"
        )
    for run in row["runs"]:
        means = [round(p["mean_reward"], 3) for p in run["phases"]]
        scores = [p["normalized"] and round(p["normalized"], 2) for p in run["phases"]]
        print(run["method"], means, scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
