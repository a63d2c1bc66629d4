"""docs/calibration.md's table of what held StyleShift's and ReasonShift's first phase near the
learnable mark: generated from the kept rows, the rows computed as the script says (checked on a
hand-made run), and the page's reading of them true of the rows."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from docs_scripts import docs_script

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "first_phase_ceiling"


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return pd.read_csv(DATA / "runs.csv")


def _rows(runs: pd.DataFrame, task: str, setting: str, method: str) -> pd.DataFrame:
    rows = runs[(runs["task"] == task) & (runs["setting"] == setting) & (runs["method"] == method)]
    assert len(rows) == 3, (task, setting, method)  # seeds 0-2
    return rows


def test_the_table_is_generated_from_the_kept_rows(runs):
    table = docs_script("data/first_phase_ceiling/table")
    page = table.PAGE.read_text()
    assert table.render(page, runs) == page, "run docs/data/first_phase_ceiling/table.py"


def _episode(index, phase, theta, behavior, reward, **prompt):
    return {
        "episode": index,
        "phase": phase,
        "theta": json.dumps(theta),
        "behavior": behavior,
        "reward": reward,
        **{f"prompt/{key}": value for key, value in prompt.items()},
    }


def test_a_run_s_row_counts_the_second_half_of_its_first_phase(tmp_path):
    collect = docs_script("data/first_phase_ceiling/collect")
    run = tmp_path / "run"
    (run / "episodes.parquet").mkdir(parents=True)
    theta = {"answer_format": "answer"}
    first_half = [_episode(i, 0, theta, "tags", 0.0, task="add", difficulty=1) for i in range(20)]
    # The second half: 12 answers in the live format (10 on reverse, all right; 2 on add: 1 right,
    # too few to name) and 8 in another format, scoring 0.
    second = [
        _episode(20 + i, 0, theta, "answer", 1.0, task="reverse", difficulty=1) for i in range(10)
    ]
    second += [_episode(30, 0, theta, "answer", 1.0, task="add", difficulty=1)]
    second += [_episode(31, 0, theta, "answer", 0.0, task="add", difficulty=1)]
    second += [_episode(32 + i, 0, theta, "boxed", 0.0, task="add", difficulty=1) for i in range(8)]
    later = [_episode(40, 1, {"answer_format": "tags"}, "tags", 1.0, task="add", difficulty=1)]
    episodes = pd.DataFrame(first_half + second + later)
    episodes.iloc[::-1].to_parquet(run / "episodes.parquet" / "part-00000.parquet")  # any order
    config = {"env": {"id": "sao_online/ReasonShift-v0"}, "algorithm": {"name": "sao"}, "seed": 4}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    row = collect.run_row("now", run)
    assert row == {
        "setting": "now",
        "task": "ReasonShift",
        "method": "sao",
        "seed": 4,
        "episodes": 20,
        "right_choice_share": 0.6,
        "right_choice_reward": round(11 / 12, 4),
        "reward_mean": 0.55,
        "first_phase_reward": round(11 / 40, 4),
        "weakest_prompt": "reverse level 1",  # add has 2 right-choice episodes, under 10
        "weakest_prompt_reward": 1.0,
    }
    assert collect.main([]) == 2


def test_a_folder_that_is_neither_a_run_nor_a_benchmark_is_named(tmp_path):
    collect = docs_script("data/first_phase_ceiling/collect")
    with pytest.raises(ValueError, match="neither a run directory nor a benchmark folder"):
        collect._runs(tmp_path)


def test_at_the_earlier_settings_the_learners_made_the_choice_and_it_was_worth_less(runs):
    style = _rows(runs, "StyleShift", "earlier", "sao_running_mean")
    style_floor = _rows(runs, "StyleShift", "earlier", "frozen")
    assert (style["right_choice_share"] > 0.9).all()
    assert style["right_choice_reward"].mean() < style_floor["right_choice_reward"].mean() - 0.05
    assert (style_floor["right_choice_reward"] < 0.96).all()  # most lines, not all
    reason = _rows(runs, "ReasonShift", "earlier", "sao_running_mean")
    reason_floor = _rows(runs, "ReasonShift", "earlier", "frozen")
    assert (reason["right_choice_share"] > 0.9).all()
    for rows in (reason, reason_floor):
        assert set(rows["weakest_prompt"]) == {"add level 2"}
    assert (reason_floor["weakest_prompt_reward"] < 0.1).all()  # fewer than one in ten
    assert (reason["weakest_prompt_reward"] < 0.05).all()  # almost none
    assert 0.7 < reason["right_choice_reward"].mean() < 0.8  # about three quarters


def test_at_the_current_settings_the_choice_is_worth_nearly_the_oracle_s_reward(runs):
    style = _rows(runs, "StyleShift", "now", "sao_running_mean")
    style_floor = _rows(runs, "StyleShift", "now", "frozen")
    assert (style_floor["right_choice_reward"] >= 0.99).all()  # nearly every line
    assert (style["right_choice_reward"] > 0.95).all()  # and the learners keep it
    reason = _rows(runs, "ReasonShift", "now", "sao_running_mean")
    reason_floor = _rows(runs, "ReasonShift", "now", "frozen")
    assert (reason_floor["right_choice_reward"] > 0.9).all()
    for rows in (reason, reason_floor):
        assert set(rows["weakest_prompt"]) == {"add level 1"}
    assert (
        reason["weakest_prompt_reward"].values < reason_floor["weakest_prompt_reward"].values
    ).all()


def test_the_earlier_rows_repeat_lite_on_amd_s_runs(runs):
    phases = pd.read_csv(DATA.parents[2] / "benchmarks/calibration/lite-on-amd/results/phases.csv")
    first = phases[phases["phase"] == 0].set_index(["task", "method", "seed"])["reward_mean"]
    earlier = runs[runs["setting"] == "earlier"].set_index(["task", "method", "seed"])
    gap = (earlier["first_phase_reward"] - first.reindex(earlier.index)).abs()
    frozen = gap.index.get_level_values("method") == "frozen"
    assert (gap[frozen] < 1e-4).all()  # reward for reward (the rows are rounded to 4 places)
    assert (gap[~frozen] < 0.01).all() and gap.notna().all()


def test_the_current_rows_are_the_kept_benchmark_s_runs(runs):
    folder = DATA.parents[2] / "benchmarks/calibration/style-reason-headroom/results/phases.csv"
    phases = pd.read_csv(folder)
    first = phases[phases["phase"] == 0].set_index(["task", "method", "seed"])["reward_mean"]
    now = runs[runs["setting"] == "now"].set_index(["task", "method", "seed"])
    assert ((now["first_phase_reward"] - first.reindex(now.index)).abs() < 1e-4).all()


def test_at_the_current_settings_both_are_learnable_with_a_margin_on_every_seed():
    from sao_online.benchmark.scorecard import compute, read_tables

    root = DATA.parents[2] / "benchmarks" / "calibration"
    now, before = (
        compute(*read_tables(root / name / "results"), 200)["scores"]
        for name in ("style-reason-headroom", "lite-on-amd")
    )
    for scores, seeds in ((now, 6), (before, 3)):
        first = scores[(scores["phase"] == 0) & scores["task"].isin(["ReasonShift", "StyleShift"])]
        for method in ("sao_running_mean", "grpo_dis"):
            rows = first[first["method"] == method].groupby("task")["score"]
            assert (rows.size() == seeds).all()
            if scores is now:
                assert (rows.min() > 0.55).all(), method
            else:
                assert (rows.mean() <= 0.505).all(), method  # 0.50 or lower, as printed
    sao = now[(now["phase"] == 0) & (now["task"] == "StyleShift") & (now["method"] == "sao")]
    assert (sao["score"] < 0.35).all()
