"""The report's first words: which method re-adapted first after each shift, and how sure.

``verdict_table`` ranks the methods of each shift by the time their smoothed reward took to
reach an absolute level, a fraction of the oracle's reward (``time_to_oracle_fraction``): a
method that plateaued lower before the shift gets no head start from it. The relative measure
(back to a fraction of each run's own level before the shift, ``time_to_recovery``) is shown
beside it, never used to rank while the absolute one is defined. Intervals are called apart
only when both methods have at least :data:`MIN_SEEDS` seeds, the number below which the report
warns that its intervals describe the runs rather than the methods (``seed_warnings``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Below this many seeds per method the report warns that its intervals are not reliable, and
#: the verdict never calls two methods apart.
MIN_SEEDS = 3
#: The number of runs per method rliable (Agarwal et al., 2021) works with as a minimum.
RECOMMENDED_SEEDS = 5
#: The time that ranks methods (absolute level), and the one shown beside it (relative).
RANKING_METRIC = "time_to_oracle_fraction"
SECONDARY_METRIC = "time_to_recovery"


def _time(row: pd.Series | None) -> str:
    if row is None or not np.isfinite(row["iqm"]):
        return "-"
    text = f"{row['iqm']:.3g} [{row['lower']:.3g}, {row['upper']:.3g}]"
    censored = row.get("censored_fraction", np.nan)
    if np.isfinite(censored) and censored > 0:
        text += f", {censored:.0%} censored"
    return text


def _seeds(row: pd.Series) -> int:
    count = row.get("n_seeds", np.nan)
    return int(count) if np.isfinite(count) else 0


def _verdict(ranked: pd.DataFrame, min_seeds: int) -> tuple[str, str]:
    """(verdict, whether the first two intervals overlap) of a shift's ranked methods."""
    first = ranked.iloc[0]
    if first.get("censored_fraction", 0) >= 1:
        return "no method reached the level before the next shift", ""
    if len(ranked) == 1:
        return "one method only", ""
    second = ranked.iloc[1]
    overlap = bool(first["upper"] >= second["lower"])
    seeds = min(_seeds(first), _seeds(second))
    if overlap:
        return f"not separated from {second['method']}", "yes"
    if seeds < min_seeds:
        return (
            f"{first['method']} first in these runs; {seeds} seed{'s' if seeds != 1 else ''} "
            f"cannot separate methods (fewer than {min_seeds})",
            "no",
        )
    return f"{first['method']} first, intervals apart", "no"


