"""The learning tests' kept warm starts (``kept/``): each fitted for its module's setting, with
the weights its record names; a stale one is refused, naming what differs and the command that
fits it again. Cheap (no training): part of `make test`, so a setting changed without a refit
fails there first."""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil

import pytest
from fit_warm_starts import families
from learning_kit import (
    KEPT,
    RECORD,
    LearningSetting,
    StaleWarmStart,
    differences,
    fitted_for,
    kept_warm_start,
)


def setting_of(family: str) -> LearningSetting:
    return LearningSetting(**importlib.import_module(f"test_{family}_learns").SETTING)


def test_every_learning_test_has_a_kept_warm_start_and_nothing_else_is_kept():
    assert families() == ["code_shift", "grid_shift", "reason_shift", "style_shift", "tool_shift"]
    assert sorted(path.name for path in KEPT.iterdir()) == families()


@pytest.mark.parametrize("family", families())
def test_each_kept_warm_start_was_fitted_for_its_modules_setting(family):
    assert kept_warm_start(setting_of(family), family) == KEPT / family


def test_a_changed_setting_is_refused_naming_the_field_and_the_command(tmp_path):
    setting = setting_of("grid_shift")
    changed = dataclasses.replace(setting, sft_steps=setting.sft_steps + 1)
    with pytest.raises(StaleWarmStart) as refused:
        kept_warm_start(changed, "grid_shift")
    message = str(refused.value)
    assert f"recipe.sft_steps: kept {setting.sft_steps}, the test's {setting.sft_steps + 1}" in (
        message
    )
    assert "python tests/learning/fit_warm_starts.py grid_shift" in message


def test_changed_weights_and_a_missing_folder_are_refused(tmp_path):
    setting = setting_of("grid_shift")
    shutil.copytree(KEPT / "grid_shift", tmp_path / "grid_shift")
    record = json.loads((tmp_path / "grid_shift" / RECORD).read_text())
    (tmp_path / "grid_shift" / RECORD).write_text(json.dumps({**record, "weights": "0" * 16}))
    with pytest.raises(StaleWarmStart, match="its weights are not the 0000000000000000"):
        kept_warm_start(setting, "grid_shift", kept=tmp_path)
    with pytest.raises(StaleWarmStart, match="no kept warm start"):
        kept_warm_start(setting, "style_shift", kept=tmp_path)


def test_differences_name_each_leaf_that_differs():
    kept = {"recipe": {"lr": 0.1, "steps": 5}, "settings": {"env": {"id": "a"}}}
    wanted = {"recipe": {"lr": 0.1, "steps": 6}, "settings": {"env": {"id": "b"}}, "new": 1}
    assert differences(kept, wanted) == [
        "new: kept None, the test's 1",
        "recipe.steps: kept 5, the test's 6",
        "settings.env.id: kept 'a', the test's 'b'",
    ]
    assert differences(kept, kept) == []


def test_the_record_holds_what_the_setting_is_fitted_for():
    setting = setting_of("style_shift")
    record = json.loads((KEPT / "style_shift" / RECORD).read_text())
    assert record["fitted_for"] == fitted_for(setting)
    assert record["fitted_for"]["recipe"]["sft_steps"] == setting.sft_steps
    assert record["fitted_for"]["settings"]["env"]["id"] == "sao_online/StyleShift-v0"
