"""The scorecard's tables: the leaderboard, per family, per task and shift, provenance and
sessions, each a DataFrame of formatted cells (IQM with its interval). ``scorecard`` computes
what they show and lays them out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from sao_online.analysis.suite_metrics import stratified_interval, trimmed_iqm
from sao_online.benchmark.scores import MIN_SEEDS_TO_SEPARATE, Aggregates, separated


def fixed(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` places, rounded first so a tiny negative never prints "-0.00"."""
    return f"{round(float(value), digits) + 0.0:.{digits}f}"


def interval_cell(point: float, lower: float, upper: float, digits: int = 2) -> str:
    """``point [lower, upper]`` to ``digits`` places; the point alone when the interval is one."""
    if not np.isfinite(point):
        return "—"
    point, lower, upper = (round(float(v), digits) + 0.0 for v in (point, lower, upper))
    if np.isclose(lower, upper) and np.isclose(point, lower):
        return fixed(point, digits)
    return f"{fixed(point, digits)} [{fixed(lower, digits)}, {fixed(upper, digits)}]"


def over_seeds(values: np.ndarray, reps: int, digits: int = 2) -> str:
    """The IQM of ``values`` (NaN left out) with its 95% bootstrap interval, as a cell."""
    values = values[np.isfinite(values)]
    if not len(values):
        return "—"
    estimate = stratified_interval([values], lambda x: trimmed_iqm(x, axis=-1), reps=reps)
    return interval_cell(estimate.point, estimate.lower, estimate.upper, digits)


def leaderboard(aggregates: Aggregates) -> pd.DataFrame:
    """Methods ranked by the aggregate IQM; each says whether it is separated from the next."""
    rows = []
    table = aggregates.table
    for position, row in enumerate(table.itertuples(index=False)):
        verdict = "none (last)"  # no empty cell
        if position + 1 < len(table):
            verdict = "no comparison"
            below = table.iloc[position + 1]["method"]
            is_separated, estimate = separated(aggregates.improvement, row.method, below)
            if estimate is not None:
                few = estimate["seeds"] < MIN_SEEDS_TO_SEPARATE
                verdict = (
                    f"{'separated from' if is_separated else 'not separated from'} {below}: "
                    f"P(> {below}) = "
                    + interval_cell(estimate["probability"], estimate["lower"], estimate["upper"])
                    + (f" (fewer than {MIN_SEEDS_TO_SEPARATE} seeds)" if few else "")
                )
        rows.append(
            {
                "rank": row.rank,
                "method": row.method,
                "IQM [95% CI]": interval_cell(row.iqm, row.iqm_lower, row.iqm_upper),
                "optimality gap [95% CI]": interval_cell(
                    row.optimality_gap, row.gap_lower, row.gap_upper
                ),
                "scores": row.scores,
                "next below": verdict,
            }
        )
    return pd.DataFrame(rows)


def family_table(aggregates: Aggregates, order: list[str]) -> pd.DataFrame:
    """Methods x families: each family's IQM [CI] and rank, beside the aggregate."""
    frame = pd.DataFrame({"method": order})
    overall = aggregates.table.set_index("method")
    frame["aggregate"] = [
        interval_cell(*overall.loc[m, ["iqm", "iqm_lower", "iqm_upper"]])
        if m in overall.index
        else "—"
        for m in order
    ]
    for family, part in aggregates.families.groupby("family", sort=True):
        cells = part.set_index("method")
        frame[family] = [
            f"{interval_cell(*cells.loc[m, ['iqm', 'iqm_lower', 'iqm_upper']])} "
            f"(#{int(cells.loc[m, 'rank'])})"
            if m in cells.index
            else "—"
            for m in order
        ]
    return frame


def time_cell(times: np.ndarray, censored: pd.Series, reps: int) -> str:
    """A time to 0.5 x oracle over seeds, with how many of them were censored."""
    text = over_seeds(times, reps, digits=0)
    count = int(censored.fillna(False).astype(bool).sum())
    return text + (f" ({count} of {len(censored)} censored)" if count else "")


