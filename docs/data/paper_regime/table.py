"""The tables of ``docs/paper_regime.md``, generated from ``runs.csv`` and ``shifts.csv``.

Usage: python table.py          # rewrites every table between the page's markers, and the figure

A table's opening marker names what it shows:

- ``<!-- paper-regime table: runtime SEED_SET -->``: per method, what the runtime did (staleness,
  DIS masking, the learner's busy share, virtual and real time), seed by seed;
- ``<!-- paper-regime table: recovery SEED_SET SHIFT -->``: per method, the reward before the
  shift, the episodes and the virtual seconds to half the oracle's reward after it, and the
  regret per episode over the phase, seed by seed (``+``: censored at the next shift).

The figure ``docs/paper_regime_curves.png`` (from ``curves.csv``) draws each seed set's training
reward per method on the episodes axis and on the virtual-seconds axis side by side: the mean
over the set's seeds, and the range across them shaded.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
PAGE = HERE.parents[1] / "paper_regime.md"
FIGURE = HERE.parents[1] / "paper_regime_curves.png"
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
        "above (%) | learner updating / publishing | learner waiting for episodes / for the "
        "bound | virtual minutes | real minutes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, group in _by_method(_chosen(runs, seed_set)):
        masked = ", ".join(
            f"{100 * below:.2f} / {100 * above:.2f}"
            for below, above in zip(group["masked_below"], group["masked_above"])
        )
        busy = ", ".join(
            f"{update:.2f} / {publish:.2f}"
            for update, publish in zip(group["learner_busy_share"], group["publish_share"])
        )
        waits = ", ".join(
            f"{episodes:.2f} / {bound:.2f}"
            for episodes, bound in zip(
                group["learner_wait_episodes_share"], group["learner_wait_bound_share"]
            )
        )
        lines.append(
            f"| {method} | {', '.join(str(s) for s in group['seed'])} | "
            f"{_values(group['staleness_mean'], 2)} | {_values(group['share_at_bound'], 2)} | "
            f"{masked} | {busy} | {waits} | "
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


def figure(curves: pd.DataFrame, shifts: pd.DataFrame, seed_sets: list[str], path: Path) -> None:
    """Training reward per method against episodes and against virtual seconds, one row of two
    panels per seed set; dotted lines mark the shifts (on the seconds axis, each method's mean
    shift second, drawn in its colour)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = dict(zip(METHODS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(len(seed_sets), 2, figsize=(11, 3.4 * len(seed_sets)), squeeze=False)
    for row, seed_set in zip(axes, seed_sets):
        chosen = _chosen(curves, seed_set)
        for method, group in _by_method(chosen):
            by_bin = group.assign(bin=group.groupby("seed").cumcount()).groupby("bin")
            mean, low, high = by_bin.mean(numeric_only=True), by_bin.min(), by_bin.max()
            for axis, x in zip(row, ("episode", "second")):
                axis.plot(mean[x], mean["reward"], color=colours[method], label=method)
                axis.fill_between(
                    mean[x], low["reward"], high["reward"], color=colours[method], alpha=0.15
                )
            moved = _chosen(shifts, seed_set)
            for second in moved[moved["method"] == method].groupby("shift")["shift_second"].mean():
                row[1].axvline(second, color=colours[method], linestyle=":", linewidth=1)
        for episode in sorted(_chosen(shifts, seed_set)["shift_episode"].unique()):
            row[0].axvline(episode, color="grey", linestyle=":", linewidth=1)
        seeds = ", ".join(str(s) for s in sorted(chosen["seed"].unique()))
        row[0].set_title(f"seeds {seeds}: training reward per episode")
        row[1].set_title(f"seeds {seeds}: the same runs against virtual time")
        row[0].set_xlabel("episodes")
        row[1].set_xlabel("virtual seconds")
        for axis in row:
            axis.set_ylabel("reward (mean of 128 episodes)")
            axis.set_ylim(-0.02, 1.0)
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    runs, shifts = pd.read_csv(HERE / "runs.csv"), pd.read_csv(HERE / "shifts.csv")
    PAGE.write_text(render(PAGE.read_text(), runs, shifts))
    curves = pd.read_csv(HERE / "curves.csv")
    compared = sorted(s for s in curves["seed_set"].astype(str).unique() if s.startswith("set-"))
    figure(curves, shifts, compared, FIGURE)
    print(f"wrote {PAGE} and {FIGURE}")
