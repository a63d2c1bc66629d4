"""Recovery metrics on synthetic curves whose answers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import episodes_frame

from sao_online.analysis import load_runs, recovery_metrics


def as_run(frame: pd.DataFrame, method: str = "sao", seed: int = 0) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(0, "experiment", "toy")
    frame.insert(1, "method", method)
    frame.insert(2, "seed", seed)
    return frame


def step_and_ramp() -> pd.DataFrame:
    """Reward 1 on [0, 20); at the shift it falls to 0 and climbs 0.1 per episode to 1 at 30."""
    times = np.arange(60)
    rewards = np.where(times < 20, 1.0, np.clip((times - 20) / 10, 0, 1))
    return as_run(episodes_frame(rewards, phase=(times >= 20).astype(int)))


HAND = {"smooth": 4, "window": 10, "horizon": 10, "rho": 0.9}


def test_step_down_and_linear_recovery_match_hand_values():
    row = recovery_metrics(step_and_ramp(), change_points=[20], **HAND).iloc[0]
    assert row["pre_level"] == pytest.approx(1.0)  # episodes 10..19
    # smoothed curve defined from t = 22 (half a window): episodes 20, 21, 22 -> 0.1
    assert row["min_level"] == pytest.approx(0.1)
    assert row["drop"] == pytest.approx(0.9)
    # t = 30 averages 27..30 -> 0.85; t = 31 averages 28..31 -> 0.925 >= 0.9
    assert row["time_to_recovery"] == pytest.approx(11.0)
    assert row["recovered"] and not row["censored"]
    # episodes 20..29 average 0.45, pre-level and oracle are both 1
    assert row["recovery_auc"] == pytest.approx(0.45)
    assert row["recovery_auc_oracle"] == pytest.approx(0.45)
    # regret: sum over 20..59 of (1 - reward) = 1 + 0.9 + ... + 0.1 = 5.5
    assert row["dynamic_regret"] == pytest.approx(5.5)
    assert row["dynamic_regret_per_episode"] == pytest.approx(5.5 / 40)
    assert row["phase_episodes"] == 40
    assert row["time_available"] == pytest.approx(39.0)  # to the last episode, 59
    assert row["note"] == ""


def test_rho_moves_time_to_recovery_as_computed():
    # rho = 0.5: t = 26 averages 23..26 -> 0.45; t = 27 averages 24..27 -> 0.55
    row = recovery_metrics(step_and_ramp(), change_points=[20], **{**HAND, "rho": 0.5}).iloc[0]
    assert row["time_to_recovery"] == pytest.approx(7.0)


def test_a_curve_that_never_recovers_is_censored_at_the_next_shift():
    times = np.arange(60)
    rewards = np.where(times < 20, 1.0, 0.5)
    run = as_run(episodes_frame(rewards))
    rows = recovery_metrics(run, change_points=[20, 40], **HAND)
    first, second = rows.iloc[0], rows.iloc[1]
    assert first["censored"] and not first["recovered"]
    assert first["time_to_recovery"] == pytest.approx(20.0)  # next shift at 40
    assert first["time_available"] == pytest.approx(20.0)
    # after the second shift the level (0.5) is already at 0.9 x 0.5: recovered as soon as the
    # smoothed curve exists, half a smoothing window after the shift
    assert second["recovered"]
    assert second["time_to_recovery"] == pytest.approx(2.0)


def test_censoring_at_the_end_of_the_data():
    rewards = np.where(np.arange(50) < 20, 1.0, 0.0)
    row = recovery_metrics(as_run(episodes_frame(rewards)), change_points=[20], **HAND).iloc[0]
    assert row["censored"]
    assert row["time_to_recovery"] == pytest.approx(29.0)  # last episode at 49
    assert row["drop"] == pytest.approx(1.0)


def test_zero_pre_level_makes_relative_metrics_nan_with_a_reason():
    rewards = np.where(np.arange(40) < 20, 0.0, 1.0)
    row = recovery_metrics(as_run(episodes_frame(rewards)), change_points=[20], **HAND).iloc[0]
    assert row["pre_level"] == 0.0
    assert np.isnan(row["time_to_recovery"]) and np.isnan(row["recovery_auc"])
    assert np.isnan(row["relative_drop"])
    assert not row["recovered"] and not row["censored"]
    assert "min_pre_level" in row["note"]
    assert row["drop"] == pytest.approx(-1.0)  # the absolute change is still reported
    assert row["dynamic_regret"] == pytest.approx(0.0)


def test_no_episode_before_the_shift_is_explained():
    times = np.concatenate([np.arange(10), np.arange(30, 50)])
    run = as_run(episodes_frame(np.ones(len(times)), world_time=times))
    row = recovery_metrics(run, change_points=[25], **{**HAND, "window": 5}).iloc[0]
    assert np.isnan(row["pre_level"])
    assert "no episodes in the pre-shift window" in row["note"]


def test_pre_window_is_clipped_at_the_previous_shift():
    # phase 1 (10..19) has reward 0.5; a 15-unit window must not reach back into phase 0
    rewards = np.concatenate([np.ones(10), np.full(10, 0.5), np.zeros(10)])
    row = recovery_metrics(
        as_run(episodes_frame(rewards)), change_points=[10, 20], window=15, smooth=4
    ).iloc[1]
    assert row["pre_level"] == pytest.approx(0.5)
    assert row["pre_episodes"] == 10


def test_dropped_episodes_do_not_count():
    run = step_and_ramp()
    run.loc[run["world_time"].between(20, 24), "reward"] = 1.0  # lucky, but lost to a fault
    run.loc[run["world_time"].between(20, 24), "dropped"] = True
    with_lost = recovery_metrics(run, change_points=[20], **HAND).iloc[0]
    kept = step_and_ramp()
    kept = kept[~kept["world_time"].between(20, 24)]
    without = recovery_metrics(kept, change_points=[20], **HAND).iloc[0]
    assert with_lost["time_to_recovery"] == without["time_to_recovery"]
    assert with_lost["dynamic_regret"] == pytest.approx(without["dynamic_regret"])


def test_change_points_from_config_phase_column_or_argument_agree(simulated_root):
    episodes = load_runs(simulated_root)
    from_config = recovery_metrics(episodes)
    stripped = episodes.copy()
    stripped.attrs = {}
    from_phase_column = recovery_metrics(stripped)
    explicit = recovery_metrics(stripped, change_points={"style-shift": [200, 400]})
    assert list(from_config["tau"]) == [200.0, 400.0] * 6
    for other in (from_phase_column, explicit):
        pd.testing.assert_series_equal(from_config["time_to_recovery"], other["time_to_recovery"])
    assert set(from_config["phase_after"]) == {"preferred=chuunibyou", "preferred=classical"}
    assert set(from_phase_column["phase_after"]) == {"phase 1", "phase 2"}


def test_the_faster_method_recovers_faster(simulated_root):
    rows = recovery_metrics(load_runs(simulated_root))
    assert len(rows) == 2 * 3 * 2
    median = rows.groupby("method")["time_to_recovery"].median()
    # simulated success rates climb back over 40 (sao) and 120 (grpo) episodes
    assert median["sao"] < 70 < median["grpo"]
    assert rows["recovered"].all()


def test_forgetting_from_evals_by_hand():
    run = step_and_ramp()
    evals = pd.DataFrame(
        {
            "experiment": "toy",
            "method": "sao",
            "seed": 0,
            "policy_version": [1, 2, 2, 3, 4, 5],
            "world_time": [10.0, 19.0, 19.0, 30.0, 59.0, 59.0],
            "current_phase": [0, 0, 0, 1, 1, 1],
            "eval_phase": [0, 0, 0, 0, 0, 1],
            "mean_reward": [0.5, 0.8, 1.0, 0.7, 0.6, 0.9],
            "num_episodes": [4, 1, 3, 4, 4, 4],
        }
    )
    row = recovery_metrics(run, change_points=[20], evals=evals, **HAND).iloc[0]
    # end of phase 0: the two evals at 19 weighted 1:3 -> 0.95; end of run: 0.6
    assert row["forgetting"] == pytest.approx(0.35)
    assert np.isnan(recovery_metrics(run, change_points=[20], **HAND).iloc[0]["forgetting"])


def test_tokens_axis_scales_times_by_tokens_per_episode():
    run = step_and_ramp()
    run["num_action_tokens"] = 10
    row = recovery_metrics(
        run, change_points=[20], x="tokens", smooth=40, window=100, horizon=100
    ).iloc[0]
    assert row["tau"] == pytest.approx(210.0)  # tokens spent once episode 20 completed
    assert row["tau_clock"] == pytest.approx(20.0)
    assert row["time_to_recovery"] == pytest.approx(110.0)  # 11 episodes of 10 tokens


def test_defaults_scale_with_the_shortest_phase():
    row = recovery_metrics(step_and_ramp(), change_points=[20]).iloc[0]
    assert row["pre_window"] == pytest.approx(5.0)
    assert row["smooth_window"] == pytest.approx(2.0)
    assert row["auc_horizon"] == pytest.approx(10.0)


def test_a_shift_after_the_data_yields_no_row():
    rows = recovery_metrics(step_and_ramp(), change_points=[20, 500], **HAND)
    assert list(rows["change_point"]) == [1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"x": "steps"}, "x='steps'"),
        ({"rho": 0.0}, "rho"),
        ({"smooth": -1.0}, "smooth"),
        ({"change_points": [30, 20]}, "strictly increasing"),
        ({"change_points": {"other": [20]}}, "no entry for experiment 'toy'"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        recovery_metrics(step_and_ramp(), **kwargs)


def test_missing_reward_column_is_named():
    with pytest.raises(ValueError, match="'reward'"):
        recovery_metrics(step_and_ramp().drop(columns="reward"), change_points=[20])