def verdict_table(
    aggregated: pd.DataFrame,
    unit: str = "clock units",
    metric: str = RANKING_METRIC,
    secondary: str | None = SECONDARY_METRIC,
    min_seeds: int = MIN_SEEDS,
) -> pd.DataFrame:
    """Per experiment and shift: who reached the level first, the runner-up, and how sure.

    Args:
        aggregated: :func:`~sao_online.analysis.aggregate_recovery` output.
        unit: the unit of the times, for the column titles.
        metric: the time that ranks: ``time_to_oracle_fraction`` (an absolute level, the
            default) or ``time_to_recovery`` (relative to each run's level before the shift).
            A shift where it is undefined for every method (no oracle ceiling) is ranked by
            ``secondary`` instead, and the ``ranked by`` column says so.
        secondary: the time shown beside the ranking one for the same two methods (None: none).
        min_seeds: intervals are called apart only when both methods have this many seeds.

    Returns:
        Columns ``experiment``, ``shift``, ``ranked by``, ``first``, ``time (<unit>)``,
        ``runner-up``, ``runner-up time``, ``seeds`` (of the two, the fewer), ``intervals
        overlap``, ``verdict`` and, with ``secondary``, ``<secondary> (first / runner-up)``;
        one row per shift with a finite time for at least one method. A method whose runs were
        all censored never reached the level; it can still be the runner-up (it is slower than
        its censoring time).
    """
    finite = aggregated[np.isfinite(aggregated["iqm"].to_numpy(dtype=float))]
    verdicts = []
    for (experiment, change_point), shift_rows in finite.groupby(["experiment", "change_point"]):
        by_metric = dict(tuple(shift_rows.groupby("metric")))
        ranking, other = metric, secondary
        if ranking not in by_metric and secondary in by_metric:
            ranking, other = secondary, None
        if ranking not in by_metric:
            continue
        ranked = by_metric[ranking].sort_values(["iqm", "upper"]).reset_index(drop=True)
        first = ranked.iloc[0]
        second = ranked.iloc[1] if len(ranked) > 1 else None
        verdict, overlap = _verdict(ranked, min_seeds)
        row = {
            "experiment": experiment,
            "shift": f"{change_point}: {first.get('phase_before', '')} -> "
            f"{first.get('phase_after', '')}",
            "ranked by": _TITLES.get(ranking, ranking),
            # No cell left empty: a table in a paper says what an empty cell would leave open.
            "first": "none reached it" if verdict.startswith("no method") else first["method"],
            f"time ({unit})": _time(first),
            "runner-up": "none (one method)" if second is None else second["method"],
            "runner-up time": _time(second),
            "seeds": min(_seeds(first), _seeds(second)) if second is not None else _seeds(first),
            "intervals overlap": overlap or "n/a",
            "verdict": verdict,
        }
        if secondary is not None:
            beside = by_metric.get(other, pd.DataFrame()) if other else pd.DataFrame()
            row[f"{_TITLES.get(secondary, secondary)} (first / runner-up)"] = _beside(
                beside, first["method"], None if second is None else second["method"]
            )
        verdicts.append(row)
    return pd.DataFrame(verdicts)


_TITLES = {
    "time_to_oracle_fraction": "time to the oracle level",
    "time_to_recovery": "time back to own pre-shift level",
}


def _beside(rows: pd.DataFrame, first: str, second: str | None) -> str:
    """The secondary times of the ranked first and runner-up, ``"a / b"``."""
    if not len(rows):
        return "-"
    by_method = rows.set_index("method")
    times = [
        f"{by_method.loc[method, 'iqm']:.3g}" if method in by_method.index else "-"
        for method in ([first] if second is None else [first, second])
    ]
    return " / ".join(times)


class RunsWarning(UserWarning):
    """Runs that can be reported but compare unequal things (said where the command runs)."""


def budget_warnings(episodes: pd.DataFrame) -> list[str]:
    """Warnings when the runs of an experiment ran different numbers of episodes (one extended
    with ``--resume``, one stopped early): their means and curves compare unequal budgets.

    Each names the runs that differ from the experiment's most common length.

    Example:
        >>> frame = pd.DataFrame({"experiment": "x", "method": ["a"] * 5 + ["b"] * 3,
        ...                       "seed": [0, 0, 0, 1, 1, 0, 0, 0], "dropped": False})
        >>> budget_warnings(frame)[0][:60]
        'Runs of x ran different numbers of episodes: a seed 1 ran 2,'
    """
    warnings_found = []
    for experiment, runs in episodes.groupby("experiment", sort=True):
        counts = runs.groupby(["method", "seed"]).size()
        if counts.nunique() < 2:
            continue
        usual = int(counts.mode().max())
        odd = ", ".join(
            f"{method} seed {seed} ran {count:,}"
            for (method, seed), count in counts.items()
            if count != usual
        )
        warnings_found.append(
            f"Runs of {experiment} ran different numbers of episodes: {odd}, the others "
            f"{usual:,}. Their means and curves compare unequal budgets: continue the shorter "
            "ones to the same budget (--resume, --set budget.episodes=N) or report them apart."
        )
    return warnings_found


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
        "0.00 [0.00, 0.00]) says how these runs differ, not how the methods do; the verdict "
        f"calls no two methods apart below {MIN_SEEDS} seeds, and {RECOMMENDED_SEEDS} or more "
        "per method are needed before reading the intervals as a result."
    ]
