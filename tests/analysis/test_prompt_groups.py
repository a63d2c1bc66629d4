"""Reward per prompt-key value: hand-computed means on synthetic runs, and the report's table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import episodes_frame, write_run

from sao_online.analysis import load_runs, write_report
from sao_online.analysis.prompt_groups import final_part_of_phases, reward_by_prompt_key

# Two phases of 8 episodes (shift at 8); difficulty alternates 1, 2; task goes add, add, sort,
# sort. With the default final fraction 0.5 each run contributes episodes 4-7 and 12-15.
PHASE = [0] * 8 + [1] * 8
DIFFICULTY = [1, 2] * 8
TASK = ["add", "add", "sort", "sort"] * 4
REWARDS = {
    0: [0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1],
    1: [1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0, 0],
}


def keyed_episodes(seed: int) -> pd.DataFrame:
    frame = episodes_frame(REWARDS[seed], phase=PHASE, seed=seed)
    frame["prompt/difficulty"] = pd.array(DIFFICULTY, dtype="Int64")
    frame["prompt/task"] = pd.array(TASK, dtype="string")
    return frame


@pytest.fixture
def keyed_root(tmp_path):
    for seed in (0, 1):
        write_run(
            tmp_path / "runs",
            "reason",
            "sao",
            seed,
            keyed_episodes(seed),
            change_points=[8],
            phase_names=["answer", "tags"],
            parts=2,
        )
    return tmp_path / "runs"


def test_means_per_phase_and_value_over_the_last_half_of_each_phase(keyed_root):
    table = reward_by_prompt_key(load_runs(keyed_root)).set_index(["key", "phase", "value"])
    # Phase 0, episodes 4-7: seed 0 rewards 1 0 1 1, seed 1 rewards 0 0 1 0.
    # difficulty 1 (episodes 4, 6): 1, 1, 0, 1 -> 0.75; difficulty 2 (5, 7): 0, 1, 0, 0 -> 0.25.
    # task add (4, 5): 1, 0, 0, 0 -> 0.25; sort (6, 7): 1, 1, 1, 0 -> 0.75.
    # Phase 1, episodes 12-15: seed 0 rewards 1 1 0 1, seed 1 rewards 0 1 0 0.
    # difficulty 1 (12, 14): 1, 0, 0, 0 -> 0.25; difficulty 2 (13, 15): 1, 1, 1, 0 -> 0.75.
    # task add (12, 13): 1, 1, 0, 1 -> 0.75; sort (14, 15): 0, 1, 0, 0 -> 0.25.
    expected = {
        ("difficulty", 0, 1): 0.75,
        ("difficulty", 0, 2): 0.25,
        ("difficulty", 1, 1): 0.25,
        ("difficulty", 1, 2): 0.75,
        ("task", 0, "add"): 0.25,
        ("task", 0, "sort"): 0.75,
        ("task", 1, "add"): 0.75,
        ("task", 1, "sort"): 0.25,
    }
    assert len(table) == len(expected)
    for key, mean in expected.items():
        assert table.loc[key, "mean_reward"] == pytest.approx(mean)
        assert table.loc[key, "episodes"] == 4
        assert table.loc[key, "seeds"] == 2


def test_whole_phases_and_dropped_or_unkeyed_episodes():
    frame = keyed_episodes(0).assign(experiment="e", method="m", seed=0)
    frame.loc[1, ["reward", "dropped"]] = [np.nan, True]  # lost to a worker fault
    frame.loc[3, "prompt/difficulty"] = pd.NA  # an env that left the key out
    table = reward_by_prompt_key(frame, final_fraction=1.0).set_index(["key", "phase", "value"])
    # Phase 0, all episodes of seed 0: difficulty 1 is episodes 0, 2, 4, 6 -> 0, 0, 1, 1;
    # difficulty 2 is episodes 5, 7 (1 dropped, 3 unkeyed) -> 0, 1.
    assert table.loc[("difficulty", 0, 1), ["episodes", "mean_reward"]].tolist() == [4, 0.5]
    assert table.loc[("difficulty", 0, 2), ["episodes", "mean_reward"]].tolist() == [2, 0.5]
    # The unkeyed episode still counts for the task key: add is episodes 0, 4, 5 (1 dropped).
    assert table.loc[("task", 0, "add"), ["episodes", "mean_reward"]].tolist() == pytest.approx(
        [3, 1 / 3]
    )


def test_the_final_part_rounds_up_and_is_taken_per_run_and_phase():
    frame = keyed_episodes(0).assign(experiment="e", method="m", seed=0)
    kept = final_part_of_phases(frame.iloc[:7], final_fraction=0.3)  # ceil(0.3 * 7) = 3
    assert kept["episode"].tolist() == [4, 5, 6]
    with pytest.raises(ValueError, match="final_fraction"):
        final_part_of_phases(frame, final_fraction=0)


def test_runs_without_prompt_keys_give_an_empty_table():
    frame = episodes_frame([0.0, 1.0]).assign(experiment="e", method="m", seed=0)
    assert reward_by_prompt_key(frame).empty


def test_the_report_shows_the_table_and_writes_the_csv(keyed_root, tmp_path):
    report = write_report(keyed_root, tmp_path / "report", reps=50)
    text = report.read_text()
    assert "Reward by kind of prompt" in text
    assert "the last 50% of each run's episodes in each phase" in text
    # method | difficulty | phase 0 (answer) | phase 1 (tags)
    assert "| sao | 1 | 0.75 (4) | 0.25 (4) |" in text
    assert "| sao | sort | 0.75 (4) | 0.25 (4) |" in text
    csv = pd.read_csv(tmp_path / "report" / "reward_by_prompt.csv")
    assert len(csv) == 8 and set(csv["key"]) == {"difficulty", "task"}
    assert "reward_by_prompt.csv" in text


def test_a_report_without_prompt_keys_has_no_such_table(tmp_path):
    write_run(tmp_path / "runs", "plain", "sao", 0, episodes_frame([0.0, 1.0] * 8))
    text = write_report(tmp_path / "runs", tmp_path / "report", reps=50).read_text()
    assert "Reward by kind of prompt" not in text
    assert not (tmp_path / "report" / "reward_by_prompt.csv").exists()
