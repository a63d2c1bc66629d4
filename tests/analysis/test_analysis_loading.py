"""load_runs / load_run_configs on run trees with single parquet files and part-file folders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from analysis_synthetic import episodes_frame, updates_frame, write_run

from sao_online.analysis import RunLoadError, find_run_dirs, load_run_configs, load_runs


def test_whole_tree_mixes_single_files_and_part_folders(simulated_root):
    # odd seeds were written as two part files, even seeds as one file
    assert (simulated_root / "style-shift/sao/seed-1/episodes.parquet").is_dir()
    assert (simulated_root / "style-shift/sao/seed-0/episodes.parquet").is_file()
    episodes = load_runs(simulated_root)
    assert len(episodes) == 2 * 3 * 600
    assert list(episodes.columns[:3]) == ["experiment", "method", "seed"]
    counts = episodes.groupby(["method", "seed"]).size()
    assert (counts == 600).all() and len(counts) == 6
    seed_one = episodes[(episodes["method"] == "sao") & (episodes["seed"] == 1)]
    assert sorted(seed_one["episode"]) == list(range(600))  # both parts, nothing twice


def test_any_level_of_the_tree_can_be_given(simulated_root):
    experiment = simulated_root / "style-shift"
    assert len(load_runs(experiment)) == 3600
    assert set(load_runs(experiment / "grpo")["method"]) == {"grpo"}
    single = load_runs(experiment / "sao" / "seed-2")
    assert set(single["seed"]) == {2} and len(single) == 600
    two = load_runs([experiment / "sao" / "seed-0", experiment / "grpo" / "seed-1"])
    assert set(zip(two["method"], two["seed"])) == {("sao", 0), ("grpo", 1)}
    # the same run reached twice is loaded once
    assert len(load_runs([experiment, experiment / "sao"])) == 3600


def test_other_tables_and_config_attrs(simulated_root):
    updates = load_runs(simulated_root, table="updates")
    assert "charts/explained_variance" in updates.columns
    # grpo runs log no value loss: their rows hold NaN there
    assert updates.loc[updates["method"] == "grpo", "losses/value"].isna().all()
    evals = load_runs(simulated_root, table="evals")
    assert {"eval_phase", "mean_reward"} <= set(evals.columns) and len(evals)
    episodes = load_runs(simulated_root)
    recorded = episodes.attrs["runs"][("style-shift", "sao", 0)]
    assert recorded["change_points"] == [200.0, 400.0]
    assert recorded["phase_names"][1] == "preferred=chuunibyou"


def test_configs_table(simulated_root):
    configs = load_run_configs(simulated_root)
    assert len(configs) == 6
    row = configs[(configs["method"] == "grpo") & (configs["seed"] == 2)].iloc[0]
    assert row["change_points"] == [200.0, 400.0]
    assert row["budget_episodes"] == 600 and row["clock"] == "episodes"
    assert row["config"]["experiment"] == "style-shift"


def test_identity_falls_back_to_folder_names(tmp_path):
    run_dir = write_run(tmp_path, "exp-a", "rloo", 7, episodes_frame(np.ones(16)))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"change_points": [8]}))
    episodes = load_runs(tmp_path)
    assert set(episodes["experiment"]) == {"exp-a"}
    assert set(episodes["method"]) == {"rloo"}
    assert set(episodes["seed"]) == {7}


def test_part_files_with_different_columns_line_up(tmp_path):
    episodes = episodes_frame(np.ones(16))
    run_dir = write_run(tmp_path, "e", "m", 0, episodes, parts=2)
    first = updates_frame(episodes, with_value_loss=False)
    later = updates_frame(episodes, with_value_loss=True)
    folder = run_dir / "updates.parquet"
    first.to_parquet(folder / "part-00000.parquet", index=False)
    later.to_parquet(folder / "part-00001.parquet", index=False)
    (folder / ".part-00002.parquet.tmp").write_text("a chunk still being written")
    updates = load_runs(tmp_path, table="updates")
    assert len(updates) == len(first) + len(later)
    assert updates["charts/explained_variance"].isna().sum() == len(first)


def test_missing_evals_are_skipped_and_all_missing_is_empty(tmp_path):
    run_dir = write_run(tmp_path, "e", "m", 0, episodes_frame(np.ones(8)))
    empty = load_runs(tmp_path, table="evals")
    assert len(empty) == 0
    assert {"experiment", "method", "seed", "eval_phase", "mean_reward"} <= set(empty.columns)
    (run_dir / "evals.parquet").mkdir()  # the folder exists, no part flushed yet
    still_empty = load_runs(tmp_path, table="evals")
    assert len(still_empty) == 0 and "eval_phase" in still_empty.columns
    evals = pd.DataFrame(
        {
            "policy_version": [1],
            "world_time": [4.0],
            "current_phase": [0],
            "eval_phase": [0],
            "mean_reward": [0.5],
            "num_episodes": [8],
        }
    )
    write_run(tmp_path, "e", "m", 1, episodes_frame(np.ones(8)), evals=evals)
    loaded = load_runs(tmp_path, table="evals")
    assert list(loaded["seed"]) == [1]


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(RunLoadError, match="no such file"):
        load_runs(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunLoadError, match="no runs found under"):
        load_runs(tmp_path / "empty")
    run_dir = write_run(tmp_path / "runs", "e", "m", 0, episodes_frame(np.ones(8)))
    with pytest.raises(RunLoadError, match="unknown table 'losses'"):
        load_runs(tmp_path / "runs", table="losses")
    (run_dir / "episodes.parquet").unlink()
    with pytest.raises(RunLoadError, match="has no episodes table"):
        load_runs(tmp_path / "runs")
    (run_dir / "config.yaml").write_text("- just\n- a list\n")
    with pytest.raises(RunLoadError, match="expected a mapping"):
        load_run_configs(tmp_path / "runs")


def test_two_folders_claiming_one_run_are_rejected(tmp_path):
    write_run(tmp_path / "a", "e", "m", 0, episodes_frame(np.ones(8)))
    write_run(tmp_path / "b", "e", "m", 0, episodes_frame(np.ones(8)))
    with pytest.raises(RunLoadError, match="same experiment/method/seed"):
        load_runs([tmp_path / "a", tmp_path / "b"])


def test_find_run_dirs_does_not_descend_into_runs(tmp_path):
    run_dir = write_run(tmp_path, "e", "m", 0, episodes_frame(np.ones(8)))
    (run_dir / "checkpoints" / "step-000001").mkdir(parents=True)
    assert find_run_dirs(tmp_path) == [run_dir.resolve()]


def test_find_run_dirs_follows_symlinked_runs_once(tmp_path):
    # Two --out roots pooled by linking their runs into one folder, plus a link back up.
    first = write_run(tmp_path / "set-1", "e", "m", 0, episodes_frame(np.ones(8)))
    second = write_run(tmp_path / "set-2", "e", "m", 3, episodes_frame(np.ones(8)))
    pooled = tmp_path / "pooled"
    pooled.mkdir()
    (pooled / "seed-0").symlink_to(first, target_is_directory=True)
    (pooled / "seed-3").symlink_to(second, target_is_directory=True)
    (pooled / "loop").symlink_to(tmp_path, target_is_directory=True)
    found = find_run_dirs(pooled)
    assert found == sorted([first.resolve(), second.resolve()])
    assert sorted(load_runs(pooled).groupby("seed").size().index) == [0, 3]
