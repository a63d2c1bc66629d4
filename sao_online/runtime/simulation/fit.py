"""A cost model fitted to the timings real runs logged (``sao-online sim fit RUN_DIR...``).

Runs of the ``local`` or ``ray`` backend log what the cost model prices:

- ``decode_rounds.csv``: per decoding round of a rollout worker, the slots fed, the tokens fed,
  the cached tokens attended to and the round's seconds (``RolloutEngine.round_timings``);
- ``updates.parquet``: per update, ``charts/learner_seconds``, the two lanes' seconds
  (``charts/learner_policy_seconds``, ``charts/learner_critic_seconds``), the batch's tokens
  (``charts/batch_tokens``), whether the step trained the critic only, and
  ``charts/publish_seconds`` (the previous update's publish);
- ``episodes.parquet``: per episode, ``env_seconds``, the part of it that was simulated latency
  (``env_latency_seconds``) and ``env_steps``.

Each cost is fitted where it is measured: the decoding step by non-negative least squares of
round seconds on (1, slots, cached tokens, tokens fed beyond one per slot), refitted once without
the rounds far off the first fit (a descheduled process, a garbage collection); the learner's
lanes as the median seconds per batch token (the critic's per critic update) and its fixed part
as the median of what its process spent per update beyond the longer lane, the publish and the
waits; publishing and env calls as medians. The first update of a run (start-up) is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sao_online.runtime.simulation.costs import CostModel

#: Rounds further than this many median absolute deviations from the first fit are refitted out.
OUTLIER_MADS = 8.0
#: The smallest fixed seconds the fit gives a step or an update (the config requires > 0).
SMALLEST_SECONDS = 1e-6


@dataclass(frozen=True)
class Fit:
    """A fitted cost model and how well each part fits the data behind it.

    Attributes:
        costs: the fitted cost model.
        diagnostics: per part, the rows it was fitted on and its error.
    """

    costs: CostModel
    diagnostics: dict[str, dict[str, float]]

    def to_config(self) -> dict[str, Any]:
        """The ``runtime.sim`` block a config uses to run on this cost model."""
        return {"runtime": {"sim": self.costs.to_dict()}}


def nonnegative_least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Coefficients >= 0 minimising ||design @ x - target|| (active set: a column whose
    coefficient comes out negative is fixed at 0 and the rest refitted).

    Example:
        >>> x = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
        >>> nonnegative_least_squares(x, np.array([3.0, 2.0, 1.0])).round(6).tolist()
        [2.0, 0.0]
    """
    free = list(range(design.shape[1]))
    coefficients = np.zeros(design.shape[1])
    while free:
        solution, *_ = np.linalg.lstsq(design[:, free], target, rcond=None)
        if (solution >= 0).all():
            coefficients[free] = solution
            return coefficients
        free.pop(int(np.argmin(solution)))
    return coefficients


def _decode_design(rounds: pd.DataFrame) -> np.ndarray:
    prefill = (rounds["fed_tokens"] - rounds["slots"]).clip(lower=0)
    return np.column_stack(
        [np.ones(len(rounds)), rounds["slots"], rounds["cached_tokens"], prefill]
    ).astype(float)


def fit_decode(rounds: pd.DataFrame) -> tuple[dict[str, float], dict[str, float]]:
    """The decoding step's four costs from decoding rounds, and the fit's diagnostics."""
    if rounds.empty:
        raise ValueError("sim fit: no decoding rounds to fit the decoding step to")
    design = _decode_design(rounds)
    seconds = rounds["seconds"].to_numpy(float)
    first = nonnegative_least_squares(design, seconds)
    residual = seconds - design @ first
    spread = np.median(np.abs(residual - np.median(residual))) or np.finfo(float).eps
    kept = np.abs(residual) <= OUTLIER_MADS * spread
    coefficients = nonnegative_least_squares(design[kept], seconds[kept])
    predicted = design[kept] @ coefficients
    relative = np.abs(predicted - seconds[kept]) / np.maximum(seconds[kept], 1e-12)
    total = seconds[kept].sum()
    return (
        {
            "decode_step_seconds": max(float(coefficients[0]), SMALLEST_SECONDS),
            "decode_slot_seconds": float(coefficients[1]),
            "decode_cached_token_seconds": float(coefficients[2]),
            "prefill_token_seconds": float(coefficients[3]),
        },
        {
            "rounds": float(len(rounds)),
            "rounds_left_out": float((~kept).sum()),
            "median_relative_error": float(np.median(relative)),
            "total_seconds_error": float((predicted.sum() - total) / total),
        },
    )


def fit_learner(updates: pd.DataFrame) -> dict[str, float]:
    """The learner's costs from the update rows of runs.

    ``updates`` has a ``run`` column (which run a row is of) and a ``critic_updates`` column (K
    of the row's run, 0 without a critic). The lanes' per-token costs come from the lanes'
    seconds. The fixed cost is everything else the learner's process spent per update: the
    time between two updates less the waits for episodes, the publish and the longer lane
    (logging, evaluation snapshots, admission and bookkeeping are the learner's too).
    """
    rows = updates.sort_values(["run", "version"])
    cycle = rows.groupby("run")["wall_time"].diff()
    rows = rows.assign(cycle=cycle)[rows["version"] > 1]
    if rows.empty:
        raise ValueError("sim fit: no update after the first to fit the learner to")
    tokens = rows["charts/batch_tokens"]
    policy = rows[rows["charts/critic_only_step"] == 0]
    critic = rows[rows["critic_updates"] > 0]
    longer = rows[["charts/learner_policy_seconds", "charts/learner_critic_seconds"]].max(axis=1)
    waits = sum(
        rows[column].fillna(0.0)
        for column in ("charts/learner_wait_bound_seconds", "charts/learner_wait_episodes_seconds")
        if column in rows
    )
    overhead = rows["cycle"] - waits - rows["charts/publish_seconds"] - longer
    return {
        "learner_update_seconds": max(float(overhead.median()), SMALLEST_SECONDS),
        "learner_policy_token_seconds": float(
            (policy["charts/learner_policy_seconds"] / tokens[policy.index]).median()
        )
        if len(policy)
        else 0.0,
        "learner_critic_token_seconds": float(
            (
                critic["charts/learner_critic_seconds"]
                / (tokens[critic.index] * critic["critic_updates"])
            ).median()
        )
        if len(critic)
        else 0.0,
        "publish_seconds": float(rows["charts/publish_seconds"].median()),
    }


def fit_env(episodes: pd.DataFrame) -> float:
    """Seconds of one env call beyond its simulated latency (median over episodes)."""
    if "dropped" in episodes:
        episodes = episodes[~episodes["dropped"].astype(bool)]
    calls = episodes["env_steps"] + 1  # the reset too
    own = (episodes["env_seconds"] - episodes["env_latency_seconds"]).clip(lower=0) / calls
    return float(own.median()) if len(own) else 0.0


def fit_costs(rounds: pd.DataFrame, updates: pd.DataFrame, episodes: pd.DataFrame) -> Fit:
    """The cost model fitted to pooled timings of real runs.

    Args:
        rounds: decoding rounds (``DECODE_ROUNDS_FILE``'s columns).
        updates: update rows with ``run`` and ``critic_updates`` columns (see ``fit_learner``).
        episodes: episode rows.

    Raises:
        ValueError: nothing to fit a part to.
    """
    decode, decode_diagnostics = fit_decode(rounds)
    learner = fit_learner(updates)
    costs = CostModel(**decode, **learner, env_call_seconds=fit_env(episodes))
    return Fit(costs, {"decode": decode_diagnostics})
