"""Policy and value losses: hand-computed values and gradients, masking, aggregation invariants."""

from __future__ import annotations

import math

import pytest
import torch

from sao_online.learning.losses import (
    aggregate_token_losses,
    decoupled_ppo_loss,
    dis_policy_loss,
    gspo_loss,
    masked_is_policy_loss,
    policy_gradient_loss,
    ppo_clip_loss,
    tis_policy_loss,
    value_loss,
)

# Row 0: three action tokens then an observation token; row 1: two action tokens then padding.
MASK = torch.tensor([[True, True, True, False], [True, True, False, False]])


def token_tensor(row0, row1, fill=float("nan")):
    """A [2, 4] float64 tensor with the given action-token values and `fill` elsewhere."""
    tensor = torch.full((2, 4), fill, dtype=torch.float64)
    tensor[0, :3] = torch.tensor(row0, dtype=torch.float64)
    tensor[1, :2] = torch.tensor(row1, dtype=torch.float64)
    return tensor


def with_ratios(logprobs, ratios):
    """Behaviour/old logprobs such that exp(logprobs - result) equals `ratios`."""
    return logprobs.detach() - torch.log(ratios)


# ---------------------------------------------------------------------------------------- DIS


def dis_example():
    # Ratios: 1 (in band), 0.5 (below 0.7), 2 (in band), 7 (above 6), 0.8 (in band).
    logprobs = token_tensor([-1.0, -1.5, -2.0], [-0.3, -1.2]).requires_grad_()
    ratios = token_tensor([1.0, 0.5, 2.0], [7.0, 0.8], fill=1.0)
    advantages = token_tensor([1.0, 2.0, -0.5], [3.0, 1.5], fill=100.0)
    behavior = with_ratios(logprobs, ratios)
    behavior[~MASK] = float("nan")  # never read
    return logprobs, behavior, advantages


