"""The scorecard's sections on asynchrony: the score on the time axis, for tasks with a time
window (``sao_online.benchmark.time_scores``), and what the runs exercised (staleness, tokens
masked, clipped or truncated: ``sao_online.benchmark.exercised``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sao_online.analysis.report_render import Block, Heading, Paragraph, Table
from sao_online.benchmark.exercised import EXERCISED_COLUMNS
from sao_online.benchmark.scorecard_tables import (
    fixed,
    leaderboard,
    over_seeds,
    shift_table,
    time_cell,
)
from sao_online.benchmark.scores import Aggregates, aggregate, aggregate_units
from sao_online.benchmark.time_scores import TIME_SMOOTH_FRACTION, window_scores


def timed_tasks(protocol: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Task -> its time score settings (``window``, ``smooth``), for the tasks that have one."""
    return {
        name: task["time_score"]
        for name, task in protocol["tasks"].items()
        if task.get("time_score") is not None
    }


def time_unit(protocol: dict[str, Any]) -> str:
    """``virtual seconds`` when every timed task runs on the simulated runtime, else ``seconds``."""
    backends = {
        protocol["tasks"][name]["config"].get("runtime", {}).get("backend")
        for name in timed_tasks(protocol)
    }
    return "virtual seconds" if backends == {"simulated"} else "seconds"


def compute_time(
    scores: pd.DataFrame, shifts: pd.DataFrame, methods: list[str], protocol: dict, reps: int
) -> dict[str, Any] | None:
    """The window scores of the timed tasks and their aggregates; None when no task is timed."""
    timed = timed_tasks(protocol)
    if not timed:
        return None
    shifts = window_scores(scores, shifts[shifts["task"].isin(timed)])
    units = aggregate_units(shifts)  # one per run and family, as on episodes
    return {
        "shifts": shifts,
        "units": units,
        "aggregates": aggregate(units, methods, reps=reps) if len(units) else None,
    }


def _cut(part: pd.DataFrame) -> str:
    cut = int(part["window_cut"].fillna(False).astype(bool).sum())
    return f" ({cut} of {len(part)} cut short)" if cut else ""


def time_task_tables(time: dict[str, Any], order: list[str], reps: int) -> list[tuple]:
    """Per timed task: (name, table of methods x shifts: window score, seconds to 0.5 x oracle)."""
    shifts = time["shifts"]

    def cells(part: pd.DataFrame) -> dict[str, str]:
        return {
            "window score": over_seeds(part["score"].to_numpy(float), reps) + _cut(part),
            "seconds to 0.5 x oracle": time_cell(
                part["seconds_to_half_oracle"].to_numpy(float), part["seconds_censored"], reps
            ),
        }

    return [
        (task, shift_table(shifts[shifts["task"] == task], order, cells))
        for task in sorted(shifts["task"].unique())
    ]


def _cell(values: pd.Series, digits: int = 2, percent: bool = False) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if not len(values):
        return "—"
    if percent:
        return f"{values.mean():.1%}"
    return fixed(values.mean(), digits)


def exercised_table(runs: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Per task and method, what its runs exercised (means over seeds; ``—``: never logged)."""
    rows = []
    for task in sorted(runs["task"].unique()):
        for method in order:
            mine = runs[(runs["task"] == task) & (runs["method"] == method)]
            if not len(mine):
                continue
            most = pd.to_numeric(mine["staleness_max"], errors="coerce").max()
            rows.append(
                {
                    "task": task,
                    "method": method,
                    "runs": len(mine),
                    "staleness (mean)": _cell(mine["staleness_mean"]),
                    "staleness (max)": "—" if not np.isfinite(most) else str(int(most)),
                    "stale episodes": _cell(mine["stale_share"], percent=True),
                    "tokens masked": _cell(mine["masked_fraction"], percent=True),
                    "tokens clipped": _cell(mine["clip_fraction"], percent=True),
                    "tokens truncated": _cell(mine["truncated_fraction"], percent=True),
                    "ESS": _cell(mine["effective_sample_size"]),
                }
            )
    return pd.DataFrame(rows)


def time_blocks(
    time: dict[str, Any] | None, protocol: dict[str, Any], order: list[str], reps: int
) -> list[Block]:
    """The scorecard's section on the time axis (nothing when no task is timed)."""
    if time is None:
        return []
    unit = time_unit(protocol)
    windows = ", ".join(
        f"{task} {settings['window']:g} s"
        for task, settings in sorted(timed_tasks(protocol).items())
    )
    aggregates: Aggregates | None = time["aggregates"]
    blocks: list[Block] = [
        Heading(f"On {unit}"),
        Paragraph(
            f"The same runs against the {unit} of their clock; each shift starts when the "
            "learner takes the first episode of the new phase. Window score = (mean reward of "
            f"the phase's episodes the learner took within W {unit} of the shift - "
            "floor) / (oracle - floor), with the floor and oracle of the phase's score above, "
            f"so every method is read over the same time; W per task: {windows}. Seconds to "
            f"0.5 x oracle: until the phase's trailing mean reward over {TIME_SMOOTH_FRACTION:g} "
            "x W first reaches half the phase's oracle reward, censored at the phase's end. "
            "Aggregated as the leaderboard above: per run and family, the mean of its window "
            "scores."
        ),
    ]
    if aggregates is not None:
        blocks.append(Table(leaderboard(aggregates), caption=f"Leaderboard on {unit}"))
    else:
        blocks.append(Paragraph("No window score: no timed phase is scored."))
    for task, table in time_task_tables(time, order, reps):
        blocks += [Heading(task, 3), Table(table)]
    return blocks


def exercised_blocks(runs: pd.DataFrame, order: list[str]) -> list[Block]:
    """What the runs exercised, where their results recorded it (results from before this was
    kept have none: no section)."""
    present = [column for column in EXERCISED_COLUMNS if column in runs]
    if not present or runs[present].isna().all().all():
        return []
    return [
        Heading("What the runs exercised"),
        Paragraph(
            "Per task and method, means over its runs: the staleness of the episodes trained "
            "on (learner version minus the episode's oldest token's version; max over the "
            "runs), the share of them at least one version stale, and the share of action "
            "tokens the objective masked (given no gradient by a band), clipped (PPO) or "
            "truncated (TIS), weighted by each update's tokens; ESS: the mean normalized "
            "effective sample size of each update's weights. `—`: the objective logs none."
        ),
        Table(exercised_table(runs, order)),
    ]
