"""What the lite tier's runs exercised, read from their run directories: ``runs.csv``.

Usage: python collect.py [--over runs.csv] SEED_SET=BENCHMARK_FOLDER [...] > new.csv

``--over`` keeps a collected file's rows, except those of the seed sets and tasks collected now:
a task measured again (pooled with ``sao-online benchmark merge --task-from``) replaces its rows.

A benchmark folder keeps its runs under ``runs/<task>/<method>/seed-<k>/``; each run's
``updates.parquet`` records, per update, the fraction of action tokens DIS masked below and
above its bounds, the largest importance ratio, the trained tokens' staleness and whether the
update trained the critic only. One row per run: whether DIS and bounded staleness did anything
in it, which a result about them needs before it can be cited.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def _updates(run: Path) -> pd.DataFrame:
    parts = sorted((run / "updates.parquet").glob("part-*.parquet"))
    if not parts:
        raise ValueError(f"{run}: no updates.parquet parts")
    return pd.concat((pd.read_parquet(part) for part in parts), ignore_index=True)


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series(dtype=float)


def run_row(seed_set: str, run: Path) -> dict:
    updates = _updates(run)
    masked = _column(updates, "charts/masked_below_fraction") + _column(
        updates, "charts/masked_above_fraction"
    )
    tokens = _column(updates, "charts/num_action_tokens")
    critic_only = _column(updates, "charts/critic_only_step").fillna(0)
    return {
        "seed_set": seed_set,
        "task": run.parents[1].name,
        "method": run.parent.name,
        "seed": int(run.name.removeprefix("seed-")),
        "updates": len(updates),
        "critic_only_updates": int(critic_only.sum()),
        "dis_updates": int(masked.notna().sum()),
        "masked_token_fraction_max": float(masked.max()) if masked.notna().any() else None,
        "masked_tokens": (
            float((masked * tokens).sum()) if masked.notna().any() and len(tokens) else None
        ),
        "ratio_max": float(_column(updates, "charts/ratio_max").max())
        if "charts/ratio_max" in updates
        else None,
        "staleness_max": float(_column(updates, "staleness/max").max()),
    }


def main(arguments: list[str]) -> int:
    kept = pd.DataFrame()
    if arguments[:1] == ["--over"]:
        if len(arguments) < 2:
            raise SystemExit("collect.py: --over needs a runs.csv")
        kept, arguments = pd.read_csv(arguments[1], dtype={"seed_set": str}), arguments[2:]
    rows = []
    for argument in arguments:
        seed_set, _, folder = argument.partition("=")
        if not folder:
            raise SystemExit(f"collect.py: expected SEED_SET=FOLDER, got {argument!r}")
        runs = sorted(Path(folder).glob("runs/*/*/seed-*"))
        if not runs:
            raise SystemExit(f"collect.py: {folder} holds no runs/<task>/<method>/seed-<k>")
        rows += [run_row(seed_set, run) for run in runs]
    new = pd.DataFrame(rows)
    if len(kept):
        replaced = set(zip(new["seed_set"], new["task"]))
        keep = [pair not in replaced for pair in zip(kept["seed_set"], kept["task"])]
        new = pd.concat([kept[keep], new], ignore_index=True)
        new = new.sort_values(["seed_set", "task", "method", "seed"], kind="stable")
    new.to_csv(sys.stdout, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
