"""The SAO ablations against hand-computed numbers: policy lambda 1, skip-observation GAE off, and
the per-prompt running-mean baseline keyed by what the environment reports in ``info``."""

from __future__ import annotations

import pytest
import torch

from sao_online.algorithms import (
    METHODS,
    SINGLE_ROLLOUT_METHODS,
    KeyedRunningMeanBaseline,
    build_method,
)
from sao_online.algorithms.estimators import CriticGAE, KeyedRunningMeanAdvantage
from sao_online.config import ConfigError, load_config
from sao_online.learning.advantages import response_span_mask, skip_observation_gae
from sao_online.learning.batching import collate
from sao_online.learning.types import Trajectory

# prompt, action (turn 0), action (turn 0), observation, observation, action (turn 1)
ACTION_MASK = [False, True, True, False, False, True]
TURN_IDS = [-1, 0, 0, -1, -1, 1]
VALUES = torch.tensor([[0.0, 0.5, 0.6, 0.2, 0.3, 0.8]])


def trajectory(
    reward: float = 1.0,
    info: dict | None = None,
    group_id: int = 0,
    prompt_info: dict | None = None,
) -> Trajectory:
    n = len(ACTION_MASK)
    rewards = torch.zeros(n)
    rewards[-1] = reward
    return Trajectory(
        tokens=torch.arange(n),
        action_mask=torch.tensor(ACTION_MASK),
        behavior_logprobs=torch.zeros(n),
        versions=torch.zeros(n, dtype=torch.long),
        rewards=rewards,
        turn_ids=torch.tensor(TURN_IDS),
        prompt_id=group_id,
        group_id=group_id,
        env_id="test",
        phase=0,
        theta={},
        world_time=0.0,
        seed=0,
        terminated=True,
        truncated=False,
        info=info or {},
        prompt_info=prompt_info or {},
    )


def test_response_span_covers_first_to_last_action_token():
    mask = torch.tensor([ACTION_MASK, [False, False, True, False, False, False]])
    assert response_span_mask(mask).tolist() == [
        [False, True, True, True, True, True],
        [False, False, True, False, False, False],
    ]


def test_critic_gae_default_matches_hand_computed_skip_observation_numbers():
    # Steps 1, 2, 5 (observations skipped). l = 3 action tokens: lambda = 1 - 1/(1.5*3) = 7/9.
    # deltas: t1 = .6 - .5 = .1, t2 = V(5) - V(2) = .8 - .6 = .2, t5 = 1 - .8 = .2
    # A5 = .2, A2 = .2 + 7/9 * .2, A1 = .1 + 7/9 * A2
    result = CriticGAE()(collate([trajectory()], pad_token_id=0), VALUES)
    a2 = 0.2 + 7 / 9 * 0.2
    expected = [0.0, 0.1 + 7 / 9 * a2, a2, 0.0, 0.0, 0.2]
    assert result.advantages[0].tolist() == pytest.approx(expected, abs=1e-6)
    assert result.critic_returns[0].tolist() == pytest.approx([0, 1, 1, 0, 0, 1], abs=1e-6)
    assert result.value_mask is None  # the critic trains on action tokens


def test_policy_lambda_one_gives_return_minus_value():
    result = CriticGAE(policy_lambda=1.0)(collate([trajectory()], pad_token_id=0), VALUES)
    # Monte-Carlo advantage: return 1 minus V(t) on each action token.
    assert result.advantages[0].tolist() == pytest.approx([0, 0.5, 0.4, 0, 0, 0.2], abs=1e-6)
    assert result.stats["policy_lambda_mean"] == 1.0


def test_skip_observations_off_runs_the_recursion_through_observation_tokens():
    # Steps 1..5, observations included, lambda 1/2 fixed to keep the arithmetic short.
    # deltas: t1 = .6-.5 = .1, t2 = .2-.6 = -.4, t3 = .3-.2 = .1, t4 = .8-.3 = .5, t5 = 1-.8 = .2
    # A5 = .2, A4 = .5+.1 = .6, A3 = .1+.3 = .4, A2 = -.4+.2 = -.2, A1 = .1-.1 = 0
    estimator = CriticGAE(policy_lambda=0.5, skip_observations=False)
    result = estimator(collate([trajectory()], pad_token_id=0), VALUES)
    # The policy sees advantages on action tokens only.
    assert result.advantages[0].tolist() == pytest.approx([0, 0.0, -0.2, 0, 0, 0.2], abs=1e-6)
    # Critic targets (lambda 1): the return to go, now on observation tokens as well.
    assert result.critic_returns[0].tolist() == pytest.approx([0, 1, 1, 1, 1, 1], abs=1e-6)
    assert result.value_mask[0].tolist() == [False, True, True, True, True, True]
    skipped = CriticGAE(policy_lambda=0.5)(collate([trajectory()], pad_token_id=0), VALUES)
    # With skipping: A5 = .2, A2 = .2 + .1 = .3, A1 = .1 + .15 = .25
    assert skipped.advantages[0].tolist() == pytest.approx([0, 0.25, 0.3, 0, 0, 0.2], abs=1e-6)


def test_skip_off_equals_skip_on_when_lambda_is_one_and_values_are_zero():
    # Nothing decays and no value enters: both recursions give the return to go.
    rewards = torch.tensor([[0.0, 0.0, 0.5, 0.0, 0.0, 1.0]])
    mask = torch.tensor([ACTION_MASK])
    skip, _ = skip_observation_gae(rewards, torch.zeros(1, 6), mask, lam=1.0)
    plain, _ = skip_observation_gae(rewards, torch.zeros(1, 6), response_span_mask(mask), lam=1.0)
    assert torch.equal(torch.where(mask, plain, torch.zeros_like(plain)), skip)


