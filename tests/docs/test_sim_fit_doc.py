"""The simulated runtime guide's fitted-versus-real tables are the ones generated from the kept
data, the data are what the guide says they are, and the cpu-tiny preset is the kept fit."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml
from docs_scripts import docs_script

from sao_online.runtime.simulation.costs import PRESETS

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "sim_fit"


def test_the_guide_tables_are_generated_from_the_kept_data():
    table = docs_script("data/sim_fit/table")
    page = table.PAGE.read_text()
    assert table.render(page) == page, "run docs/data/sim_fit/table.py"


def test_each_seed_ran_on_both_backends_from_a_committed_tree():
    profiles = pd.read_csv(DATA / "profiles.csv")
    pairs = set(zip(profiles["seed"], profiles["backend"]))
    assert pairs == {(s, b) for s in (0, 1) for b in ("local", "simulated")}
    assert (profiles["episodes"] == 3000).all()
    record = yaml.safe_load((DATA / "provenance.json").read_text())
    assert record["provenance"]["dirty"] is False and record["provenance"]["commit"]


def test_the_tolerances_are_the_largest_differences_by_hand():
    table = docs_script("data/sim_fit/table")
    profiles = pd.DataFrame(
        {
            "seed": [0, 0, 1, 1],
            "backend": ["local", "simulated"] * 2,
            "episodes_per_second": [20.0, 21.0, 25.0, 24.0],
            "staleness_mean": [3.9, 3.5, 3.8, 3.8],
        }
    )
    lines = table.tolerances_table(profiles).splitlines()
    assert lines[2] == "| episodes per second | 5.0% of the real value |"
    assert lines[3] == "| mean staleness (versions) | 0.40 |"
    assert len(lines) == 4


def test_the_cpu_tiny_preset_is_the_kept_fit():
    fitted = yaml.safe_load((DATA / "fitted.yaml").read_text())["runtime"]["sim"]
    preset = PRESETS["cpu-tiny"].costs.to_dict()
    assert set(preset) == set(fitted)
    for field, value in fitted.items():
        assert preset[field] == float(f"{value:.3g}"), field
