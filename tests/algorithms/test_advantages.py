"""Advantage estimators: hand-computed numbers, a plain-loop GAE reference, invariants."""

from __future__ import annotations

import math

import pytest
import torch

from sao_online.algorithms import RunningMeanBaseline
from sao_online.learning.advantages import (
    broadcast_to_tokens,
    group_advantages,
    length_adaptive_lambda,
    rloo_advantages,
    skip_observation_gae,
    step_level_values,
    zero_variance_group_fraction,
)
from sao_online.learning.losses import value_loss

# Two-turn episode: prompt, turn 1 (2 tokens), 2 observation tokens, turn 2 (2 tokens).
MASK = torch.tensor([[False, True, True, False, False, True, True]])
REWARDS = torch.tensor([[0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
# Non-action values are junk on purpose: the recursion must never read them.
VALUES = torch.tensor([[9.0, 0.2, 0.4, -7.0, 5.0, 0.6, 0.8]], dtype=torch.float64)
ACTION_POSITIONS = [1, 2, 5, 6]


def reference_gae(rewards, values, action_mask, gamma, lam):
    """Plain per-row loop over action tokens, written straight from the definition."""
    advantages = torch.zeros_like(rewards, dtype=torch.float64)
    returns = torch.zeros_like(advantages)
    for row in range(rewards.shape[0]):
        row_lam = float(lam[row]) if isinstance(lam, torch.Tensor) else lam
        positions = [t for t in range(rewards.shape[1]) if action_mask[row, t]]
        next_advantage, next_value = 0.0, 0.0
        for t in reversed(positions):
            delta = float(rewards[row, t]) + gamma * next_value - float(values[row, t])
            next_advantage = delta + gamma * row_lam * next_advantage
            next_value = float(values[row, t])
            advantages[row, t] = next_advantage
            returns[row, t] = next_advantage + next_value
    return advantages, returns


def at_actions(tensor):
    return tensor[0, ACTION_POSITIONS].tolist()


def test_gae_gamma1_lam1_returns_are_reward_to_go():
    advantages, returns = skip_observation_gae(REWARDS, VALUES, MASK, gamma=1.0, lam=1.0)
    assert at_actions(returns) == pytest.approx([1.5, 1.5, 1.0, 1.0])
    assert at_actions(advantages) == pytest.approx([1.3, 1.1, 0.4, 0.2])


def test_gae_lam0_is_one_step_td_across_the_observation_gap():
    advantages, returns = skip_observation_gae(REWARDS, VALUES, MASK, gamma=1.0, lam=0.0)
    # delta at position 2 (last token of turn 1) bootstraps from V at position 5, not 3 or 4.
    assert at_actions(advantages) == pytest.approx([0.2, 0.7, 0.2, 0.2])
    assert at_actions(returns) == pytest.approx([0.4, 1.1, 0.8, 1.0])


def test_gae_discounted_hand_numbers():
    advantages, returns = skip_observation_gae(REWARDS, VALUES, MASK, gamma=0.5, lam=1.0)
    assert at_actions(advantages) == pytest.approx([0.175, 0.35, -0.1, 0.2])
    # lam = 1: discounted reward-to-go counted in action tokens (observations do not discount).
    assert at_actions(returns) == pytest.approx([0.375, 0.75, 0.5, 1.0])


def test_gae_non_action_tokens_get_exact_zero():
    advantages, returns = skip_observation_gae(REWARDS, VALUES, MASK, gamma=0.9, lam=0.7)
    assert advantages[~MASK].eq(0).all()
    assert returns[~MASK].eq(0).all()


@pytest.mark.parametrize("seed", range(6))
def test_gae_vectorised_matches_loop_on_random_multi_turn_masks(seed):
    generator = torch.Generator().manual_seed(seed)
    batch, time = 5, 23
    # Random segments of prompt / action / observation / padding, so turns vary in length.
    action_mask = torch.rand(batch, time, generator=generator) < 0.55
    action_mask[:, :2] = False
    action_mask[seed % batch] = False  # one row with no action token at all
    rewards = torch.randn(batch, time, generator=generator, dtype=torch.float64) * action_mask
    values = torch.randn(batch, time, generator=generator, dtype=torch.float64)
    gamma = [1.0, 0.97, 0.5][seed % 3]
    lam = length_adaptive_lambda(action_mask.sum(1)).double() if seed % 2 else 0.9
    advantages, returns = skip_observation_gae(rewards, values, action_mask, gamma, lam)
    expected_advantages, expected_returns = reference_gae(rewards, values, action_mask, gamma, lam)
    torch.testing.assert_close(advantages, expected_advantages)
    torch.testing.assert_close(returns, expected_returns)


def test_gae_per_row_lam_equals_rows_computed_separately():
    rewards = REWARDS.repeat(2, 1)
    values = VALUES.repeat(2, 1)
    mask = MASK.repeat(2, 1)
    advantages, _ = skip_observation_gae(rewards, values, mask, 0.9, torch.tensor([0.0, 1.0]))
    low, _ = skip_observation_gae(REWARDS, VALUES, MASK, 0.9, 0.0)
    high, _ = skip_observation_gae(REWARDS, VALUES, MASK, 0.9, 1.0)
    torch.testing.assert_close(advantages, torch.cat([low, high]))


def test_gae_lam1_returns_do_not_depend_on_values():
    _, returns = skip_observation_gae(REWARDS, VALUES, MASK, 0.8, 1.0)
    _, returns_other = skip_observation_gae(REWARDS, VALUES * 3 - 1, MASK, 0.8, 1.0)
    torch.testing.assert_close(returns, returns_other)


def test_gae_lam1_returns_are_exact_whatever_the_values():
    # Right after a shift every reward is 0: the critic targets must be exactly 0, not the float32
    # residue of A + V (which made the logged explained variance about -1e14).
    generator = torch.Generator().manual_seed(0)
    mask = torch.rand(8, 40, generator=generator) > 0.3
    values = torch.randn(8, 40, generator=generator) * 7.3
    _, returns = skip_observation_gae(torch.zeros(8, 40), values, mask, 1.0, 1.0)
    assert returns.eq(0).all()
    rewards = torch.zeros(8, 40)
    last_action = mask.cumsum(1).argmax(1)
    rewards[torch.arange(8), last_action] = 0.1
    _, returns = skip_observation_gae(rewards, values, mask, 1.0, 1.0)
    assert returns[mask].eq(torch.tensor(0.1)).all()
    assert math.isnan(value_loss(values, returns, mask)[1]["explained_variance"])


def test_gae_outputs_are_detached_and_float32_for_float32_inputs():
    values = VALUES.float().requires_grad_()
    advantages, returns = skip_observation_gae(REWARDS.float(), values, MASK)
    assert not advantages.requires_grad and not returns.requires_grad
    assert advantages.dtype == torch.float32


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gamma": 1.5}, "gamma"),
        ({"lam": -0.1}, "lam"),
        ({"lam": torch.tensor([0.5, 0.5])}, r"lam.*\[batch\]"),
        ({"rewards": REWARDS + 1.0}, "non-action"),
        ({"values": VALUES[:, :5]}, "values has shape"),
    ],
)
def test_gae_rejects_bad_input(kwargs, message):
    arguments = {"rewards": REWARDS, "values": VALUES, "action_mask": MASK} | kwargs
    with pytest.raises(ValueError, match=message):
        skip_observation_gae(**arguments)


def test_gae_rejects_non_bool_mask():
    with pytest.raises(TypeError, match="action_mask must be a bool"):
        skip_observation_gae(REWARDS, VALUES, MASK.long())


def test_length_adaptive_lambda():
    lambdas = length_adaptive_lambda(torch.tensor([0, 1, 2, 10]), alpha=1.5)
    torch.testing.assert_close(lambdas, torch.tensor([1 / 3, 1 / 3, 2 / 3, 14 / 15]))
    # alpha * l < 1 would give a negative lambda; it is clipped to 0.
    assert length_adaptive_lambda(1, alpha=0.5).item() == 0.0
    with pytest.raises(ValueError, match="alpha"):
        length_adaptive_lambda(3, alpha=0.0)
    with pytest.raises(ValueError, match="non-negative"):
        length_adaptive_lambda(torch.tensor([-1]))


GROUP_REWARDS = torch.tensor([1.0, 0.0, 1.0, 1.0, 3.0, 3.0], dtype=torch.float64)
GROUP_IDS = torch.tensor([5, 5, 5, 5, 9, 9])


def test_group_advantages_grpo_hand_numbers():
    advantages = group_advantages(GROUP_REWARDS, GROUP_IDS, normalize_std=True, eps=0.0)
    population_std = math.sqrt(0.1875)  # rewards 1,0,1,1: mean 0.75, variance 0.75 / 4
    expected = [
        0.25 / population_std,
        -0.75 / population_std,
        0.25 / population_std,
        0.25 / population_std,
        0.0,
        0.0,
    ]
    assert advantages.tolist() == pytest.approx(expected)


def test_group_advantages_dr_grpo_hand_numbers():
    advantages = group_advantages(GROUP_REWARDS, GROUP_IDS, normalize_std=False)
    assert advantages.tolist() == pytest.approx([0.25, -0.75, 0.25, 0.25, 0.0, 0.0])


def test_zero_variance_group_is_exactly_zero_despite_rounding():
    # The float64 mean of three 0.1s is 0.10000000000000002, so r - mean alone is not 0.
    rewards = torch.tensor([0.1, 0.1, 0.1], dtype=torch.float64)
    assert rewards.mean().item() != 0.1
    for normalize_std in (True, False):
        advantages = group_advantages(rewards, torch.tensor([0, 0, 0]), normalize_std)
        assert advantages.eq(0).all()
    assert rloo_advantages(rewards, torch.tensor([0, 0, 0])).eq(0).all()


def test_group_advantages_normalised_groups_have_zero_mean_unit_std_and_follow_permutation():
    torch.manual_seed(0)
    rewards = torch.randn(24, dtype=torch.float64)
    group_ids = torch.arange(24) % 3 * 100 - 7  # interleaved, negative and sparse ids
    advantages = group_advantages(rewards, group_ids, eps=0.0)
    for group in group_ids.unique():
        members = advantages[group_ids == group]
        assert members.mean().item() == pytest.approx(0.0, abs=1e-12)
        assert members.std(correction=0).item() == pytest.approx(1.0)
    permutation = torch.randperm(24)
    permuted = group_advantages(rewards[permutation], group_ids[permutation], eps=0.0)
    torch.testing.assert_close(permuted, advantages[permutation])


def test_zero_variance_group_fraction():
    rewards = torch.tensor([1.0, 0.0, 3.0, 3.0, 2.0])
    group_ids = torch.tensor([5, 5, 9, 9, 11])  # varied, constant, singleton
    assert zero_variance_group_fraction(rewards, group_ids) == pytest.approx(2 / 3)
    assert math.isnan(zero_variance_group_fraction(torch.zeros(0), torch.zeros(0, dtype=int)))


def test_rloo_hand_numbers_and_identity():
    advantages = rloo_advantages(GROUP_REWARDS, GROUP_IDS)
    assert advantages.tolist() == pytest.approx([1 / 3, -1.0, 1 / 3, 1 / 3, 0.0, 0.0])
    # Leave-one-out equals G / (G - 1) times the Dr.GRPO advantage.
    dr_grpo = group_advantages(GROUP_REWARDS, GROUP_IDS, normalize_std=False)
    torch.testing.assert_close(advantages[:4], dr_grpo[:4] * 4 / 3)


def test_episode_level_bad_input():
    with pytest.raises(ValueError, match="at least 2 episodes"):
        rloo_advantages(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 4]))
    with pytest.raises(ValueError, match="group_ids"):
        group_advantages(torch.tensor([1.0, 2.0]), torch.tensor([0]))
    with pytest.raises(TypeError, match="integer"):
        group_advantages(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="NaN"):
        group_advantages(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="1-D"):
        group_advantages(torch.ones(2, 2), torch.zeros(2, 2, dtype=int))


