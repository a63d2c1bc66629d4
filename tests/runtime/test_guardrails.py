"""Warnings before any work (no shift inside the budget) and the early duration estimate."""

from __future__ import annotations

import warnings

import pytest

from sao_online.algorithms import build_method
from sao_online.config import load_config
from sao_online.config.run_schedule import resolve_schedule
from sao_online.runtime.envs import BudgetWarning, budget_warnings, critic_warmup_share
from sao_online.runtime.launch import DurationEstimate, run_experiment
from sao_online.util.units import format_duration


def config_with_shift_at(at, **extra):
    return load_config(
        {
            "schedule": {
                "parameters": {
                    "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": at}
                }
            },
            "budget": {"episodes": 100},
            **extra,
        }
    )


@pytest.mark.parametrize(
    "at, warned", [([0, 50], False), ([0, 99], False), ([0, 100], True), ([0, 5000], True)]
)
def test_a_schedule_whose_shifts_all_fall_past_the_budget_is_warned_about(at, warned):
    config = config_with_shift_at(at)
    messages = budget_warnings(config, resolve_schedule(config))
    assert bool(messages) == warned
    if warned:
        assert messages[0].startswith("budget.episodes: no change point falls inside the budget")
        assert f"the first shift is at {at[1]} episodes" in messages[0]


def test_a_stationary_schedule_and_the_steps_clock_are_judged_on_their_horizon():
    stationary = load_config({"budget": {"episodes": 100}})
    assert budget_warnings(stationary, resolve_schedule(stationary)) == []
    # Steps: the clock can reach budget x max_turns = 400 readings, so 300 is inside.
    steps = load_config(
        {
            "schedule": {
                "clock": "steps",
                "parameters": {
                    "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": [0, 300]}
                },
            },
            "budget": {"episodes": 100},
            "rollout": {"max_turns": 4},
        }
    )
    assert budget_warnings(steps, resolve_schedule(steps)) == []


def test_run_warns_before_any_work(tmp_path, monkeypatch):
    import sao_online.runtime.launch as launch

    def no_work(*args, **kwargs):
        raise RuntimeError("no work expected after the warning in this test")

    monkeypatch.setattr(launch.RunContext, "build", no_work)
    with (
        pytest.warns(BudgetWarning, match="no change point falls inside the budget"),
        pytest.raises(RuntimeError, match="no work expected"),
    ):
        run_experiment(config_with_shift_at([0, 500]), out=tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        with pytest.raises(RuntimeError, match="no work expected"):
            # (no critic-only warm-up either: it would cover the whole first phase)
            quiet = config_with_shift_at([0, 50], algorithm={"critic_warmup_steps": 0})
            run_experiment(quiet, out=tmp_path / "run")


@pytest.mark.parametrize(
    ("method", "warmup", "share"),
    [("sao", 10, 0.64), ("sao", 3, 0.192), ("sao", 0, None), ("sao_running_mean", 10, None)],
)
def test_sao_is_warned_about_when_its_critic_warm_up_takes_over_a_quarter_of_the_phase(
    method, warmup, share
):
    # 10 critic-only updates of 32 episodes: 320 of the first phase's 500 episodes.
    config = load_config(
        {
            "schedule": {
                "parameters": {
                    "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": [0, 500]}
                }
            },
            "algorithm": {"name": method, "critic_warmup_steps": warmup},
            "rollout": {"batch_size": 32},
            "budget": {"episodes": 1000},
        }
    )
    schedule, built = resolve_schedule(config), build_method(config)
    assert critic_warmup_share(config, schedule, built) == (
        None if share is None else pytest.approx(share)
    )
    messages = budget_warnings(config, schedule, built)
    if share is not None and share > 0.25:
        assert messages == [
            f"algorithm.critic_warmup_steps: sao trains only its critic for its first {warmup} "
            f"update(s), {share:.0%} of the first phase; its policy stands still meanwhile: "
            "lower algorithm.critic_warmup_steps for a budget this small"
        ]
    else:
        assert messages == []


def test_the_duration_estimate_skips_the_first_update_and_speaks_once():
    now = [0.0]
    estimate = DurationEstimate(budget=1000, batch_size=10, clock=lambda: now[0])
    assert estimate.wait_for == 50  # max(3 batches, 5% of 1000)
    now[0] = 30.0  # the first update took 30 s (start-up): not counted
    assert estimate.update(10) is None
    lines = []
    for _ in range(5):  # then 10 episodes per 2 s: 5 episodes/s
        now[0] += 2.0
        lines.append(estimate.update(10))
    assert lines[:4] == [None] * 4
    assert lines[4] == "5.0 episodes/s so far; the 1000-episode budget needs about 3 min more"
    now[0] += 2.0
    assert estimate.update(10) is None  # once only


@pytest.mark.parametrize("seconds, text", [(45, "45 s"), (600, "10 min"), (9000, "2.5 h")])
def test_durations_read_naturally(seconds, text):
    assert format_duration(seconds) == text