def shift_table(
    shifts: pd.DataFrame, order: list[str], cells: Callable[[pd.DataFrame], dict[str, str]]
) -> pd.DataFrame:
    """One task's methods x shifts: per method its seeds and, per shift k, the cells ``cells``
    makes of the shift's rows (one per seed), each named ``shift k: <cell>``."""
    rows = []
    for method in order:
        mine = shifts[shifts["method"] == method]
        if not len(mine):
            continue
        row = {"method": method, "seeds": int(mine["seed"].nunique())}
        for shift, part in mine.groupby("shift", sort=True):
            row |= {f"shift {shift}: {name}": cell for name, cell in cells(part).items()}
        rows.append(row)
    return pd.DataFrame(rows)


def task_tables(result: dict, reps: int) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """Per task: (name, per-shift table of methods, phase table of floor and oracle)."""
    per_shift, scores, order = result["per_shift"], result["scores"], result["methods"]

    def cells(part: pd.DataFrame) -> dict[str, str]:
        return {
            "score before": over_seeds(part["score_before"].to_numpy(float), reps),
            "score after": over_seeds(part["score_after"].to_numpy(float), reps),
            "episodes to 0.5 x oracle": time_cell(
                part["time_to_half_oracle"].to_numpy(float), part["censored"], reps
            ),
        }

    out = []
    for task in sorted(scores["task"].unique()):
        table = shift_table(per_shift[per_shift["task"] == task], order, cells)
        phase_rows = (
            scores[scores["task"] == task]
            .groupby(["phase", "phase_name"], sort=True)
            .agg(floor=("floor", "first"), oracle=("oracle", "first"), note=("note", "first"))
            .reset_index()
        )
        phase_rows["floor"] = phase_rows["floor"].map(lambda v: f"{v:.3f}")
        phase_rows["oracle"] = phase_rows["oracle"].map(lambda v: f"{v:.3f}")
        phase_rows["note"] = phase_rows["note"].fillna("").replace("", "scored")  # no empty cell
        out.append((task, table, phase_rows))
    return out


def provenance_table(tables: dict[str, pd.DataFrame], benchmark: dict[str, Any]) -> pd.DataFrame:
    records = benchmark.get("provenance", {})
    counts = tables["runs"]["provenance_id"].value_counts()
    rows = []
    for ident, record in records.items():
        machine, packages = record.get("machine", {}), record.get("packages", {})
        commit = record.get("commit")
        rows.append(
            {
                "id": ident,
                "runs": int(counts.get(ident, 0)),
                "commit": commit[:12] + (" (dirty)" if record.get("dirty") else "")
                if commit
                else "not a git checkout",
                "sao-online": packages.get("sao-online"),
                "torch": packages.get("torch"),
                "cores": f"{machine.get('usable_cores')}/{machine.get('cores')}",
                "CPU": machine.get("cpu_model"),
                "GPU": ", ".join(machine.get("gpus") or []) or "none",
            }
        )
    return pd.DataFrame(rows)


def _modules_text(modules: list[dict[str, Any]]) -> str:
    own = [m for m in modules if not m.get("builtin")]
    shown = [f"{m['module']} ({m.get('file') or '?'}, sha256 {m.get('sha256')})" for m in own]
    if len(own) < len(modules):
        shown.append("sao-online's own")
    return "; ".join(shown) or "-"


def code_table(tables: dict[str, pd.DataFrame], benchmark: dict[str, Any]) -> pd.DataFrame:
    """The code each run ran (``benchmark.json``'s ``code``): per code id, the method's spec and
    the modules its method and environment came from (a user's by the sha256 of their source,
    sao-online's by its version and commit), and how many runs ran it."""
    runs = tables["runs"]
    counts = runs["code_id"].value_counts() if "code_id" in runs else pd.Series(dtype=int)
    rows = []
    for ident, code in sorted((benchmark.get("code") or {}).items()):
        package = code.get("package") or {}
        commit = package.get("commit")
        method, env = code.get("method") or {}, code.get("env") or {}
        rows.append(
            {
                "code id": ident,
                "runs": int(counts.get(ident, 0)),
                "method": method.get("spec", "?"),
                "method from": _modules_text(method.get("modules") or []),
                "environment": env.get("id", "?"),
                "environment from": _modules_text(env.get("modules") or []),
                "sao-online": f"{package.get('version')} at "
                + (
                    f"{commit[:12]}{' (dirty)' if package.get('dirty') else ''}"
                    if commit
                    else "no git checkout"
                ),
            }
        )
    return pd.DataFrame(rows)