def test_running_mean_baseline_uses_rewards_seen_before_the_batch():
    baseline = RunningMeanBaseline(window=3)
    assert baseline(torch.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]  # nothing seen yet
    assert baseline(torch.tensor([4.0])).tolist() == [2.5]  # mean of 1, 2
    assert baseline(torch.tensor([10.0, 0.0])).tolist() == pytest.approx([10 - 7 / 3, -7 / 3])
    assert baseline.baseline == pytest.approx(14 / 3)  # window now holds 4, 10, 0
    assert len(baseline) == 3


def test_running_mean_baseline_batch_larger_than_window_keeps_its_last_rewards():
    baseline = RunningMeanBaseline(window=2)
    baseline(torch.tensor([1.0, 2.0, 3.0, 5.0]))
    assert baseline.baseline == 4.0


def test_running_mean_baseline_state_round_trip():
    baseline = RunningMeanBaseline(window=4)
    baseline(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]))
    restored = RunningMeanBaseline(window=4)
    restored.load_state_dict(baseline.state_dict())
    batch = torch.tensor([0.5, 7.0])
    assert restored(batch).tolist() == baseline(batch).tolist()
    assert restored.state_dict() == baseline.state_dict()
    with pytest.raises(ValueError, match="window"):
        RunningMeanBaseline(window=5).load_state_dict(baseline.state_dict())
    with pytest.raises(ValueError, match="window"):
        RunningMeanBaseline(window=0)


