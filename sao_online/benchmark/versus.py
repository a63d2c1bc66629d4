"""One method against others, family by family: is it better, worse, or within a stated size?

For an ablation (``sao`` against ``sao_running_mean``, ...) the aggregate over the suite is not
the question: the question is, on each family, whether the difference is real, and if it is not,
how large it could still be. Per family and in all families together (families as strata):

- P(base > other) with its 95% bootstrap interval, computed as for the leaderboard but on
  these per-phase units (the leaderboard averages a run's phases first);
- the mean paired score difference, base - other, over the (task, shift, seed) units both have
  (the same seed is the same prompts in the same order for both), with its 95% bootstrap
  interval;
- a verdict: ``<base> better`` or ``<other> better`` when the P interval excludes 1/2,
  otherwise ``not separated; the difference is within ±x``, where x is the end of the
  difference's interval farthest from 0, the largest effect the runs leave possible.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from sao_online.analysis.suite_metrics import improvement_interval, stratified_interval
from sao_online.benchmark.scorecard_tables import fixed
from sao_online.benchmark.scores import phase_units

ALL = "all (families as strata)"


def _paired(units: pd.DataFrame, base: str, other: str) -> pd.DataFrame:
    """Per (family, task, phase, seed) both methods scored: their scores and base - other."""
    keys = ["family", "task", "phase", "seed"]
    mine = units[units["method"] == base].set_index(keys)["score"].rename("base")
    theirs = units[units["method"] == other].set_index(keys)["score"].rename("other")
    both = pd.concat([mine, theirs], axis=1, join="inner").dropna().reset_index()
    return both.assign(difference=both["base"] - both["other"])


def _row(
    pairs: pd.DataFrame, families: list[str], names: tuple[str, str], reps: int, seed: int
) -> dict:
    strata = [pairs[pairs["family"] == f] for f in families]
    strata = [s for s in strata if len(s)]
    win = improvement_interval(
        [s["base"].to_numpy() for s in strata],
        [s["other"].to_numpy() for s in strata],
        reps=reps,
        seed=seed,
    )
    mean = stratified_interval(
        [s["difference"].to_numpy() for s in strata],
        lambda x: np.mean(x, axis=-1),
        reps=reps,
        seed=seed,
    )
    base, other = names
    if win.lower > 0.5:
        verdict = f"{base} better"
    elif win.upper < 0.5:
        verdict = f"{other} better"
    else:
        bound = fixed(max(abs(mean.lower), abs(mean.upper)))
        verdict = f"not separated; the difference is within ±{bound}"
    return {
        "pairs": len(pairs),
        f"P({base} > other) [95% CI]": (
            f"{fixed(win.point)} [{fixed(win.lower)}, {fixed(win.upper)}]"
        ),
        f"score difference, {base} - other [95% CI]": (
            f"{fixed(mean.point)} [{fixed(mean.lower)}, {fixed(mean.upper)}]"
        ),
        "verdict": verdict,
    }


def versus_table(
    scores: pd.DataFrame,
    base: str,
    others: Sequence[str],
    *,
    families: Sequence[str] | None = None,
    reps: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per other method, per family (``families``, default all) and in all of them: ``base``
    against it on the scores of the phases after a shift.

    ``scores`` is :func:`~sao_online.benchmark.scores.normalized_scores`' frame.

    Raises:
        ValueError: a method or family named that the scores do not have.
    """
    units = phase_units(scores)
    present = set(units["method"])
    for method in (base, *others):
        if method not in present:
            raise ValueError(
                f"versus: no scores of method {method!r} ({', '.join(sorted(present))})"
            )
    chosen = sorted(units["family"].unique()) if families is None else list(families)
    missing = sorted(set(chosen) - set(units["family"]))
    if missing:
        raise ValueError(f"versus: no scores of family {', '.join(missing)}")
    rows = []
    for other in others:
        pairs = _paired(units[units["family"].isin(chosen)], base, other)
        for family in chosen:
            mine = pairs[pairs["family"] == family]
            if len(mine):
                row = _row(mine, [family], (base, other), reps, seed)
                rows.append({"other": other, "family": family, **row})
        if len(chosen) > 1 and len(pairs):
            row = _row(pairs, chosen, (base, other), reps, seed)
            rows.append({"other": other, "family": ALL, **row})
    return pd.DataFrame(rows)
