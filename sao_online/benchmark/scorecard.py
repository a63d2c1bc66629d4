"""The scorecard: leaderboard, per-family and per-shift tables, figures and provenance, from the
result tables alone (``OUT/results``), as ``scorecard.md``, ``.html``, ``.csv`` and ``.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
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
from sao_online.benchmark import calibration, figures
from sao_online.benchmark.clean_tree import provenance_notes
from sao_online.benchmark.identity import check_one_code
from sao_online.benchmark.protocol import budget_matching, warm_start_design
from sao_online.benchmark.readaptation import readaptation_blocks, readaptation_result
from sao_online.benchmark.results_files import ResultsError, read_tables
from sao_online.benchmark.scorecard_tables import (
    code_table,
    family_table,
    leaderboard,
    provenance_table,
    session_table,
    task_tables,
    warm_start_table,
)
from sao_online.benchmark.scorecard_time import compute_time, exercised_blocks, time_blocks
from sao_online.benchmark.scores import (
    MIN_SEEDS_TO_SEPARATE,
    Aggregates,
    aggregate,
    aggregate_units,
    matrix_note,
    normalized_scores,
    shift_scores,
)
from sao_online.benchmark.tuning_tables import tuning_blocks


def _method_order(aggregates: Aggregates, methods: list[str]) -> list[str]:
    ranked = list(aggregates.table["method"])
    return ranked + sorted(m for m in methods if m not in ranked)


def run_cpus(runs: pd.DataFrame, benchmark: dict[str, Any]) -> pd.Series:
    """The CPU model each run ran on, from its provenance record (``?`` where none says)."""
    cpus = {
        key: record.get("machine", {}).get("cpu_model", "?")
        for key, record in benchmark.get("provenance", {}).items()
    }
    return runs["provenance_id"].map(cpus).astype(object).fillna("?")  # all-NaN maps as floats


def check_one_warm_start(runs: pd.DataFrame, benchmark: dict[str, Any]) -> None:
    """Refuse a task whose runs of one warm-start seed started from different warm starts
    (weights ids): its floor is the mean of the ``frozen`` runs from that warm start, so every
    score must start from the floor's weights. Runs that recorded none (results kept before
    runs recorded it) are not compared."""
    runs = runs.assign(cpu=run_cpus(runs, benchmark))
    if "warm_start_seed" not in runs:
        runs = runs.assign(warm_start_seed=0)
    for (task, seed), rows in runs.dropna(subset=["warm_start"]).groupby(
        ["task", "warm_start_seed"], sort=True
    ):
        if rows["warm_start"].nunique() < 2:
            continue
        if runs.loc[runs["task"] == task, "warm_start_seed"].nunique() > 1:
            task = f"{task} (warm-start seed {seed})"
        parts = []
        for weights, group in rows.groupby("warm_start", sort=True):
            seeds = ", ".join(str(seed) for seed in sorted(set(group["seed"])))
            where = ", ".join(sorted(set(group["cpu"])))
            parts.append(f"{weights} ({len(group)} run(s), seeds {seeds}; {where})")
        raise ResultsError(
            f"task {task}: its runs started from {len(parts)} different warm starts: "
            + "; ".join(parts)
            + ". Its floor (frozen) and every score need one: run the others from the same "
            "weights (`sao-online benchmark warm-starts --export FOLDER` where they were "
            "fitted, `sao-online benchmark --warm-starts FOLDER` where the others run)"
        )


def compute(tables: dict[str, pd.DataFrame], benchmark: dict[str, Any], reps: int) -> dict:
    """Scores, per-shift scores and the aggregates of a results folder's tables."""
    check_one_warm_start(tables["runs"], benchmark)
    check_one_code(tables["runs"], benchmark.get("code", {}))
    protocol = benchmark["protocol"]
    settings = protocol["score"]
    scores = normalized_scores(
        tables["phases"],
        tables["runs"],
        floor_method=settings["floor"],
        min_gap=settings["min_gap"],
    )
    per_shift = shift_scores(scores, tables["shifts"])
    units = aggregate_units(scores)
    methods = sorted(tables["runs"]["method"].unique())
    aggregates = aggregate(units, methods, reps=reps)
    order = _method_order(aggregates, methods)
    return {
        "scores": scores,
        "per_shift": per_shift,
        "units": units,
        "aggregates": aggregates,
        "methods": order,
        "readaptation": readaptation_result(scores, tables.get("controls"), order, reps),
        "time": compute_time(scores, tables["shifts"], methods, protocol, reps),
    }


