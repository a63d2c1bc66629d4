"""The lite tier's warm starts kept in ``benchmarks/warm-starts/lite``: one per task of the tier
as ``configs/suites/core.yaml`` sets it now, each fitted for that task's settings, its weights
intact, and each importable (so ``--warm-starts`` takes them on any machine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sao_online.benchmark import plan_tier
from sao_online.learning.warm_start import import_warm_start, warm_start_settings
from sao_online.util.cache import weights_id

SHIPPED = Path(__file__).resolve().parents[2] / "benchmarks" / "warm-starts" / "lite"
PLAN = plan_tier("core", "lite")


def test_every_task_of_the_lite_tier_has_its_warm_start_and_nothing_else_is_there():
    uses = {task.name for task in PLAN.tasks if task.load([]).model.warm_start}
    assert uses == {"CodeShift", "GridShift", "ReasonShift", "StyleShift", "ToolShift"}
    assert sorted(path.name for path in SHIPPED.iterdir()) == sorted(uses)


@pytest.mark.parametrize("task", PLAN.tasks, ids=[task.name for task in PLAN.tasks])
def test_each_was_fitted_for_its_task_as_the_tier_sets_it_and_imports(task, tmp_path, monkeypatch):
    folder = SHIPPED / task.name
    summary = json.loads((folder / "warm_start.json").read_text())
    config = task.load([])
    assert summary["settings"] == warm_start_settings(config)
    assert summary["weights"] == weights_id(folder)
    assert summary["fitted_on"]["cpu_model"] and summary["fitted_on"]["torch"]
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(tmp_path))
    assert weights_id(import_warm_start(config, folder)) == summary["weights"]
