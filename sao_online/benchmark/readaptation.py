"""The re-adaptation score: a run's post-shift score minus its control's over the same episodes.

For a run of a learning method and its shift k (``controls.py``), with the run's floor and
oracle of phase k (``scores.normalized_scores``):

    control(run, k)      = (control's mean reward over phase k - floor) / (oracle - floor)
    readaptation(run, k) = score(run, k) - control(run, k)

The control starts from the warm start at the shift and meets the same prompts in the same
regime as the run's phase k, so the two differ only in what the run learned before the shift.
Positive: having adapted to the earlier regimes helps it learn the new one; 0: it learns as if
from the warm start; negative: having learned the old regime hurts. Aggregated as the scores
are (one value per run and family, its shifts averaged; IQM with stratified-bootstrap
intervals). No value where the phase is not scored or the control has not run (``note``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sao_online.analysis.report_render import Block, Heading, Paragraph, Table
from sao_online.benchmark.scorecard_tables import family_table, fixed
from sao_online.benchmark.scores import (
    MIN_SEEDS_TO_SEPARATE,
    Aggregates,
    aggregate,
    aggregate_units,
    separated,
)

READAPTATION_COLUMNS = [
    "task",
    "family",
    "method",
    "seed",
    "shift",
    "score",
    "control",
    "readaptation",
    "episodes",
    "control_episodes",
    "note",
]


def readaptation_scores(scores: pd.DataFrame, controls: pd.DataFrame) -> pd.DataFrame:
    """Per run of a learning method and shift: its score, its control's and the difference.

    Args:
        scores: :func:`~sao_online.benchmark.scores.normalized_scores`' frame (it carries each
            phase's floor and gap).
        controls: ``controls.csv`` (one row per control and phase).
    """
    runs = scores[(scores["phase"] >= 1) & scores["method"].isin(set(controls["method"]))]
    runs = runs[["task", "family", "method", "seed", "phase", "floor", "gap", "score", "episodes"]]
    own = controls[controls["phase"] == controls["shift"]].drop(columns="phase")
    own = own.rename(
        columns={"shift": "phase", "reward_mean": "control_reward", "episodes": "control_episodes"}
    )[["task", "method", "seed", "phase", "control_reward", "control_episodes"]]
    frame = runs.merge(own, on=["task", "method", "seed", "phase"], how="left")
    frame["control"] = np.where(
        frame["score"].notna(), (frame["control_reward"] - frame["floor"]) / frame["gap"], np.nan
    )
    frame["readaptation"] = frame["score"] - frame["control"]
    frame["note"] = ""
    frame.loc[frame["control_reward"].isna(), "note"] = "no control run"
    frame.loc[frame["score"].isna(), "note"] = "phase not scored"
    frame = frame.rename(columns={"phase": "shift"})
    return frame[READAPTATION_COLUMNS].reset_index(drop=True)


def _units(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``column`` of the shifts with a re-adaptation, as the score matrix's entries."""
    both = frame[frame["readaptation"].notna()]
    return aggregate_units(both.rename(columns={"shift": "phase"}).assign(score=both[column]))


def readaptation_result(
    scores: pd.DataFrame, controls: pd.DataFrame, methods: list[str], reps: int
) -> dict[str, Any] | None:
    """The per-shift frame and the aggregates of re-adaptation, of the runs' post-shift scores
    and of their controls' on the same shifts; None without a control."""
    if controls is None or not len(controls):
        return None
    frame = readaptation_scores(scores, controls)
    learners = [m for m in methods if m in set(frame["method"])]
    aggregates = {
        column: aggregate(_units(frame, column), learners, reps=reps)
        for column in ("readaptation", "score", "control")
    }
    return {"frame": frame, "aggregates": aggregates, "methods": learners}


def readaptation_table(result: dict[str, Any]) -> pd.DataFrame:
    """Per method, ranked by its re-adaptation IQM: that with its 95% interval, beside the IQM
    of its post-shift scores and of its controls' on the same shifts, and whether it is
    separated from the next method down."""
    aggregates: dict[str, Aggregates] = result["aggregates"]
    table = aggregates["readaptation"].table
    others = {name: aggregates[name].table.set_index("method") for name in ("score", "control")}
    rows = []
    for position, row in enumerate(table.itertuples(index=False)):
        verdict = ""
        if position + 1 < len(table):
            below = table.iloc[position + 1]["method"]
            apart, estimate = separated(aggregates["readaptation"].improvement, row.method, below)
            if estimate is not None:
                verdict = (
                    f"{'separated from' if apart else 'not separated from'} {below}: P(> {below}) "
                    f"= {fixed(estimate['probability'])} [{fixed(estimate['lower'])}, "
                    f"{fixed(estimate['upper'])}]"
                    + (
                        f" (fewer than {MIN_SEEDS_TO_SEPARATE} seeds)"
                        if estimate["seeds"] < MIN_SEEDS_TO_SEPARATE
                        else ""
                    )
                )
        rows.append(
            {
                "rank": row.rank,
                "method": row.method,
                "re-adaptation IQM [95% CI]": (
                    f"{fixed(row.iqm)} [{fixed(row.iqm_lower)}, {fixed(row.iqm_upper)}]"
                ),
                "post-shift score": fixed(others["score"].loc[row.method, "iqm"]),
                "control": fixed(others["control"].loc[row.method, "iqm"]),
                "runs x families": row.scores,
                "next below": verdict,
            }
        )
    return pd.DataFrame(rows)


def readaptation_blocks(result: dict[str, Any] | None) -> list[Block]:
    """The scorecard's re-adaptation section (nothing when the benchmark ran no control)."""
    if result is None:
        return [
            Heading("Re-adaptation"),
            Paragraph(
                "No re-adaptation controls ran (`--controls`, or `controls: true` in the tier): "
                "the scores above mix how fast a method learns with how it recovers from having "
                "learned the regime before a shift."
            ),
        ]
    frame = result["frame"]
    missing = frame[frame["note"] == "no control run"]
    blocks: list[Block] = [
        Heading("Re-adaptation"),
        Paragraph(
            "Re-adaptation = a run's post-shift score minus its control's over the same "
            "episodes: the same method, seed and warm start started at the shift from the warm "
            "start, with the budget the run had left (definitions: docs/benchmark.md). Positive: "
            "having learned the earlier regimes helps; negative: it hurts. One value per run and "
            "family (its shifts averaged); IQM with 95% stratified-bootstrap intervals; beside "
            "it the IQM of the runs' post-shift scores and of their controls' on the same shifts."
        ),
        Table(readaptation_table(result)),
        Table(
            family_table(result["aggregates"]["readaptation"], result["methods"]),
            caption="Re-adaptation per family: IQM [95% CI] of its runs; (#k) = rank within it",
        ),
    ]
    if len(missing):
        blocks.append(
            Paragraph(
                f"{len(missing)} (run, shift) pairs have no control yet and are left out "
                "(`--resume --controls` runs them)."
            )
        )
    return blocks
