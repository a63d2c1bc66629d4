"""A sweep's scorecard: the score against the swept value per method, with intervals, and a
leaderboard per value, from the result folders of the sweep's benchmarks alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.analysis.report_render import (
    Block,
    Heading,
    Image,
    Paragraph,
    Table,
    to_html,
    to_markdown,
    write_csv,
)
from sao_online.benchmark.figures import plot_sweep
from sao_online.benchmark.scorecard import compute, read_tables
from sao_online.benchmark.scorecard_tables import interval_cell, leaderboard
from sao_online.benchmark.scorecard_time import time_unit
from sao_online.benchmark.sweep_folder import numeric_values, read_sweep, sweep_frame

EPISODES_AXIS = "episodes"


def sweep_results(out: str | Path, reps: int) -> dict[str, Any]:
    """Each value's computed scores (``scorecard.compute``) and the sweep's long table."""
    sweep, folders = read_sweep(out)
    computed, rows, protocols = {}, [], {}
    for value in sweep.values:
        if not (folders[value] / "results" / "benchmark.json").is_file():
            continue  # a value not started yet (a sweep stopped early)
        tables, benchmark = read_tables(folders[value] / "results")
        if not len(tables["runs"]):
            continue
        result = compute(tables, benchmark, reps)
        computed[value], protocols[value] = result, benchmark["protocol"]
        axes = [(EPISODES_AXIS, result["aggregates"])]
        if result["time"] is not None and result["time"]["aggregates"] is not None:
            axes.append((time_unit(benchmark["protocol"]), result["time"]["aggregates"]))
        for axis, aggregates in axes:
            for row in aggregates.table.itertuples(index=False):
                rows.append(
                    {
                        "value": value,
                        "axis": axis,
                        "method": row.method,
                        "iqm": row.iqm,
                        "lower": row.iqm_lower,
                        "upper": row.iqm_upper,
                        "scores": row.scores,
                    }
                )
    return {
        "sweep": sweep,
        "folders": folders,
        "results": computed,
        "protocols": protocols,
        "frame": sweep_frame(rows),
    }


def across_values(frame: pd.DataFrame, axis: str, values: list[str]) -> pd.DataFrame:
    """Methods x values: each value's aggregate IQM [95% CI] on ``axis`` (``—``: not run)."""
    part = frame[frame["axis"] == axis]
    methods = list(dict.fromkeys(part.sort_values("iqm", ascending=False)["method"]))
    table = []
    for method in methods:
        mine = part[part["method"] == method].set_index("value")
        row = {"method": method}
        for value in values:
            row[value] = (
                interval_cell(*mine.loc[value, ["iqm", "lower", "upper"]])
                if value in mine.index
                else "—"
            )
        table.append(row)
    return pd.DataFrame(table)


def write_sweep_scorecard(out: str | Path, *, reps: int = 2000) -> Path:
    """Write ``scorecard.{md,html,csv,json}`` and ``figures/sweep.png`` of the sweep in ``out``.

    Returns:
        The path of ``scorecard.md``.
    """
    out = Path(out)
    data = sweep_results(out, reps)
    sweep, frame = data["sweep"], data["frame"]
    values = [value for value in sweep.values if value in data["results"]]
    if not values:
        raise ValueError(f"{out}: no value of the sweep has results yet")
    first = data["protocols"][values[0]]
    figure = plot_sweep(
        frame, sweep.field, numeric_values(tuple(values)), out / "figures" / "sweep.png"
    )
    axes = list(dict.fromkeys(frame["axis"]))
    blocks: list[Block] = [
        Heading(f"Sweep of {sweep.field}: suite {first['suite']}, tier {first['tier']}", 1),
        Paragraph(
            f"The tier run at {sweep.field} = {', '.join(values)}, everything else equal; each "
            "value's benchmark is its own folder with its own scorecard. Below, each method's "
            "aggregate IQM of the normalized score [95% stratified-bootstrap interval] at every "
            "value, on each axis the runs were scored on; then each value's leaderboard."
        ),
        Image(str(figure.relative_to(out)), f"Score against {sweep.field}, 95% intervals"),
    ]
    for axis in axes:
        blocks.append(Table(across_values(frame, axis, values), caption=f"IQM [95% CI] on {axis}"))
    for value in values:
        result = data["results"][value]
        folder = data["folders"][value].relative_to(out)
        blocks += [
            Heading(f"{sweep.field} = {value}"),
            Paragraph(f"The full scorecard: {folder}/scorecard.md."),
            Table(leaderboard(result["aggregates"]), caption=f"Leaderboard on {EPISODES_AXIS}"),
        ]
        time = result["time"]
        if time is not None and time["aggregates"] is not None:
            unit = time_unit(data["protocols"][value])
            blocks.append(Table(leaderboard(time["aggregates"]), caption=f"Leaderboard on {unit}"))
    title = f"sao-online sweep: {sweep.field}"
    (out / "scorecard.md").write_text(to_markdown(blocks))
    (out / "scorecard.html").write_text(to_html(blocks, title))
    write_csv(frame, out / "scorecard.csv")
    summary = {
        "field": sweep.field,
        "values": values,
        "suite": first["suite"],
        "tier": first["tier"],
        "scores": frame.to_dict(orient="records"),
    }
    (out / "scorecard.json").write_text(json.dumps(summary, indent=1, default=float))
    return out / "scorecard.md"