def test_keyed_running_mean_by_hand():
    baseline = KeyedRunningMeanBaseline(window=2)
    first = baseline(torch.tensor([1.0, 0.0, 1.0]), ["1", "5", "1"])
    assert first.tolist() == [1.0, 0.0, 1.0]  # unseen keys: baseline 0
    second = baseline(torch.tensor([0.0, 1.0, 0.5]), ["1", "5", "3"])
    # key 1 holds [1, 1] -> 1; key 5 holds [0] -> 0; key 3 unseen -> 0
    assert second.tolist() == [-1.0, 1.0, 0.5]
    third = baseline(torch.tensor([0.0]), ["1"])
    assert third.tolist() == [-0.5]  # key 1's window of 2 now holds [1, 0]
    restored = KeyedRunningMeanBaseline(window=2)
    restored.load_state_dict(baseline.state_dict())
    assert restored.state_dict() == baseline.state_dict()
    assert restored.baseline("1") == 0.0 and restored.baseline("3") == 0.5
    with pytest.raises(ValueError, match="window"):
        KeyedRunningMeanBaseline(window=3).load_state_dict(baseline.state_dict())
    with pytest.raises(ValueError, match="keys"):
        baseline(torch.tensor([1.0]), ["a", "b"])


def test_per_prompt_baseline_reads_the_env_info_through_the_batch():
    estimator = KeyedRunningMeanAdvantage(keys=("task", "difficulty"), window=4)
    batch = collate(
        [
            trajectory(1.0, {"task": "add", "difficulty": 1}),
            trajectory(0.0, {"task": "add", "difficulty": 5}, group_id=1),
        ],
        pad_token_id=0,
    )
    assert estimator(batch, None).advantages[:, -1].tolist() == [1.0, 0.0]
    batch = collate(
        [
            trajectory(0.0, {"task": "add", "difficulty": 1}),
            trajectory(0.0, {"task": "sort", "difficulty": 5}, group_id=1),
        ],
        pad_token_id=0,
    )
    result = estimator(batch, None)
    # add/1 has seen a 1; sort/5 is new. Advantages sit on every action token of the row.
    assert result.advantages[0].tolist() == [0, -1.0, -1.0, 0, 0, -1.0]
    assert result.advantages[1].tolist() == [0.0] * 6
    assert set(estimator.state_dict()["rewards"]) == {"add/1", "add/5", "sort/5"}


def test_per_prompt_baseline_prefers_what_the_reset_said_the_prompt_was():
    # The last info can describe the end state (here a task the env moved on to); the class
    # comes from the reset's declared prompt keys, and keys the reset left out from the info.
    estimator = KeyedRunningMeanAdvantage(keys=("task", "difficulty"), window=4)
    batch = collate(
        [trajectory(1.0, {"task": "end", "difficulty": 3}, prompt_info={"task": "add"})],
        pad_token_id=0,
    )
    estimator(batch, None)
    assert set(estimator.state_dict()["rewards"]) == {"add/3"}


def test_per_prompt_baseline_names_a_missing_info_key():
    estimator = KeyedRunningMeanAdvantage(keys=("difficulty",))
    batch = collate([trajectory(1.0, {"topic": "rain"})], pad_token_id=0)
    with pytest.raises(ValueError, match="baseline_keys.*'difficulty'.*topic"):
        estimator(batch, None)


@pytest.mark.parametrize(
    ("name", "policy_lambda", "skip"),
    [("sao", None, True), ("sao_lambda1", 1.0, True), ("sao_no_skip_obs", None, False)],
)
def test_registry_builds_the_critic_ablations(name, policy_lambda, skip):
    method = build_method(load_config({"algorithm": {"name": name}}))
    assert method.group_size == 1 and method.uses_critic
    assert (method.estimator.policy_lambda, method.estimator.skip_observations) == (
        policy_lambda,
        skip,
    )


def test_config_switches_reach_plain_sao():
    method = build_method(
        load_config(
            {"algorithm": {"name": "sao", "policy_lambda": 0.9, "skip_observations": False}}
        )
    )
    assert (method.estimator.policy_lambda, method.estimator.skip_observations) == (0.9, False)
    prompt_mean = build_method(
        load_config(
            {
                "algorithm": {
                    "name": "sao_prompt_mean",
                    "baseline_keys": ["task", "difficulty"],
                    "prompt_baseline_window": 7,
                }
            }
        )
    )
    assert prompt_mean.estimator.keys == ("task", "difficulty")
    assert prompt_mean.estimator.window == 7 and not prompt_mean.uses_critic


@pytest.mark.parametrize(
    ("field", "value"),
    [("policy_lambda", 1.5), ("baseline_keys", []), ("prompt_baseline_window", 0)],
)
def test_bad_ablation_settings_name_the_field(field, value):
    with pytest.raises(ConfigError, match=f"algorithm.{field}"):
        load_config({"algorithm": {field: value}})


def test_single_rollout_methods_are_registered_methods_with_group_size_one():
    assert SINGLE_ROLLOUT_METHODS.issubset(METHODS)
    for name in SINGLE_ROLLOUT_METHODS:
        assert build_method(load_config({"algorithm": {"name": name}})).group_size == 1


def test_a_batch_moves_to_another_device_with_its_episode_infos():
    # Only tensors move; the episodes' infos and the unset proximal logprobs come along as they
    # are (the learner on a GPU moves every batch it collates).
    batch = collate([trajectory(info={"difficulty": 2}), trajectory(group_id=1)], pad_token_id=0)
    moved = batch.to("meta")
    assert moved.tokens.device.type == "meta" and moved.behavior_logprobs.device.type == "meta"
    assert moved.episode_infos == batch.episode_infos and moved.proximal_logprobs is None
    assert batch.to("cpu") is batch