def _percent(share: Any) -> str:
    return "" if share is None else f"{share:.0%}"


def session_table(benchmark: dict[str, Any]) -> pd.DataFrame:
    """How long each command that ran runs took, where, and how busy it kept the cores
    (``benchmark.json``'s sessions; the CPU columns are empty for a session that did not
    measure them, such as one on Ray)."""
    return pd.DataFrame(
        [
            {
                "runs": session.get("runs", ""),
                "warm starts": "" if session.get("warm_starts") is None else session["warm_starts"],
                "wall seconds": session.get("seconds", ""),
                "backend": session.get("backend", ""),
                "at once": session.get("parallel", ""),
                "cores": session.get("machine", {}).get("usable_cores", ""),
                "CPU": session.get("machine", {}).get("cpu_model", ""),
                "CPU seconds": session.get("cpu_seconds", ""),
                "cores busy": _percent(session.get("core_share")),
                "others' share": _percent(session.get("other_share")),
                "ended": session.get("ended", "finished"),  # older records: finished ones only
            }
            for session in benchmark.get("sessions") or []
        ]
    )


def _seed_cell(scores: pd.Series, seed: int) -> str:
    if seed not in scores.index:
        return "—"
    value = float(scores[seed])
    return fixed(value) if np.isfinite(value) else "not scored"


def first_phase_table(
    sets: list[tuple[str, pd.DataFrame, str, dict[tuple[str, str], str]]],
    tasks: list[str] | None = None,
    methods: list[str] | None = None,
) -> pd.DataFrame:
    """The data of the learnable check, seed by seed: each method's score on each task's first
    scored phase, one row per (task, method, result set), one column per seed and the mean.

    ``sets`` are (label, scores, floor method, machines) of each result set (another machine,
    another seed set), ``machines`` naming the CPU each (task, method)'s runs ran on; ``tasks``
    and ``methods`` keep only those (default: every one; the floor, at 0 by definition, is left
    out). ``—`` where a set has no run of a seed."""
    rows, seeds = [], set()
    for label, scores, floor, machines in sets:
        scored = scores[scores["score"].notna() & (scores["method"] != floor)]
        first = scored.groupby("task")["phase"].transform("min")
        firsts = scored[scored["phase"] == first]
        for (task, method), part in firsts.groupby(["task", "method"], sort=True):
            if (tasks and task not in tasks) or (methods and method not in methods):
                continue
            seeds |= {int(seed) for seed in part["seed"]}
            where = machines.get((task, method), "?")
            rows.append((task, method, label, where, part.set_index("seed")["score"]))
    columns = sorted(seeds)
    table = []
    for task, method, label, where, mine in sorted(rows, key=lambda row: row[:2]):
        row = {"task": task, "method": method, "set": label, "machine": where}
        row |= {f"seed {seed}": _seed_cell(mine, seed) for seed in columns}
        table.append(row | {"mean": fixed(float(mine.mean()))})
    return pd.DataFrame(table)


def per_seed_table(scores: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Every score the aggregate pools, one column per seed: rows (task, phase after a shift,
    method); ``not scored`` where the phase has no score, ``—`` where the seed has no run."""
    after = scores[scores["phase"] >= 1]
    seeds = sorted(int(s) for s in after["seed"].unique())
    rows = []
    for (task, phase), part in after.groupby(["task", "phase"], sort=True):
        for method in order:
            mine = part[part["method"] == method].set_index("seed")["score"]
            if len(mine):
                row = {
                    "task": task,
                    "phase": f"{int(phase)}: {part['phase_name'].iloc[0]}",
                    "method": method,
                }
                rows.append(row | {f"seed {seed}": _seed_cell(mine, seed) for seed in seeds})
    return pd.DataFrame(rows)


def warm_start_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task and warm-start seed: the weights id its runs started from and how many runs
    (and of which seeds) did."""
    rows = []
    for (task, seed), part in runs.groupby(["task", "warm_start_seed"], sort=True):
        weights = sorted(str(w) for w in part["warm_start"].dropna().unique())
        rows.append(
            {
                "task": task,
                "warm-start seed": int(seed),
                "weights id": ", ".join(weights) or "not recorded",
                "runs": len(part),
                "run seeds": ", ".join(str(s) for s in sorted(set(part["seed"]))),
            }
        )
    return pd.DataFrame(rows)
