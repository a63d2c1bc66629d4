"""What a run exercised: how stale the episodes it trained on were, and how much of their
tokens its off-policy correction masked, clipped or truncated.

A benchmark of asynchrony claims more than a score: that its runs trained on stale data and
that the corrections it compares had something to correct. These numbers, kept with each run's
result, let the scorecard show that they did (a ``sync`` run trains on nothing stale, and a
correction that never fires is plain policy gradient):

- ``staleness_mean``, ``staleness_max``: of the episodes trained on (learner version at the
  update minus the oldest policy version among the episode's tokens);
- ``stale_share``: the share of those episodes at least one version stale;
- ``masked_fraction``: the share of action tokens given no gradient by a band (DIS, sequence-
  masked IS, a decoupled PPO weight cap: ``masked_below_fraction + masked_above_fraction``);
- ``clip_fraction``: the share clipped by a PPO-style objective; ``truncated_fraction``: the share
  whose importance weight token-level TIS truncated;
- ``effective_sample_size``: the mean of each update's normalized effective sample size of its
  weights.

The fractions are means over the run's policy updates weighted by each update's action tokens
(``charts/num_action_tokens``; plain means where a loss does not log it); a statistic the run's
loss never logs is None.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

EXERCISED_COLUMNS = [
    "staleness_mean",
    "staleness_max",
    "stale_share",
    "masked_fraction",
    "clip_fraction",
    "truncated_fraction",
    "effective_sample_size",
]


def _weighted_mean(values: pd.Series, weights: pd.Series | None) -> float | None:
    present = values.notna()
    if not present.any():
        return None
    if weights is None or not weights[present].notna().all() or weights[present].sum() <= 0:
        return float(values[present].mean())
    return float(np.average(values[present], weights=weights[present]))


def exercised(episodes: pd.DataFrame, updates: pd.DataFrame | None) -> dict[str, Any]:
    """The ``EXERCISED_COLUMNS`` of one run from its episodes and updates tables.

    Example:
        >>> episodes = pd.DataFrame({"staleness": [0, 2, 4, -1], "dropped": [False] * 4})
        >>> updates = pd.DataFrame({"charts/masked_below_fraction": [0.1, 0.0],
        ...                         "charts/masked_above_fraction": [0.0, 0.2],
        ...                         "charts/num_action_tokens": [10.0, 30.0]})
        >>> row = exercised(episodes, updates)
        >>> row["staleness_mean"], row["stale_share"], row["masked_fraction"]
        (2.0, 0.6666666666666666, 0.175)
    """
    row: dict[str, Any] = dict.fromkeys(EXERCISED_COLUMNS)
    trained = episodes["staleness"] >= 0 if "staleness" in episodes else None
    if trained is not None and "dropped" in episodes:
        trained &= ~episodes["dropped"].fillna(False).astype(bool)
    if trained is not None and trained.any():
        staleness = episodes.loc[trained, "staleness"].astype(float)
        row["staleness_mean"] = float(staleness.mean())
        row["staleness_max"] = int(staleness.max())
        row["stale_share"] = float((staleness >= 1).mean())
    if updates is None or not len(updates):
        return row
    weights = updates.get("charts/num_action_tokens")
    sides = [f"charts/masked_{side}_fraction" for side in ("below", "above")]
    present = [column for column in sides if column in updates]
    if present:
        masked = updates[present].sum(axis=1, min_count=1)
        row["masked_fraction"] = _weighted_mean(masked, weights)
    for column, key in (
        ("charts/clip_fraction", "clip_fraction"),
        ("charts/truncated_fraction", "truncated_fraction"),
        ("charts/effective_sample_size", "effective_sample_size"),
    ):
        if column in updates:  # the sample size is a ratio per update: a plain mean
            weighting = None if key == "effective_sample_size" else weights
            row[key] = _weighted_mean(updates[column].astype(float), weighting)
    return {
        key: None if isinstance(value, float) and not math.isfinite(value) else value
        for key, value in row.items()
    }
