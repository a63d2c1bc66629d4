"""What ``sao-online compare`` prints when it ends: a short results table and the next command.

The table has one row per method and one column per phase: the mean reward over the phase, and
in brackets the mean over its last quarter (where the phase ended up: after a shift, how far the
method re-adapted), each averaged over seeds. The report (``sao-online report``) has the
intervals, the recovery times and the verdict; the summary only says what the runs did.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

#: The share of a phase (its last episodes) averaged into the "end" value.
END_SHARE = 0.25


def phase_rewards(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean reward per method and phase over the whole phase and over its last quarter.

    Args:
        episodes: from :func:`~sao_online.analysis.load_runs` (``method``, ``seed``, ``phase``,
            ``world_time``, ``reward``; dropped episodes are left out).

    Returns:
        Columns ``method``, ``phase``, ``seeds``, ``mean`` and ``end``: per-seed means, then
        their mean over seeds.
    """
    if "dropped" in episodes:
        episodes = episodes[~episodes["dropped"].astype(bool)]
    rows = []
    for (method, seed, phase), run in episodes.groupby(["method", "seed", "phase"], sort=False):
        run = run.sort_values("world_time")
        tail = run.tail(max(1, int(round(len(run) * END_SHARE))))
        rows.append(
            {
                "method": method,
                "seed": seed,
                "phase": int(phase),
                "mean": float(run["reward"].mean()),
                "end": float(tail["reward"].mean()),
            }
        )
    per_seed = pd.DataFrame(rows, columns=["method", "seed", "phase", "mean", "end"])
    return (
        per_seed.groupby(["method", "phase"], sort=False)
        .agg(seeds=("seed", "nunique"), mean=("mean", "mean"), end=("end", "mean"))
        .reset_index()
    )


def _phase_titles(episodes: pd.DataFrame, phases: list[int]) -> dict[int, str]:
    names: list[str] = []
    for info in episodes.attrs.get("runs", {}).values():
        names = list(info.get("phase_names") or [])
        break
    return {
        phase: f"phase {phase}: {names[phase]}"
        if phase < len(names) and names[phase] != f"phase {phase}"
        else f"phase {phase}"
        for phase in phases
    }


def format_table(rows: list[list[str]]) -> str:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    )


def compare_summary(experiment_dir: str | Path) -> str:
    """The lines ``compare`` ends with: runs folder, results per method and phase, next step."""
    from sao_online.analysis import load_runs

    experiment_dir = Path(experiment_dir)
    episodes = load_runs([experiment_dir])
    lines = [f"runs in {experiment_dir}"]
    if len(episodes):
        table = phase_rewards(episodes)
        phases = sorted(table["phase"].unique())
        titles = _phase_titles(episodes, phases)
        rows = [["method", "seeds", *(titles[phase] for phase in phases)]]
        for method, group in table.groupby("method", sort=False):
            by_phase = group.set_index("phase")
            rows.append(
                [
                    str(method),
                    str(int(group["seeds"].max())),
                    *(
                        f"{by_phase.loc[p, 'mean']:.2f} (end {by_phase.loc[p, 'end']:.2f})"
                        if p in by_phase.index
                        else "-"
                        for p in phases
                    ),
                ]
            )
        lines += [
            "",
            "Mean reward per phase over seeds (in brackets: the phase's last quarter):",
            format_table(rows),
        ]
        from sao_online.analysis.verdict import budget_warnings

        lines += [f"warning: {warning}" for warning in budget_warnings(episodes)]
    lines += [
        "",
        f"Next: sao-online report {experiment_dir}   (recovery times, intervals and the "
        f"verdict, in {experiment_dir / 'report'})",
    ]
    return "\n".join(lines)
