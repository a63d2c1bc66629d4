"""A finished run resumed with a larger budget trains on to it, as one run."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from tiny_model import model_section

from sao_online.analysis import load_runs, recovery_metrics
from sao_online.config import load_config
from sao_online.rundir.layout import RunDirError
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.launch import budget_extension, run_experiment


def extension_config(episodes: int, **model):
    return load_config(
        {
            "experiment": "extend",
            "schedule": {
                "parameters": {
                    "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": [0, 24]}
                }
            },
            "model": {**model_section(), **model},
            "algorithm": {"name": "sao_running_mean"},
            "rollout": {
                "batch_size": 8,
                "num_slots": 8,
                "max_turns": 1,
                "max_action_tokens": 12,
                "max_episode_tokens": 96,
            },
            "runtime": {"backend": "sync"},
            "budget": {"episodes": episodes},
            "logging": {"checkpoint_every": 2},
        }
    )


@pytest.mark.filterwarnings("ignore::sao_online.runtime.envs.BudgetWarning")
def test_an_extended_run_is_the_run_that_never_stopped_and_reports_as_one(tmp_path):
    extended, straight = tmp_path / "runs" / "extended", tmp_path / "straight"
    run_experiment(extension_config(16), out=extended, threads=1)  # ends before the shift at 24
    summary = run_experiment(extension_config(48), out=extended, resume=True, threads=1)
    assert summary["episodes"] == 48 and summary["updates"] == 6
    run_experiment(extension_config(48), out=straight, threads=1)

    episodes = RunLog(extended).read("episodes").sort_values("episode", ignore_index=True)
    assert list(episodes["episode"]) == list(range(48))  # every episode exactly once
    reference = RunLog(straight).read("episodes").sort_values("episode", ignore_index=True)
    # The sync backend is deterministic: extending is the same as never having stopped.
    for column in ("reward", "phase", "world_time", "behavior", "staleness"):
        pd.testing.assert_series_equal(episodes[column], reference[column])
    updates = RunLog(extended).read("updates")
    assert list(updates["version"]) == [1, 2, 3, 4, 5, 6]
    assert list(updates["losses/policy"]) == pytest.approx(
        list(RunLog(straight).read("updates")["losses/policy"])
    )
    saved = yaml.safe_load((extended / "config.yaml").read_text())
    assert saved["budget"]["episodes"] == 48 and saved["change_points"] == [24.0]

    loaded = load_runs(tmp_path / "runs")
    assert loaded.groupby(["experiment", "method", "seed"]).ngroups == 1 and len(loaded) == 48
    [shift] = recovery_metrics(loaded).itertuples()  # the shift the extension brought in
    assert shift.change_point == 1 and shift.method == "sao_running_mean"


def test_a_budget_never_shrinks_and_a_budget_shaped_warm_start_cannot_grow(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"budget": {"episodes": 32}}))
    assert budget_extension(run_dir, extension_config(32)) is None
    assert budget_extension(run_dir, extension_config(48)).episodes_before == 32
    with pytest.raises(RunDirError, match="budget.episodes can only grow: .* 32, got 16"):
        budget_extension(run_dir, extension_config(16))
    shaped = extension_config(48, warm_start=True, warm_start_regimes="schedule")
    with pytest.raises(RunDirError, match="warm_start_regimes: schedule"):
        budget_extension(run_dir, shaped)
