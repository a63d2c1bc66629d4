"""ReasonShift and GridShift end to end: their configs load and validate, and the per-prompt key
and the multi-turn layout travel from real rollouts to the learner's estimators."""

from __future__ import annotations

import pytest
import torch
from tiny_model import TINY_MODEL, merge_overrides

from sao_online.config import load_config
from sao_online.config.run_schedule import resolve_schedule
from sao_online.learning.batching import collate
from sao_online.runtime.context import RunContext
from sao_online.runtime.envs import plan_to_request

TINY = merge_overrides(
    TINY_MODEL,
    [
        "rollout.batch_size=8",
        "runtime.backend=sync",
        "algorithm.critic_warmup_steps=0",
    ],
)


def sample(ctx):
    plans = []
    while len(plans) < ctx.config.rollout.batch_size:
        plans.extend(ctx.planner.next_group())
    requests = iter([plan_to_request(ctx.config, plan) for plan in plans])
    return list(ctx.make_engine(num_slots=8).run(lambda: next(requests, None)))


@pytest.mark.parametrize(
    ("path", "shift_at", "parameter"),
    [
        ("configs/reason_shift.yaml", 1500, "answer_format"),
        ("configs/grid_shift.yaml", 600, "moves"),
    ],
)
def test_configs_load_and_their_schedules_fit_the_env(path, shift_at, parameter):
    config = load_config(path)
    schedule = resolve_schedule(config)  # validated against the env's drift space
    before, after = schedule.at(shift_at - 1), schedule.at(shift_at)
    assert (before.phase, after.phase) == (0, 1)
    assert before.theta[parameter] != after.theta[parameter]
    assert shift_at < config.budget.episodes


def test_per_prompt_baseline_keys_travel_from_env_info_to_the_learner():
    config = load_config(
        "configs/reason_shift.yaml",
        TINY + ["algorithm.name=sao_prompt_mean", "algorithm.baseline_keys=[task, difficulty]"],
    )
    ctx = RunContext.build(config)
    trajectories = sample(ctx)
    expected = {f"{t.info['task']}/{t.info['difficulty']}" for t in trajectories}
    metrics = ctx.learner.step(trajectories)
    assert metrics["charts/baseline_classes"] == len(expected)
    assert set(ctx.learner.method.estimator.state_dict()["rewards"]) == expected


def test_no_skip_gae_trains_the_critic_on_grid_observation_tokens():
    config = load_config(
        "configs/grid_shift.yaml",
        TINY
        + ["algorithm.name=sao_no_skip_obs", "rollout.max_turns=3", "rollout.on_action_cap=submit"],
    )
    ctx = RunContext.build(config)
    trajectories = sample(ctx)
    batch = collate(trajectories, ctx.tokenizer.pad_token_id)
    multi_turn = batch.turn_ids.max(dim=1).values >= 1
    assert multi_turn.any()  # episodes with observations between actions
    result = ctx.learner.method.estimator(batch, torch.zeros(batch.tokens.shape))
    observation_targets = result.value_mask & ~batch.action_mask
    assert observation_targets[multi_turn].any() and not observation_targets[~multi_turn].any()
    metrics = ctx.learner.step(trajectories)
    assert metrics["losses/skipped_nonfinite"] == 0.0


def test_behavior_summary_breaks_success_down_by_difficulty():
    from sao_online.commands.policy_summary import _by_difficulty
    from sao_online.learning.types import Trajectory

    def episode(reward, **info):
        return Trajectory(
            tokens=torch.tensor([1, 2]),
            action_mask=torch.tensor([False, True]),
            behavior_logprobs=torch.zeros(2),
            versions=torch.zeros(2, dtype=torch.long),
            rewards=torch.tensor([0.0, reward]),
            turn_ids=torch.tensor([-1, 0]),
            prompt_id=0,
            group_id=0,
            env_id="x",
            phase=0,
            theta={},
            world_time=0.0,
            seed=0,
            terminated=True,
            truncated=False,
            info=info,
        )

    table = _by_difficulty(
        [
            episode(1.0, difficulty=1, correct=True, solved=True),
            episode(0.5, difficulty=1, correct=False, solved=True),
            episode(0.0, difficulty=5, correct=False, solved=False),
        ]
    )
    assert table == {
        "by_difficulty": {
            "1": {"episodes": 2, "reward_mean": 0.75, "correct_rate": 0.5, "solved_rate": 1.0},
            "5": {"episodes": 1, "reward_mean": 0.0, "correct_rate": 0.0, "solved_rate": 0.0},
        }
    }
    assert _by_difficulty([episode(1.0, topic="rain")]) == {}