def _session_blocks(benchmark: dict[str, Any]) -> list[Block]:
    if not benchmark.get("sessions"):
        return []
    return [
        Table(
            session_table(benchmark),
            caption="Sessions: each command that ran runs, with its wall time (warm starts "
            "included; a warm start already cached costs nothing), the CPU seconds of the "
            "command and every process it started, the cores busy (those CPU seconds over wall "
            "seconds x cores) and the share of the cores other work on the machine took meanwhile",
        )
    ]


def _code_blocks(tables: dict[str, pd.DataFrame], benchmark: dict[str, Any]) -> list[Block]:
    if not benchmark.get("code"):
        return []  # results kept before runs recorded their code
    return [
        Table(
            code_table(tables, benchmark),
            caption="Code: what each run ran, by code id (results/runs.csv); a result pools "
            "runs of one code per task and method, and --resume and merge refuse others",
        )
    ]


def _floor_first(aggregates: Aggregates, floor: str) -> list[Block]:
    """A note when the floor leads the leaderboard: no method beat not learning."""
    ranked = list(aggregates.table["method"])
    if not ranked or ranked[0] != floor:
        return []
    return [
        Paragraph(
            f"`{floor}` ranks first: no method scores above the warm start it never updates. "
            "Read the calibration below before the ranking: where a task's shift costs the "
            "warm start nothing (an undecided warm start, `model.warm_start_oracle_share: 0`), "
            "the floor cannot be beaten; the calibration's last column says what to change."
        )
    ]


def _long_csv(result: dict) -> pd.DataFrame:
    aggregates: Aggregates = result["aggregates"]
    rows = []
    for row in aggregates.table.itertuples(index=False):
        rows.append(
            {
                "scope": "aggregate",
                "family": "",
                "method": row.method,
                "statistic": "iqm",
                "value": row.iqm,
                "lower": row.iqm_lower,
                "upper": row.iqm_upper,
                "n": row.scores,
            }
        )
        rows.append(
            {
                "scope": "aggregate",
                "family": "",
                "method": row.method,
                "statistic": "optimality_gap",
                "value": row.optimality_gap,
                "lower": row.gap_lower,
                "upper": row.gap_upper,
                "n": row.scores,
            }
        )
    for row in aggregates.families.itertuples(index=False):
        rows.append(
            {
                "scope": "family",
                "family": row.family,
                "method": row.method,
                "statistic": "iqm",
                "value": row.iqm,
                "lower": row.iqm_lower,
                "upper": row.iqm_upper,
                "n": row.scores,
            }
        )
    for row in aggregates.improvement.itertuples(index=False):
        rows.append(
            {
                "scope": "aggregate",
                "family": "",
                "method": f"{row.method_x}>{row.method_y}",
                "statistic": "probability_of_improvement",
                "value": row.probability,
                "lower": row.lower,
                "upper": row.upper,
                "n": np.nan,
            }
        )
    return pd.DataFrame(rows)


def write_scorecard(
    out: str | Path,
    *,
    reps: int = 2000,
    extra: list[Block] | None = None,
    computed: dict[str, Any] | None = None,
) -> Path:
    """Write ``scorecard.{md,html,csv,json}`` and ``figures/`` for the results in ``out``.

    Args:
        computed: what :func:`compute` gave for these results, when the caller has it already.

    Returns:
        The path of ``scorecard.md``.
    """
    from sao_online.rundir.disk_full import reporting_a_full_disk

    out = Path(out)
    tables, benchmark = read_tables(out / "results")
    result = computed if computed is not None else compute(tables, benchmark, reps)
    advice = "the results are whole: free some space and write it again (--resume does)"
    with reporting_a_full_disk(out / "scorecard.md", advice=advice):
        return _write(out, tables, benchmark, result, reps, extra)


