"""The report's first words: which method recovered first after each shift, and how sure.

``verdict_table`` reads the aggregated time to recovery (IQM and interval per method and shift)
and names, per shift, the method with the shortest IQM time, the runner-up, and whether their
intervals overlap (overlapping intervals: the data do not separate the two). ``seed_warnings``
says when there are too few seeds for the intervals to mean much.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Below this many seeds per method the report warns that its intervals are not reliable.
MIN_SEEDS = 3
#: The number of runs per method rliable (Agarwal et al., 2021) works with as a minimum.
RECOMMENDED_SEEDS = 5


def _time(row: pd.Series) -> str:
    text = f"{row['iqm']:.3g} [{row['lower']:.3g}, {row['upper']:.3g}]"
    censored = row.get("censored_fraction", np.nan)
    if np.isfinite(censored) and censored > 0:
        text += f", {censored:.0%} censored"
    return text


def verdict_table(
    aggregated: pd.DataFrame, unit: str = "clock units", metric: str = "time_to_recovery"
) -> pd.DataFrame:
    """Per experiment and shift: who recovered first, the runner-up, and whether it is clear.

    Args:
        aggregated: :func:`~sao_online.analysis.aggregate_recovery` output.
        unit: the unit of the times, for the column titles.
        metric: the time that decides: ``time_to_recovery`` (relative to each run's own level
            before the shift) or ``time_to_oracle_fraction`` (an absolute level, which does
            not flatter a method that plateaued lower before the shift).

    Returns:
        Columns ``experiment``, ``shift``, ``recovered first``, ``time (IQM [CI])``,
        ``runner-up``, ``runner-up time``, ``intervals overlap`` and ``verdict``; one row per
        shift with a finite time for at least one method. A method whose runs were all
        censored never recovered; it can still be the runner-up (it is slower than its
        censoring time).
    """
    rows = aggregated[
        (aggregated["metric"] == metric) & np.isfinite(aggregated["iqm"].to_numpy(dtype=float))
    ]
    verdicts = []
    for (experiment, change_point), group in rows.groupby(["experiment", "change_point"]):
        ranked = group.sort_values(["iqm", "upper"]).reset_index(drop=True)
        first = ranked.iloc[0]
        shift = f"{change_point}: {first.get('phase_before', '')} -> {first.get('phase_after', '')}"
        row = {
            "experiment": experiment,
            "shift": shift,
            "recovered first": first["method"],
            f"time ({unit})": _time(first),
            "runner-up": "",
            "runner-up time": "",
            "intervals overlap": "",
        }
        if first.get("censored_fraction", 0) >= 1:
            row["recovered first"] = ""
            row["verdict"] = "no method recovered before the next shift"
        elif len(ranked) == 1:
            row["verdict"] = "one method only"
        else:
            second = ranked.iloc[1]
            overlap = bool(first["upper"] >= second["lower"])
            row.update(
                {
                    "runner-up": second["method"],
                    "runner-up time": _time(second),
                    "intervals overlap": "yes" if overlap else "no",
                }
            )
            row["verdict"] = (
                f"not separated from {second['method']}"
                if overlap
                else f"{first['method']} first, intervals apart"
            )
        verdicts.append(row)
    return pd.DataFrame(verdicts)


def seed_warnings(episodes: pd.DataFrame) -> list[str]:
    """Warnings when a method has fewer than :data:`MIN_SEEDS` seeds in an experiment."""
    if not len(episodes):
        return []
    counts = episodes.groupby(["experiment", "method"])["seed"].nunique()
    few = counts[counts < MIN_SEEDS]
    if not len(few):
        return []
    listed = ", ".join(f"{method} ({count})" for (_, method), count in few.items())
    return [
        f"Too few seeds for the intervals: {listed}. With n seeds the bootstrap can only "
        "resample those n runs, so an interval (and a probability of improvement such as "
        "0.00 [0.00, 0.00]) says how these runs differ, not how the methods do; use at "
        f"least {RECOMMENDED_SEEDS} seeds per method before reading them as a result."
    ]