def test_broadcast_to_tokens():
    mask = torch.tensor([[False, True, True], [True, False, False]])
    tokens = broadcast_to_tokens(torch.tensor([2.0, -1.0]), mask)
    assert tokens.tolist() == [[0.0, 2.0, 2.0], [-1.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="episode_values"):
        broadcast_to_tokens(torch.tensor([1.0]), mask)


def test_step_level_values_last_and_mean():
    values = torch.tensor(
        [[9.0, 1.0, 2.0, 9.0, 4.0, 6.0, 9.0], [3.0, 5.0, 9.0, 9.0, 9.0, 9.0, 9.0]]
    )
    turns = torch.tensor([[-1, 0, 0, -1, 1, 1, -1], [0, 0, -1, 1, -1, -1, -1]])
    last = step_level_values(values, turns, "last_token")
    assert last.tolist() == [
        [0.0, 2.0, 2.0, 0.0, 6.0, 6.0, 0.0],
        [5.0, 5.0, 0.0, 9.0, 0.0, 0.0, 0.0],
    ]
    mean = step_level_values(values, turns, "average")
    assert mean.tolist() == [
        [0.0, 1.5, 1.5, 0.0, 5.0, 5.0, 0.0],
        [4.0, 4.0, 0.0, 9.0, 0.0, 0.0, 0.0],
    ]


def test_step_level_values_bad_input():
    values = torch.zeros(1, 3)
    with pytest.raises(ValueError, match="mode"):
        step_level_values(values, torch.tensor([[0, 0, 0]]), "first_token")
    with pytest.raises(ValueError, match="-1"):
        step_level_values(values, torch.tensor([[0, -2, 0]]))
    with pytest.raises(ValueError, match="token_values has shape .*, turn_ids has"):
        step_level_values(torch.zeros(1, 4), torch.tensor([[0, 0, 0]]))