def _write(
    out: Path,
    tables: dict[str, pd.DataFrame],
    benchmark: dict[str, Any],
    result: dict[str, Any],
    reps: int,
    extra: list[Block] | None,
) -> Path:
    """The scorecard's files and figures (see ``write_scorecard``)."""
    protocol = benchmark["protocol"]
    aggregates: Aggregates = result["aggregates"]
    order = result["methods"]
    runs = tables["runs"]
    seeds = sorted(int(s) for s in runs["seed"].unique())
    figure_dir = out / "figures"
    paths = {
        "intervals": figures.plot_aggregate_intervals(
            aggregates.table, figure_dir / "aggregate_intervals.png"
        ),
        "profiles": figures.plot_profiles(
            aggregates.profiles, figure_dir / "performance_profiles.png"
        ),
        "matrix": figures.plot_improvement_matrix(
            aggregates.improvement, order, figure_dir / "improvement_matrix.png"
        ),
        "grid": figures.plot_recovery_grid(
            tables["curves"], tables["shifts"], tables["phases"], figure_dir / "recovery_grid.png"
        ),
    }
    relative = {name: str(path.relative_to(out)) for name, path in paths.items()}
    floor = protocol["score"]["floor"]
    blocks: list[Block] = [
        Heading(f"Benchmark scorecard: suite {protocol['suite']}, tier {protocol['tier']}", 1),
        *(Paragraph(f"**{note}**") for note in provenance_notes(runs, benchmark)),
        Paragraph(
            f"{len(runs)} runs: {len(protocol['tasks'])} tasks x {len(order)} methods x seeds "
            f"{', '.join(map(str, seeds))}. Normalized score of a run on a phase = (its mean "
            f"reward over the phase - floor) / (oracle - floor); floor = `{floor}` (the warm "
            "start, never updated) on the same schedule and seeds, oracle = the env's expected "
            "oracle reward of the phase; 1 = oracle, 0 = no better than not learning "
            "(definitions and edge cases: the documentation's benchmark page, docs/benchmark.md "
            "in the source repository). Aggregates are rliable's on one score per run and "
            "family, the run's mean score over the family's phases after a shift "
            f"({matrix_note(result['units'], order)}): IQM = 25% trimmed mean, 95% "
            "stratified-bootstrap intervals with families as strata. "
            f"{budget_matching(protocol)}{warm_start_design(protocol)}"
        ),
        Heading("Leaderboard"),
        Paragraph(
            "Ranked by the aggregate IQM. A method is separated from the next one down when the "
            "95% interval of P(it scores higher than the next) lies above 1/2 and both have "
            f"{MIN_SEEDS_TO_SEPARATE} seeds or more."
        ),
        Table(leaderboard(aggregates)),
        *_floor_first(aggregates, floor),
        Heading("Per family, beside the aggregate"),
        Paragraph(
            "IQM [95% CI] of each family's scores (one per run: its shifts averaged); (#k) = "
            "rank within the family."
        ),
        Table(family_table(aggregates, order)),
    ]
    if len(aggregates.flips):
        flipped = ", ".join(sorted(aggregates.flips["family"].unique()))
        blocks += [
            Paragraph(f"Ranking flips: {flipped} order(s) some methods against the aggregate:"),
            Table(aggregates.flips),
        ]
    else:
        blocks.append(Paragraph("No family orders any pair of methods against the aggregate."))
    blocks += [
        *readaptation_blocks(result["readaptation"]),
        *tuning_blocks(
            protocol.get("tuning"),
            {method["spec"]: label for label, method in protocol["methods"].items()},
        ),
        Image(
            relative["intervals"], "IQM and optimality gap with 95% stratified-bootstrap intervals"
        ),
        Image(relative["profiles"], "Performance profiles: fraction of scores above tau"),
        Image(relative["matrix"], "Probability of improvement for every pair of methods"),
        *time_blocks(result["time"], protocol, order, reps),
        *exercised_blocks(runs, order),
        Heading("Calibration"),
        Paragraph(
            "Does each task measure adaptation? Learnable: some method's mean score reaches "
            f"{calibration.LEARNABLE:g} on the first scored phase. The shift costs: the floor "
            f"falls short of the oracle by {calibration.SHIFT_COST:g} or more further after the "
            "first shift than before it (on average; further in every seed). Beside them, what "
            "the first shift costs an adapted policy: the reward over the last quarter of the "
            "phase before it minus the reward over the first quarter after it, for the method "
            f"that drops most ({calibration.SHIFT_COST:g} or more on average, a drop in every "
            "seed). Per phase: the floor's and the oracle's reward, and each method's score, "
            "mean [lowest seed, highest seed]. " + calibration.EXPLAINED
        ),
        *(Table(frame) for frame in calibration.tables(result, tables, floor)),
        Heading("Per task and shift"),
        Paragraph(
            "Per shift: the score of the phase before it and of the phase after it, and the "
            "episodes (clock units) after it until the run's smoothed reward first reaches 0.5 x "
            "the phase's oracle reward, censored at the next shift or the end. IQM over seeds "
            "[95% bootstrap CI over seeds]."
        ),
    ]
    for task, per_shift, phase_table in task_tables(result, reps):
        blocks += [
            Heading(task, 3),
            Table(per_shift),
            Table(phase_table, caption=f"{task}: floor ({floor}) and oracle reward per phase"),
        ]
    blocks += [
        Image(relative["grid"], "Reward per task with the shifts marked"),
        *(extra or []),
        Heading("Provenance"),
        Paragraph(
            f"Tier {protocol['tier']}; seeds {', '.join(map(str, seeds))}. Each run records the "
            "hash of its resolved config (results/runs.csv) and the provenance record of the "
            "process that ran it:"
        ),
        Table(provenance_table(tables, benchmark)),
        Table(
            warm_start_table(runs),
            caption="Warm starts: the weights each task's runs started from, per warm-start seed",
        ),
        *_code_blocks(tables, benchmark),
        *_session_blocks(benchmark),
        Table(
            pd.DataFrame(
                [
                    {
                        "task": name,
                        "family": task["family"],
                        "config hash": task["config_hash"],
                        "cpus per run": task["cpus"],
                        "budget": task["config"]["budget"]["episodes"],
                    }
                    for name, task in protocol["tasks"].items()
                ]
            ),
            caption="Tasks: the hash of each resolved task config (benchmark.json holds them)",
        ),
    ]
    title = f"sao-online benchmark: {protocol['suite']} / {protocol['tier']}"
    (out / "scorecard.md").write_text(to_markdown(blocks))
    (out / "scorecard.html").write_text(to_html(blocks, title))
    write_csv(_long_csv(result), out / "scorecard.csv")
    summary = {
        "suite": protocol["suite"],
        "tier": protocol["tier"],
        "seeds": seeds,
        "leaderboard": aggregates.table.to_dict(orient="records"),
        "families": aggregates.families.to_dict(orient="records"),
        "flips": aggregates.flips.to_dict(orient="records"),
        "probability_of_improvement": aggregates.improvement.to_dict(orient="records"),
        "shifts": result["per_shift"].to_dict(orient="records"),
        "readaptation": (
            result["readaptation"]["frame"].to_dict(orient="records")
            if result["readaptation"]
            else []
        ),
        "time_leaderboard": _time_leaderboard(result["time"]),
        "provenance": benchmark.get("provenance", {}),
        "task_config_hashes": {n: t["config_hash"] for n, t in protocol["tasks"].items()},
    }
    (out / "scorecard.json").write_text(json.dumps(_plain(summary), indent=1))
    return out / "scorecard.md"


def _time_leaderboard(time: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The leaderboard on the time axis as records (None: no task is timed)."""
    if time is None:
        return None
    aggregates = time["aggregates"]
    return [] if aggregates is None else aggregates.table.to_dict(orient="records")


def _plain(value: Any) -> Any:
    """``value`` as strict JSON data: numpy scalars as numbers, NaN and infinities as null."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
