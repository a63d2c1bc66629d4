"""Reward per kind of prompt: per method and phase, the mean reward at each value of a prompt key.

Environments that declare ``prompt_keys`` (ReasonShift's task and level, GridShift's start-goal
distance) get them recorded as ``prompt/<key>`` columns of ``episodes.parquet``. A method can
look fine on average while it fails every hard prompt; these tables show where its reward comes
from, and whether a shift hurt some kinds of prompt more than others.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sao_online.analysis.loading import PROMPT_COLUMN_PREFIX
from sao_online.analysis.report_render import Block, Heading, Table

#: Columns of :func:`reward_by_prompt_key`'s table.
PROMPT_GROUP_COLUMNS = [
    "experiment",
    "method",
    "phase",
    "key",
    "value",
    "episodes",
    "seeds",
    "mean_reward",
]


def prompt_key_columns(episodes: pd.DataFrame) -> list[str]:
    """The ``prompt/<key>`` columns of ``episodes`` that hold at least one value."""
    return [
        column
        for column in episodes.columns
        if str(column).startswith(PROMPT_COLUMN_PREFIX) and episodes[column].notna().any()
    ]


def final_part_of_phases(episodes: pd.DataFrame, final_fraction: float = 0.5) -> pd.DataFrame:
    """The episodes in the last ``final_fraction`` of each run's stay in each phase.

    Within a run (experiment, method, seed) and phase, episodes are ordered by ``world_time``
    (then ``episode``) and the last ``ceil(final_fraction * n)`` of the ``n`` played ones are
    kept; dropped episodes (no reward) are left out first.

    Raises:
        ValueError: ``final_fraction`` is not in (0, 1].
    """
    if not 0 < final_fraction <= 1:
        raise ValueError(f"final_fraction: expected a number in (0, 1], got {final_fraction!r}")
    played = episodes[np.isfinite(episodes["reward"].to_numpy(dtype=float))]
    if "dropped" in played:
        played = played[~played["dropped"].astype(bool)]
    order = [c for c in ("world_time", "episode") if c in played]
    played = played.sort_values(order, kind="stable")
    run_phase = played.groupby(["experiment", "method", "seed", "phase"], sort=False)
    position = run_phase.cumcount()
    size = run_phase["reward"].transform("size")
    keep = position >= size - np.ceil(final_fraction * size).astype(int)
    return played[keep.to_numpy()]


def reward_by_prompt_key(episodes: pd.DataFrame, final_fraction: float = 0.5) -> pd.DataFrame:
    """Mean reward and episode count per experiment, method, phase, prompt key and key value.

    Each key is grouped on its own (a row per value of ``prompt/task``, then a row per value of
    ``prompt/difficulty``, not their combinations), over the episodes
    :func:`final_part_of_phases` keeps, pooled across seeds. Episodes whose key is null are left
    out of that key's rows.

    Returns:
        One row per group with :data:`PROMPT_GROUP_COLUMNS` (``key`` without its prefix);
        empty when ``episodes`` has no prompt-key column.

    Example:
        >>> table = reward_by_prompt_key(load_runs("runs/reason_shift"))  # doctest: +SKIP
        >>> table[table.key == "difficulty"]  # doctest: +SKIP
    """
    columns = prompt_key_columns(episodes)
    if not columns:
        return pd.DataFrame(columns=PROMPT_GROUP_COLUMNS)
    kept = final_part_of_phases(episodes, final_fraction)
    frames = []
    for column in columns:
        rows = kept[kept[column].notna()]
        grouped = rows.groupby(["experiment", "method", "phase", column], sort=True)
        table = grouped.agg(
            episodes=("reward", "size"),
            seeds=("seed", "nunique"),
            mean_reward=("reward", "mean"),
        ).reset_index()
        table = table.rename(columns={column: "value"})
        table.insert(3, "key", column[len(PROMPT_COLUMN_PREFIX) :])
        table["value"] = table["value"].astype(object)
        frames.append(table[PROMPT_GROUP_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def _phase_label(phase: int, names: list[str]) -> str:
    return f"phase {phase} ({names[phase]})" if 0 <= phase < len(names) else f"phase {phase}"


def prompt_key_blocks(
    episodes: pd.DataFrame, grouped: pd.DataFrame, final_fraction: float = 0.5
) -> list[Block]:
    """Report blocks for one experiment: per key, a table of method x value by phase.

    Each cell reads ``mean reward (episodes)``; ``grouped`` is :func:`reward_by_prompt_key`'s
    table for the experiment of ``episodes`` (whose ``attrs["runs"]`` names the phases).
    """
    if not len(grouped):
        return []
    experiment = grouped["experiment"].iloc[0]
    names = next(
        (
            info.get("phase_names") or []
            for key, info in episodes.attrs.get("runs", {}).items()
            if key[0] == experiment
        ),
        [],
    )
    part = (
        "the whole of each phase"
        if math.isclose(final_fraction, 1.0)
        else f"the last {final_fraction:.0%} of each run's episodes in each phase"
    )
    blocks: list[Block] = [Heading("Reward by kind of prompt", 3)]
    for key, rows in grouped.groupby("key", sort=False):
        cells = rows.assign(
            phase=[_phase_label(int(phase), names) for phase in rows["phase"]],
            cell=[
                f"{mean:.2f} ({count})"
                for mean, count in zip(rows["mean_reward"], rows["episodes"], strict=True)
            ],
        )
        wide = cells.pivot(index=["method", "value"], columns="phase", values="cell")
        wide = wide[sorted(wide.columns, key=lambda label: int(label.split()[1]))]
        wide = wide.fillna("").reset_index().rename(columns={"value": key})
        wide.columns.name = None
        seeds = int(rows["seeds"].max())
        blocks.append(
            Table(
                wide,
                f"Mean reward (episodes) at each value of `{PROMPT_COLUMN_PREFIX}{key}`, over "
                f"{part}, pooled across {seeds} seed{'s' if seeds != 1 else ''}; dropped "
                f"episodes left out.",
            )
        )
    return blocks
