"""``frozen``: the warm start, never updated, on the same schedule and seeds as the others."""

from __future__ import annotations

import pytest
import torch
from tiny_model import SMALLEST_MODEL, tiny_overrides

from sao_online.algorithms import build_method
from sao_online.config import load_config
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.context import RunContext
from sao_online.runtime.frozen import FrozenLearner
from sao_online.runtime.launch import run_experiment

TINY = tiny_overrides(
    "rollout.max_action_tokens=8",
    "rollout.max_episode_tokens=96",
    "rollout.num_slots=8",
    "runtime.backend=sync",
    "algorithm.critic_warmup_steps=0",
    "regularizers.kl_coef=0.1",  # a pull that would move a learning method's weights
    "regularizers.entropy_coef=0.05",
    "logging.checkpoint_every=0",
    "budget.episodes=24",
    "schedule={parameters: {preferred: {kind: abrupt, values: [cute, chuunibyou], at: [0, 16]}}}",
    model=SMALLEST_MODEL,
)


def _sample(ctx):
    from sao_online.runtime.envs import plan_to_request

    plans = []
    while len(plans) < ctx.config.rollout.batch_size:
        plans.extend(ctx.planner.next_group())
    requests = iter([plan_to_request(ctx.config, plan) for plan in plans])
    return list(ctx.make_engine(num_slots=8).run(lambda: next(requests, None)))


def test_frozen_is_a_single_rollout_method_that_does_not_update():
    method = build_method(load_config(None, ["algorithm.name=frozen"]))
    assert (method.name, method.group_size, method.updates_policy) == ("frozen", 1, False)
    assert not method.uses_critic


@pytest.mark.parametrize(("name", "changes"), [("frozen", False), ("sao_running_mean", True)])
def test_a_step_changes_the_weights_only_for_a_learning_method(name, changes):
    ctx = RunContext.build(load_config(None, [*TINY, f"algorithm.name={name}"]))
    assert isinstance(ctx.learner, FrozenLearner) == (not changes)
    before = {key: value.clone() for key, value in ctx.policy.state_dict().items()}
    batch = _sample(ctx)
    batch[0].rewards[batch[0].action_mask.nonzero()[-1]] = 1.0  # a signal to learn from
    metrics = ctx.learner.step(batch)
    after = ctx.policy.state_dict()
    same = all(torch.equal(before[key], after[key]) for key in before)
    assert same != changes
    assert ctx.learner.version == 1
    assert metrics["charts/reward_mean"] == pytest.approx(
        sum(t.total_reward for t in batch) / len(batch)
    )


def test_a_frozen_run_logs_every_episode_on_the_schedule_and_keeps_its_weights(tmp_path):
    config = load_config(None, [*TINY, "algorithm.name=frozen"])
    summary = run_experiment(config, tmp_path / "frozen", threads=1)
    log = RunLog(tmp_path / "frozen")
    episodes, updates = log.read("episodes"), log.read("updates")
    assert summary["method"] == "frozen" and summary["updates"] == 3
    assert len(episodes) == 24
    assert list(episodes.sort_values("world_time")["phase"]) == [0] * 16 + [1] * 8
    assert list(updates["version"]) == [1, 2, 3]
    # The same prompts and regimes, in the same order, as another single-rollout method's run.
    other = run_experiment(
        load_config(None, [*TINY, "algorithm.name=sao_running_mean"]), tmp_path / "srm", threads=1
    )
    assert other["episodes"] == 24
    learning = RunLog(tmp_path / "srm").read("episodes").sort_values("world_time")
    frozen = episodes.sort_values("world_time")
    for column in ("prompt_id", "world_time", "theta"):
        assert list(learning[column]) == list(frozen[column])