def test_dis_hand_computed_loss_gradient_and_stats():
    logprobs, behavior, advantages = dis_example()
    loss, stats = dis_policy_loss(logprobs, behavior, advantages, MASK, eps_low=0.3, eps_high=5.0)
    # -(1*1*(-1) + 2*(-0.5)*(-2) + 0.8*1.5*(-1.2)) / 5: the two masked tokens stay in N = 5.
    assert loss.item() == pytest.approx(0.088)
    loss.backward()
    # Gradient = -f(r) * A / N with f(r) = r detached: the paper's mask * r * A * grad log pi.
    expected = torch.tensor([[-0.2, 0.0, 0.2, 0.0], [0.0, -0.24, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(logprobs.grad, expected)
    assert logprobs.grad[0, 1] == 0.0 and logprobs.grad[1, 0] == 0.0  # out of band: exactly 0
    assert logprobs.grad[~MASK].eq(0).all()
    assert stats["masked_below_fraction"] == pytest.approx(0.2)
    assert stats["masked_above_fraction"] == pytest.approx(0.2)
    assert stats["ratio_mean"] == pytest.approx(11.3 / 5)
    assert stats["ratio_max"] == pytest.approx(7.0)
    ratios = torch.tensor([1.0, 0.5, 2.0, 7.0, 0.8], dtype=torch.float64)
    assert stats["approx_kl"] == pytest.approx(float((ratios - 1 - ratios.log()).mean()))
    # Weights 1, 0, 2, 0, 0.8: (3.8)^2 / (5 * 5.64).
    assert stats["effective_sample_size"] == pytest.approx(3.8**2 / (5 * 5.64))
    assert stats["num_action_tokens"] == 5.0


def test_dis_band_is_strict_and_ignores_the_advantage_sign():
    # Ratios exactly on the band edges are masked (strict inequalities). The edges are taken
    # from the ratios the loss will see; for ratios in [0.5, 2], 1 - (1 - r) == r exactly.
    logprobs = torch.zeros(1, 4, dtype=torch.float64, requires_grad=True)
    behavior = with_ratios(
        logprobs, torch.tensor([[0.75, 1.5, 0.7500001, 1.4999999]], dtype=torch.float64)
    )
    seen_ratios = (logprobs.detach() - behavior).exp()[0].tolist()
    eps_low, eps_high = 1.0 - seen_ratios[0], seen_ratios[1] - 1.0
    assert 1.0 - eps_low == seen_ratios[0] and 1.0 + eps_high == seen_ratios[1]
    advantages = torch.tensor([[1.0, -1.0, -1.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    loss, stats = dis_policy_loss(
        logprobs, behavior, advantages, mask, eps_low=eps_low, eps_high=eps_high
    )
    loss.backward()
    assert logprobs.grad[0, :2].eq(0).all()  # on the edges, positive and negative advantages
    assert logprobs.grad[0, 2:].ne(0).all()  # just inside
    assert stats["masked_below_fraction"] == 0.25 and stats["masked_above_fraction"] == 0.25


def test_dis_weight_is_detached_so_gradient_is_linear_in_log_pi():
    # Were the weight not detached, d/dlogp of r * A * logp would add r * A * logp.
    logprobs = torch.tensor([[-2.0]], dtype=torch.float64, requires_grad=True)
    behavior = torch.tensor([[-2.0 - math.log(1.5)]], dtype=torch.float64)
    loss, _ = dis_policy_loss(
        logprobs,
        behavior,
        torch.tensor([[2.0]], dtype=torch.float64),
        torch.tensor([[True]]),
        eps_low=0.3,
        eps_high=5.0,
    )
    (gradient,) = torch.autograd.grad(loss, logprobs)
    assert gradient.item() == pytest.approx(-1.5 * 2.0)


def test_dis_bad_input():
    logprobs, behavior, advantages = dis_example()
    with pytest.raises(ValueError, match="eps_low"):
        dis_policy_loss(logprobs, behavior, advantages, MASK, eps_low=1.5, eps_high=5.0)
    with pytest.raises(ValueError, match="eps_high"):
        dis_policy_loss(logprobs, behavior, advantages, MASK, eps_low=0.3, eps_high=0.0)
    with pytest.raises(ValueError, match="advantages has shape"):
        dis_policy_loss(logprobs, behavior, advantages[:, :3], MASK, eps_low=0.3, eps_high=5.0)
    with pytest.raises(TypeError, match="action_mask must be a bool"):
        dis_policy_loss(logprobs, behavior, advantages, MASK.float(), eps_low=0.3, eps_high=5.0)
    bad_advantages = advantages.clone()
    bad_advantages[0, 0] = float("inf")
    with pytest.raises(ValueError, match="advantages has NaN or infinite"):
        dis_policy_loss(logprobs, behavior, bad_advantages, MASK, eps_low=0.3, eps_high=5.0)


def test_dis_with_no_action_token_is_zero_and_differentiable():
    logprobs = torch.zeros(2, 3, requires_grad=True)
    mask = torch.zeros(2, 3, dtype=torch.bool)
    loss, stats = dis_policy_loss(
        logprobs, torch.zeros(2, 3), torch.ones(2, 3), mask, eps_low=0.3, eps_high=5.0
    )
    loss.backward()
    assert loss.item() == 0.0 and logprobs.grad.eq(0).all()
    assert stats["num_action_tokens"] == 0.0 and stats["masked_below_fraction"] == 0.0


# ---------------------------------------------------------------------------------------- PPO


def ppo_example():
    # One row of five tokens: (ratio, advantage) chosen to hit every clipping case.
    ratios = torch.tensor([[1.5, 0.5, 0.5, 1.5, 1.0]], dtype=torch.float64)
    advantages = torch.tensor([[1.0, 1.0, -1.0, -1.0, 2.0]], dtype=torch.float64)
    logprobs = torch.full((1, 5), -1.0, dtype=torch.float64, requires_grad=True)
    return logprobs, with_ratios(logprobs, ratios), advantages, torch.ones(1, 5, dtype=torch.bool)


def test_ppo_clip_hand_computed_loss_and_gradient():
    logprobs, old, advantages, mask = ppo_example()
    loss, stats = ppo_clip_loss(logprobs, old, advantages, mask, eps_low=0.2, eps_high=0.2)
    # Per token: -1.2 (clip high binds), -0.5, 0.8 (clip low binds), 1.5, -2.
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 1.5 - 2.0) / 5)
    loss.backward()
    # d/dlogp of -r A is -r A where unclipped; exactly 0 where the clip binds.
    expected = torch.tensor([[0.0, -0.5, 0.0, 1.5, -2.0]], dtype=torch.float64) / 5
    torch.testing.assert_close(logprobs.grad, expected)
    assert logprobs.grad[0, 0] == 0.0 and logprobs.grad[0, 2] == 0.0
    assert stats["clip_fraction_low"] == pytest.approx(0.2)
    assert stats["clip_fraction_high"] == pytest.approx(0.2)
    assert stats["clip_fraction"] == pytest.approx(0.4)
    assert stats["dual_clip_fraction"] == 0.0
    # Gradient weights r where no clip binds: 0, 0.5, 0, 1.5, 1 -> 3^2 / (5 * 3.5).
    assert stats["effective_sample_size"] == pytest.approx(9 / 17.5)


def test_ppo_clip_higher_lets_a_larger_ratio_through():
    logprobs = torch.zeros(1, 1, dtype=torch.float64, requires_grad=True)
    old = with_ratios(logprobs, torch.tensor([[1.25]], dtype=torch.float64))
    advantage, mask = torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool)
    symmetric, _ = ppo_clip_loss(logprobs, old, advantage, mask, eps_low=0.2, eps_high=0.2)
    higher, _ = ppo_clip_loss(logprobs, old, advantage, mask, eps_low=0.2, eps_high=0.28)
    assert symmetric.item() == pytest.approx(-1.2)
    assert higher.item() == pytest.approx(-1.25)
    assert torch.autograd.grad(higher, logprobs)[0].item() == pytest.approx(-1.25)


def test_ppo_dual_clip_caps_negative_advantage_loss():
    ratios = torch.tensor([[4.0, 1.5, 4.0]], dtype=torch.float64)
    advantages = torch.tensor([[-1.0, -1.0, 1.0]], dtype=torch.float64)
    logprobs = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    old, mask = with_ratios(logprobs, ratios), torch.ones(1, 3, dtype=torch.bool)
    loss, stats = ppo_clip_loss(
        logprobs, old, advantages, mask, dual_clip=3.0, eps_low=0.2, eps_high=0.2
    )
    # Token 0: loss 4 capped at 3 * |A| = 3; token 1: 1.5 unaffected; token 2: clip high, -1.2.
    assert loss.item() == pytest.approx((3.0 + 1.5 - 1.2) / 3)
    loss.backward()
    torch.testing.assert_close(
        logprobs.grad, torch.tensor([[0.0, 1.5 / 3, 0.0]], dtype=torch.float64)
    )
    assert stats["dual_clip_fraction"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_clip_loss(logprobs, old, advantages, mask, dual_clip=1.0, eps_low=0.2, eps_high=0.2)


def test_aggregations_hand_computed():
    # Ratio 1 everywhere, so each token's loss is -A: row 0 has [-2], row 1 has [-1, -1, -1].
    mask = torch.tensor([[True, False, False], [True, True, True]])
    advantages = torch.tensor([[2.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    logprobs = torch.zeros(2, 3)
    losses = {
        aggregation: ppo_clip_loss(
            logprobs,
            logprobs,
            advantages,
            mask,
            aggregation=aggregation,
            max_length=10,
            eps_low=0.2,
            eps_high=0.2,
        )[0].item()
        for aggregation in ("token_mean", "sequence_mean", "constant_normalizer")
    }
    assert losses["token_mean"] == pytest.approx(-5 / 4)
    assert losses["sequence_mean"] == pytest.approx((-2 + -1) / 2)
    assert losses["constant_normalizer"] == pytest.approx(-5 / (2 * 10))
    with pytest.raises(ValueError, match="max_length"):
        ppo_clip_loss(
            logprobs,
            logprobs,
            advantages,
            mask,
            aggregation="constant_normalizer",
            eps_low=0.2,
            eps_high=0.2,
        )
    with pytest.raises(ValueError, match="aggregation"):
        ppo_clip_loss(
            logprobs, logprobs, advantages, mask, aggregation="sum", eps_low=0.2, eps_high=0.2
        )


@pytest.mark.parametrize("seed", range(3))
def test_aggregations_split_into_halves_recombine(seed):
    # Batch-size invariance: each aggregation of a batch is a weighted mix of its halves.
    generator = torch.Generator().manual_seed(seed)
    token_losses = torch.randn(6, 9, generator=generator, dtype=torch.float64)
    mask = torch.rand(6, 9, generator=generator) < 0.6
    mask[:, 0] = True
    halves = (slice(0, 2), slice(2, 6))

    def aggregate(rows, mode):
        return aggregate_token_losses(token_losses[rows], mask[rows], mode, max_length=9)

    tokens = [mask[rows].sum().item() for rows in halves]
    mixed = sum(n * aggregate(rows, "token_mean") for n, rows in zip(tokens, halves))
    torch.testing.assert_close(aggregate(slice(None), "token_mean"), mixed / sum(tokens))
    for mode in ("sequence_mean", "constant_normalizer"):
        mixed = 2 * aggregate(halves[0], mode) + 4 * aggregate(halves[1], mode)
        torch.testing.assert_close(aggregate(slice(None), mode), mixed / 6)


def test_every_loss_gives_non_action_tokens_exactly_zero_gradient():
    torch.manual_seed(0)
    logprobs = (torch.randn(2, 4) - 1).requires_grad_()
    junk = torch.randn(2, 4)
    junk[~MASK] = float("inf")
    old = logprobs.detach() + 0.1 * junk
    proximal = logprobs.detach() + 0.05 * junk
    advantages = torch.randn(2, 4)
    losses = [
        dis_policy_loss(logprobs, old, advantages, MASK, eps_low=0.3, eps_high=5.0)[0],
        ppo_clip_loss(logprobs, old, advantages, MASK, dual_clip=2.0, eps_low=0.2, eps_high=0.2)[0],
        ppo_clip_loss(
            logprobs, old, advantages, MASK, aggregation="sequence_mean", eps_low=0.2, eps_high=0.2
        )[0],
        gspo_loss(logprobs, old, advantages, MASK, eps_low=0.5, eps_high=0.5)[0],
        tis_policy_loss(logprobs, old, advantages, MASK, cap=2.0)[0],
        masked_is_policy_loss(logprobs, old, advantages, MASK, low=0.5, high=2.0)[0],
        decoupled_ppo_loss(
            logprobs, proximal, old, advantages, MASK, weight_cap=3.0, eps_low=0.2, eps_high=0.2
        )[0],
        policy_gradient_loss(logprobs, old, advantages, MASK)[0],
    ]
    for loss in losses:
        (gradient,) = torch.autograd.grad(loss, logprobs)
        assert torch.isfinite(loss)
        assert gradient[~MASK].eq(0).all()
        assert gradient[MASK].ne(0).any()


# --------------------------------------------------------------------------------------- GSPO


def test_gspo_hand_computed_loss_and_gradient():
    logprobs = torch.zeros(3, 3, dtype=torch.float64, requires_grad=True)
    log_ratios = torch.tensor(
        [[0.1, 0.3, 9.0], [-0.4, -0.2, 9.0], [9.0, 9.0, 9.0]], dtype=torch.float64
    )
    mask = torch.tensor([[True, True, False], [True, True, False], [False, False, False]])
    advantages = torch.tensor([1.0, -1.0, 5.0], dtype=torch.float64)
    loss, stats = gspo_loss(
        logprobs, logprobs.detach() - log_ratios, advantages, mask, eps_low=0.2, eps_high=0.5
    )
    # Row 0: s = e^0.2, in band, loss -s. Row 1: s = e^-0.3 < 0.8 with A < 0, clipped: 0.8.
    # Row 2 has no action token and is left out of the mean.
    assert loss.item() == pytest.approx((-math.exp(0.2) + 0.8) / 2)
    loss.backward()
    # d(-s A)/dlogp_t = -s A / (tokens in the row); the clipped row gets exactly zero.
    row0 = -math.exp(0.2) / 2 / 2
    expected = torch.tensor(
        [[row0, row0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64
    )
    torch.testing.assert_close(logprobs.grad, expected)
    assert stats["clip_fraction_low"] == pytest.approx(0.5)
    assert stats["clip_fraction_high"] == 0.0
    assert stats["num_sequences"] == 2.0
    assert stats["sequence_ratio_mean"] == pytest.approx((math.exp(0.2) + math.exp(-0.3)) / 2)
    # Over the two sequences: e^0.2 and 0 (clipped), so half the sample.
    assert stats["effective_sample_size"] == pytest.approx(0.5)


def test_gspo_accepts_token_level_broadcast_advantages():
    torch.manual_seed(1)
    logprobs = torch.randn(2, 4, requires_grad=True)
    old = logprobs.detach() + 1e-4 * torch.randn(2, 4)
    sequence_advantages = torch.tensor([0.7, -1.3])
    token_advantages = torch.where(MASK, sequence_advantages.unsqueeze(1), torch.zeros(2, 4))
    from_sequence, _ = gspo_loss(
        logprobs, old, sequence_advantages, MASK, eps_low=3e-4, eps_high=4e-4
    )
    from_tokens, _ = gspo_loss(logprobs, old, token_advantages, MASK, eps_low=3e-4, eps_high=4e-4)
    torch.testing.assert_close(from_sequence, from_tokens)
    with pytest.raises(ValueError, match=r"advantages must have shape \[batch\]"):
        gspo_loss(logprobs, old, torch.ones(3), MASK, eps_low=3e-4, eps_high=4e-4)


# -------------------------------------------------------------------------------------- value


def test_value_loss_hand_computed():
    values = torch.tensor([[1.0, 2.0, 7.0], [0.5, 7.0, 7.0]], dtype=torch.float64)
    values.requires_grad_()
    returns = torch.tensor([[2.0, 2.0, float("nan")], [1.5, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    loss, stats = value_loss(values, returns, mask)
    assert loss.item() == pytest.approx(0.5 * (1 + 0 + 1) / 3)
    loss.backward()
    expected = torch.tensor([[-1 / 3, 0.0, 0.0], [-1 / 3, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(values.grad, expected)
    # Var(returns) = 1/18, Var(returns - values) = 2/9 (population variances).
    assert stats["explained_variance"] == pytest.approx(1 - (2 / 9) / (1 / 18))
    assert stats["value_mean"] == pytest.approx(3.5 / 3)
    assert stats["return_mean"] == pytest.approx(5.5 / 3)
    assert stats["num_action_tokens"] == 3.0


def test_value_loss_explained_variance_edge_cases():
    mask = torch.tensor([[True, True, True]])
    returns = torch.tensor([[1.0, 2.0, 4.0]])
    assert value_loss(returns.clone(), returns, mask)[1]["explained_variance"] == pytest.approx(1.0)
    constant = torch.ones(1, 3)
    assert math.isnan(value_loss(torch.zeros(1, 3), constant, mask)[1]["explained_variance"])
    loss, stats = value_loss(torch.zeros(1, 3), constant, torch.zeros(1, 3, dtype=torch.bool))
    assert loss.item() == 0.0 and math.isnan(stats["explained_variance"])


def test_value_loss_clipping():
    values = torch.tensor([[2.0, 1.2]], requires_grad=True)
    old_values, returns = torch.tensor([[1.0, 1.0]]), torch.tensor([[3.0, 3.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    loss, stats = value_loss(values, returns, mask, old_values=old_values, clip_range=0.5)
    # Token 0: clipped prediction 1.5 is worse (2.25 > 1), so it wins and has no gradient.
    assert loss.item() == pytest.approx(0.5 * (2.25 + 1.8**2) / 2)
    loss.backward()
    torch.testing.assert_close(values.grad, torch.tensor([[0.0, (1.2 - 3.0) / 2]]))
    assert stats["value_clip_fraction"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="clip_range and old_values"):
        value_loss(values, returns, mask, clip_range=0.5)
