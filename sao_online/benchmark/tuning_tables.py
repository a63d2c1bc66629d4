"""What ``benchmark tune`` found: the value of every grid point, the choice and its sensitivity,
as tables for the tune's report and for the scorecard of the suite it wrote.

A run's value is its mean normalized score over the phases the rule names
(``tuning_plan.RULES``); a point's value is the mean over the tuning seeds; each method's chosen
point on a task is the one of highest value (the first listed on a tie), and its sensitivity is
the best point's value minus the worst's: how much the choice could move the method's score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sao_online.analysis.report_render import (
    Block,
    Heading,
    Paragraph,
    Table,
    to_html,
    to_markdown,
    write_csv,
)
from sao_online.benchmark.protocol import FLOOR_METHOD
from sao_online.benchmark.scorecard_tables import fixed
from sao_online.benchmark.tuning_plan import RULES, TuningPlan, point_label
from sao_online.config import ConfigError


def choose(values: pd.DataFrame) -> pd.DataFrame:
    """Per (task, method) but the floor: the chosen point, its value, the worst point's and
    the sensitivity (best - worst).

    Raises:
        ConfigError: a method with no scored value at any point of a task.
    """
    means = (
        values[values["method"] != FLOOR_METHOD]
        .groupby(["task", "family", "method", "spec", "point"], as_index=False)["value"]
        .mean()
        .sort_values("point", kind="stable")
    )
    rows = []
    for (task, family, method, spec), part in means.groupby(
        ["task", "family", "method", "spec"], sort=True
    ):
        scored = part[part["value"].notna()]
        if not len(scored):
            raise ConfigError(
                f"tune: {method} on {task} has no scored phase at any grid point: nothing to "
                "judge the grid by (see the points' scorecards)"
            )
        best = scored.iloc[int(np.argmax(scored["value"].to_numpy()))]  # the first on a tie
        rows.append(
            {
                "task": task,
                "family": family,
                "method": method,
                "spec": spec,
                "point": int(best["point"]),
                "value": float(best["value"]),
                "worst": float(scored["value"].min()),
                "sensitivity": float(best["value"] - scored["value"].min()),
                "points": len(scored),
            }
        )
    return pd.DataFrame(rows)


def _cell(values: np.ndarray) -> str:
    values = values[np.isfinite(values)]
    if not len(values):
        return "—"
    return f"{fixed(values.mean())} [{fixed(values.min())}, {fixed(values.max())}]"


def _chosen_table(chosen: pd.DataFrame, points: dict[str, list[str]]) -> pd.DataFrame:
    frame = chosen.pivot_table(
        index="method",
        columns="task",
        values="point",
        aggfunc="first",
    )
    cells = {
        (row.method, row.task): (
            f"{points[row.task][row.point]} ({fixed(row.value)}; moved by {fixed(row.sensitivity)})"
        )
        for row in chosen.itertuples()
    }
    return pd.DataFrame(
        [
            {"method": method, **{task: cells.get((method, task), "—") for task in frame.columns}}
            for method in frame.index
        ]
    )


def write_tuning_report(
    out: Path, plan: Any, tuning: TuningPlan, values: pd.DataFrame, chosen: pd.DataFrame
) -> Path:
    """``tuning.md``, ``tuning.html`` and ``results/tuning.csv`` in ``out``; returns the .md."""
    points = {task: [point_label(p) for p in tuning.points(task)] for task in tuning.grids}
    evaluated = f"{plan.first_seed}-{plan.first_seed + plan.seeds - 1}"
    blocks: list[Block] = [
        Heading(f"Tuning: suite {plan.suite}, tier {plan.tier}", 1),
        Paragraph(
            f"Every method ran every point of the same grid on the tuning seeds "
            f"{', '.join(map(str, tuning.seeds))} (the tier evaluates seeds {evaluated}). The "
            f"rule, declared before the runs: {tuning.rule}, a run's mean normalized score over "
            f"{RULES[tuning.rule]}, averaged over the tuning seeds; the highest wins, the first "
            "listed point on a tie. Sensitivity: the chosen point's value minus the worst's."
        ),
        Table(grid_table(tuning.grids), caption="The grid of each task, the same for every method"),
        Heading("Chosen point per method and task"),
        Table(_chosen_table(chosen, points)),
    ]
    for task in sorted(tuning.grids):
        part = values[values["task"] == task]
        picked = dict(
            zip(
                chosen.loc[chosen["task"] == task, "method"],
                chosen.loc[chosen["task"] == task, "point"],
            )
        )
        rows = []
        for method, rows_of in part.groupby("method", sort=True):
            row = {"method": method}
            for index, label in enumerate(points[task]):
                cell = _cell(rows_of.loc[rows_of["point"] == index, "value"].to_numpy(float))
                row[label] = f"**{cell}**" if picked.get(method) == index else cell
            rows.append(row)
        blocks += [
            Heading(task, 3),
            Table(
                pd.DataFrame(rows),
                caption=f"{task}: each point's value, mean [lowest seed, highest seed]; the "
                "chosen point in bold (the floor, frozen, scores about 0 at every point)",
            ),
        ]
    (out / "results").mkdir(parents=True, exist_ok=True)
    write_csv(values, out / "results" / "tuning.csv")
    (out / "tuning.md").write_text(to_markdown(blocks))
    (out / "tuning.html").write_text(to_html(blocks, f"sao-online tune: {plan.suite}"))
    return out / "tuning.md"


def grid_table(grids: dict[str, dict[str, list[Any]]]) -> pd.DataFrame:
    """One row per task: its grid as ``field: v1, v2`` per field and its count of points."""
    return pd.DataFrame(
        [
            {
                "task": task,
                "grid": "; ".join(
                    f"{name}: {', '.join(map(str, values))}" for name, values in grid.items()
                ),
                "points": int(np.prod([len(values) for values in grid.values()])),
            }
            for task, grid in sorted(grids.items())
        ]
    )


def tuning_blocks(tuned: dict[str, Any] | None, labels: dict[str, str]) -> list[Block]:
    """The scorecard's tuning section for a suite ``benchmark tune`` wrote (its tier's
    ``tuned`` record; ``labels`` maps each method spec the scorecard holds to its name):
    the grid, each method's chosen point and sensitivity per task, and the methods that were
    not tuned. Nothing for a suite whose settings were not tuned so."""
    if not tuned:
        return []
    grids = tuned.get("grids", {})
    points = {
        task: [point_label(p) for p in TuningPlan(tuned["rule"], (), grids).points(task)]
        for task in grids
    }
    rows = [
        {"task": task, "method": labels[spec], "spec": spec, **choice}
        for task, by_spec in tuned.get("chosen", {}).items()
        for spec, choice in by_spec.items()
        if spec in labels
    ]
    untuned = sorted(
        label
        for spec, label in labels.items()
        if label != FLOOR_METHOD and not any(row["spec"] == spec for row in rows)
    )
    blocks: list[Block] = [
        Heading("Tuning"),
        Paragraph(
            f"The methods' settings were chosen by `sao-online benchmark tune` "
            f"({tuned.get('from', '')}): every method ran every point of the same grid on the "
            f"tuning seeds {', '.join(map(str, tuned['seeds']))}, which these runs do not use, "
            f"and the rule {tuned['rule']} ({RULES.get(tuned['rule'], '')}, averaged over the "
            "tuning seeds; the highest wins), declared before the runs, picked each method's "
            "point per task. Sensitivity: how far the worst point's value fell below the "
            "chosen one's."
        ),
        Table(grid_table(grids), caption="The grid of each task, the same for every method"),
    ]
    if rows:
        blocks.append(
            Table(
                _chosen_table(pd.DataFrame(rows), points),
                caption="Per method and task: the chosen point (its value on the tuning seeds; "
                "the sensitivity)",
            )
        )
    if untuned:
        blocks.append(
            Paragraph(
                f"Not tuned (run at the suite's settings, not the grid's): {', '.join(untuned)}."
            )
        )
    return blocks
