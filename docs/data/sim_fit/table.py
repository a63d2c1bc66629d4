"""The fitted-versus-real tables of ``docs/guides/simulated-runtime.md``, generated from
``fitted.yaml`` and ``profiles.csv`` (``measure.py`` writes them).

Usage: python table.py          # rewrites both tables between the page's markers

- ``<!-- sim-fit table: costs -->``: the cost model fitted to the real run;
- ``<!-- sim-fit table: profiles -->``: what the runtime did in each real run and in the
  simulated run of the same seed, side by side;
- ``<!-- sim-fit table: tolerances -->``: per measure, the largest difference between a real run
  and the simulated run of its seed: the tolerance the kept data support.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from marked_table import replace_marked  # noqa: E402

PAGE = HERE.parents[1] / "guides" / "simulated-runtime.md"
END = "<!-- end sim-fit table -->"

#: profile column -> (row label, format)
MEASURES = {
    "episodes_per_second": ("episodes per second (first update to last)", "{:.1f}"),
    "learner_busy_share": ("learner busy", "{:.0%}"),
    "learner_wait_episodes_share": ("learner waiting for episodes", "{:.0%}"),
    "learner_wait_bound_share": ("learner waiting for the staleness bound", "{:.0%}"),
    "staleness_mean": ("mean staleness of trained episodes", "{:.2f}"),
    "dis_masked_share": ("action tokens DIS masked", "{:.2%}"),
    "first_update_seconds": ("seconds to the first update", "{:.1f}"),
}


def costs_table(fitted: dict) -> str:
    lines = ["| field | fitted (seconds) |", "|---|---|"]
    for field, value in fitted["runtime"]["sim"].items():
        lines.append(f"| `{field}` | {value:.3g} |")
    return "\n".join(lines)


def profiles_table(profiles: pd.DataFrame) -> str:
    seeds = sorted(profiles["seed"].unique())
    header = " | ".join(f"seed {s} real | seed {s} simulated" for s in seeds)
    lines = [f"| | {header} |", "|---|" + "---|" * (2 * len(seeds))]
    shares = sorted(c for c in profiles.columns if c.startswith("staleness_share_"))
    rows = {**MEASURES}
    for column in shares:
        rows[column] = (f"trained episodes {column.rsplit('_', 1)[1]} versions stale", "{:.0%}")
    for column, (label, form) in rows.items():
        cells = []
        for seed in seeds:
            for backend in ("local", "simulated"):
                row = profiles[(profiles["seed"] == seed) & (profiles["backend"] == backend)]
                value = row[column].iloc[0] if column in row and len(row) else float("nan")
                cells.append("-" if pd.isna(value) else form.format(value))
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


#: measure -> (row label, how a difference is stated)
TOLERANCES = {
    "episodes_per_second": ("episodes per second", "relative"),
    "learner_busy_share": ("learner busy (share of the time)", "points"),
    "dis_masked_share": ("action tokens DIS masked (share)", "points"),
    "staleness_mean": ("mean staleness (versions)", "absolute"),
    "staleness_share_4": ("trained episodes at the bound (share)", "points"),
    "first_update_seconds": ("seconds to the first update", "relative"),
}


def tolerances_table(profiles: pd.DataFrame) -> str:
    lines = ["| measure | largest difference, simulated against real |", "|---|---|"]
    real = profiles[profiles["backend"] == "local"].set_index("seed")
    simulated = profiles[profiles["backend"] == "simulated"].set_index("seed")
    for column, (label, kind) in TOLERANCES.items():
        if column not in profiles:
            continue
        difference = simulated[column] - real[column]
        if kind == "relative":
            largest = (difference / real[column]).abs().max()
            text = f"{largest:.1%} of the real value"
        elif kind == "points":
            text = f"{100 * difference.abs().max():.1f} percentage points"
        else:
            text = f"{difference.abs().max():.2f}"
        lines.append(f"| {label} | {text} |")
    return "\n".join(lines)


def render(page: str) -> str:
    fitted = yaml.safe_load((HERE / "fitted.yaml").read_text())
    profiles = pd.read_csv(HERE / "profiles.csv")
    page = replace_marked(
        page, PAGE, "<!-- sim-fit table: costs -->\n", END, costs_table(fitted) + "\n"
    )
    page = replace_marked(
        page, PAGE, "<!-- sim-fit table: profiles -->\n", END, profiles_table(profiles) + "\n"
    )
    return replace_marked(
        page, PAGE, "<!-- sim-fit table: tolerances -->\n", END, tolerances_table(profiles) + "\n"
    )


if __name__ == "__main__":
    PAGE.write_text(render(PAGE.read_text()))
    print(f"wrote {PAGE}")
