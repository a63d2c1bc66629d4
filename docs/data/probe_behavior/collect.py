"""What the calibration probes' policies did near the end of each phase, read from their runs.

Usage: python collect.py PROBE=BENCHMARK_FOLDER [PROBE=BENCHMARK_FOLDER ...] > runs.csv

A benchmark folder keeps its runs under ``runs/<task>/<method>/seed-<k>/``; each run's
``episodes.parquet`` records every episode's phase, reward, turns and ``behavior`` (the env's
label of what the episode did first: the tool name called, the answer format used). One row
per run, phase and behaviour, over the last quarter of the phase's episodes: the behaviour's
share, its episodes' mean reward and mean turns. They say why a probe's scores are what they
are (a choice learned but answers miscopied, a format kept after the shift).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def run_rows(probe: str, run: Path) -> list[dict]:
    episodes = pd.read_parquet(run / "episodes.parquet")
    episodes = episodes[~episodes["dropped"]]
    rows = []
    for phase, in_phase in episodes.groupby("phase"):
        last = in_phase.sort_values("episode").tail(max(1, len(in_phase) // 4))
        labels = last["behavior"].fillna("").replace("", "(none)")
        for behavior, part in last.groupby(labels):
            rows.append(
                {
                    "probe": probe,
                    "task": run.parents[1].name,
                    "method": run.parent.name,
                    "seed": int(run.name.removeprefix("seed-")),
                    "phase": int(phase),
                    "behavior": behavior,
                    "episodes": len(part),
                    "share": len(part) / len(last),
                    "reward_mean": float(part["reward"].mean()),
                    "turns_mean": float(part["num_turns"].mean()),
                }
            )
    return rows


def main(arguments: list[str]) -> int:
    rows = []
    for argument in arguments:
        probe, _, folder = argument.partition("=")
        if not folder:
            raise SystemExit(f"collect.py: expected PROBE=FOLDER, got {argument!r}")
        runs = sorted(Path(folder).glob("runs/*/*/seed-*"))
        if not runs:
            raise SystemExit(f"collect.py: {folder} holds no runs/<task>/<method>/seed-<k>")
        for run in runs:
            rows += run_rows(probe, run)
    pd.DataFrame(rows).to_csv(sys.stdout, index=False, float_format="%.4f")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
