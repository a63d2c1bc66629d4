"""The tables of ``docs/paper_regime.md``, generated from ``runs.csv`` and ``shifts.csv``.

Usage: python table.py          # rewrites every table between the page's markers

A table's opening marker names what it shows:

- ``<!-- paper-regime table: runtime SEED_SET -->``: per method, what the runtime did (staleness,
  DIS masking, the learner's busy share, virtual and real time), seed by seed;
- ``<!-- paper-regime table: recovery SEED_SET SHIFT -->``: per method, the reward before the
  shift, the episodes and the virtual seconds to half the oracle's reward after it, and the
  regret per episode over the phase, seed by seed (``+``: censored at the next shift).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "paper_regime.md"
END = "<!-- end paper-regime table -->"
MARKER = re.compile(
    r"(?P<open><!-- paper-regime table: (?P<kind>runtime|recovery) (?P<seed_set>\S+)"
    r"(?: (?P<shift>\d+))? -->\n).*?" + re.escape(END),
    re.DOTALL,
)
#: The order the page lists methods in (the demo's).
METHODS = ("sao", "sao_running_mean", "grpo_dis", "grpo")


def _values(values: pd.Series, digits: int, censored: pd.Series | None = None) -> str:
    marks = censored.astype(bool) if censored is not None else [False] * len(values)
    return ", ".join(
        f"{value:.{digits}f}" + ("+" if cut else "") for value, cut in zip(values, marks)
    )


def _chosen(frame: pd.DataFrame, seed_set: str, shift: int | None = None) -> pd.DataFrame:
    chosen = frame[frame["seed_set"].astype(str) == seed_set]
    if shift is not None:
        chosen = chosen[chosen["shift"] == shift]
    if chosen.empty:
        raise ValueError(f"no rows for seed set {seed_set}" + (f", shift {shift}" if shift else ""))
    return chosen


def _by_method(chosen: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    methods = [m for m in METHODS if m in set(chosen["method"])]
    return [(m, chosen[chosen["method"] == m].sort_values("seed")) for m in methods]


def runtime_table(runs: pd.DataFrame, seed_set: str) -> str:
    lines = [
        "| method | seeds | mean staleness | share at the bound | tokens DIS masked below / "
        "above (%) | learner busy | virtual minutes | real minutes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, group in _by_method(_chosen(runs, seed_set)):
        masked = ", ".join(
            f"{100 * below:.2f} / {100 * above:.2f}"
            for below, above in zip(group["masked_below"], group["masked_above"])
        )
        lines.append(
            f"| {method} | {', '.join(str(s) for s in group['seed'])} | "
            f"{_values(group['staleness_mean'], 2)} | {_values(group['share_at_bound'], 2)} | "
            f"{masked} | {_values(group['learner_busy_share'], 2)} | "
            f"{_values(group['virtual_seconds'] / 60, 1)} | "
            f"{_values(group['real_seconds'] / 60, 1)} |"
        )
    return "\n".join(lines)


def recovery_table(shifts: pd.DataFrame, seed_set: str, shift: int) -> str:
    lines = [
        "| method | seeds | reward before | episodes to 0.5 x oracle | virtual seconds to "
        "0.5 x oracle | regret / episode over the phase |",
        "|---|---|---|---|---|---|",
    ]
    for method, group in _by_method(_chosen(shifts, seed_set, shift)):
        lines.append(
            f"| {method} | {', '.join(str(s) for s in group['seed'])} | "
            f"{_values(group['reward_before'], 2)} | "
            f"{_values(group['episodes_to_half_oracle'], 0, group['episodes_censored'])} | "
            f"{_values(group['seconds_to_half_oracle'], 0, group['seconds_censored'])} | "
            f"{_values(group['regret_per_episode'], 2)} |"
        )
    return "\n".join(lines)


def render(page: str, runs: pd.DataFrame, shifts: pd.DataFrame) -> str:
    """``page`` with every marked table replaced by the one generated from the data."""

    def table(match: re.Match) -> str:
        if match["kind"] == "runtime":
            body = runtime_table(runs, match["seed_set"])
        else:
            body = recovery_table(shifts, match["seed_set"], int(match["shift"]))
        return f"{match['open']}{body}\n{END}"

    return MARKER.sub(table, page)


if __name__ == "__main__":
    runs, shifts = pd.read_csv(HERE / "runs.csv"), pd.read_csv(HERE / "shifts.csv")
    PAGE.write_text(render(PAGE.read_text(), runs, shifts))
    print(f"wrote {PAGE}")
