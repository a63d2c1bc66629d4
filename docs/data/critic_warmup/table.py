"""The tables of ``docs/critic_warmup.md``, generated from ``runs.csv`` (never typed).

Usage: python table.py          # rewrites every table between the page's markers

A table's opening marker names what it shows: ``<!-- warm-up table: FAMILY SEED_SET SHIFT -->``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "critic_warmup.md"
END = "<!-- end warm-up table -->"
MARKER = re.compile(
    r"(?P<open><!-- warm-up table: (?P<family>\S+) (?P<seed_set>\S+) (?P<shift>\d+) -->\n)"
    r".*?" + re.escape(END),
    re.DOTALL,
)


def _times(values: pd.Series, censored: pd.Series) -> str:
    return ", ".join(
        f"{value:.0f}" + ("+" if cut else "") for value, cut in zip(values, censored.astype(bool))
    )


def _levels(values: pd.Series) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


def shift_table(runs: pd.DataFrame, family: str, seed_set: str, shift: int) -> str:
    """One row per warm-up setting: the per-seed values at one shift, seeds in order."""
    chosen = runs[
        (runs["family"] == family)
        & (runs["seed_set"].astype(str) == seed_set)
        & (runs["shift"] == shift)
    ]
    if not len(chosen):
        raise ValueError(f"no runs for {family}, seed set {seed_set}, shift {shift}")
    lines = [
        "| critic-only updates (episodes) | seeds | reward before the shift | "
        "episodes to 0.5 x oracle | seconds to 0.5 x oracle | regret / episode over the phase |",
        "|---|---|---|---|---|---|",
    ]
    settings = chosen.groupby(["critic_warmup_steps", "warmup_episodes"])
    for (steps, episodes), group in sorted(settings, key=lambda item: -item[0][0]):
        group = group.sort_values("seed")
        seeds = ", ".join(str(seed) for seed in group["seed"])
        lines.append(
            f"| {steps} ({episodes}) | {seeds} | {_levels(group['reward_before'])} | "
            f"{_times(group['episodes_to_half_oracle'], group['episodes_censored'])} | "
            f"{_times(group['seconds_to_half_oracle'], group['seconds_censored'])} | "
            f"{_levels(group['regret_per_episode'])} |"
        )
    return "\n".join(lines)


def render(page: str, runs: pd.DataFrame) -> str:
    """``page`` with every marked table replaced by the one generated from ``runs``."""

    def table(match: re.Match) -> str:
        body = shift_table(runs, match["family"], match["seed_set"], int(match["shift"]))
        return f"{match['open']}{body}\n{END}"

    return MARKER.sub(table, page)


if __name__ == "__main__":
    PAGE.write_text(render(PAGE.read_text(), pd.read_csv(HERE / "runs.csv")))
    print(f"wrote {PAGE}")
