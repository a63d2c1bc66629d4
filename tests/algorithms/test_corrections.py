"""Off-policy corrections: hand-computed losses, gradients and stats of token TIS, sequence-level
masked IS, decoupled PPO and the plain policy gradient, and the effective sample size."""

from __future__ import annotations

import math

import pytest
import torch
from test_ablations import trajectory
from test_losses import MASK, token_tensor, with_ratios

from sao_online.learning.losses import (
    decoupled_ppo_loss,
    dis_policy_loss,
    effective_sample_size,
    masked_is_policy_loss,
    policy_gradient_loss,
    tis_policy_loss,
)

# The tokens of test_losses' DIS example: logprobs and advantages on MASK's five action tokens.
LOGPROBS = ([-1.0, -1.5, -2.0], [-0.3, -1.2])
ADVANTAGES = ([1.0, 2.0, -0.5], [3.0, 1.5])


def example(ratios):
    """Logprobs (with grad), behaviour logprobs giving ``ratios`` (NaN off actions: never read)
    and advantages on MASK."""
    logprobs = token_tensor(*LOGPROBS).requires_grad_()
    behavior = with_ratios(logprobs, token_tensor(*ratios, fill=1.0))
    behavior[~MASK] = float("nan")
    return logprobs, behavior, token_tensor(*ADVANTAGES, fill=100.0)


def gradient_of(loss, logprobs):
    (gradient,) = torch.autograd.grad(loss, logprobs)
    assert gradient[~MASK].eq(0).all()
    return gradient


# ------------------------------------------------------------------------- effective sample size


def test_effective_sample_size_hand_computed():
    mask = torch.tensor([[True, True, True, False]])
    assert effective_sample_size(torch.tensor([[1.0, 1.0, 1.0, 50.0]]), mask) == 1.0
    assert effective_sample_size(torch.tensor([[3.0, 0.0, 0.0, 1.0]]), mask) == pytest.approx(1 / 3)
    # (1 + 2 + 3)^2 / (3 * (1 + 4 + 9)) = 36 / 42.
    assert effective_sample_size(torch.tensor([[1.0, 2.0, 3.0, 0.0]]), mask) == pytest.approx(
        36 / 42
    )
    assert effective_sample_size(torch.zeros(1, 4), mask) == 0.0
    assert math.isnan(effective_sample_size(torch.ones(1, 4), torch.zeros(1, 4, dtype=torch.bool)))
    # float64 inside: float32 squares of 1e20 would overflow.
    assert effective_sample_size(torch.tensor([[1e20, 1e20, 0.0, 0.0]]), mask) == pytest.approx(
        2 / 3
    )


# ---------------------------------------------------------------------------------------- TIS


def test_tis_hand_computed_loss_gradient_and_stats():
    logprobs, behavior, advantages = example(([1.0, 0.5, 3.0], [7.0, 0.8]))
    loss, stats = tis_policy_loss(logprobs, behavior, advantages, MASK, cap=2.0)
    # Weights min(r, 2): 1, 0.5, 2, 2, 0.8. Loss -(1*1*-1 + 0.5*2*-1.5 + 2*-0.5*-2 + 2*3*-0.3
    # + 0.8*1.5*-1.2) / 5 = 3.74 / 5.
    assert loss.item() == pytest.approx(0.748)
    # The weight is detached: the gradient is -w A / N, and a truncated token keeps weight 2.
    expected = token_tensor([-0.2, -0.2, 0.2], [-1.2, -0.24], fill=0.0)
    torch.testing.assert_close(gradient_of(loss, logprobs), expected)
    assert stats["truncated_fraction"] == pytest.approx(2 / 5)
    assert stats["ratio_mean"] == pytest.approx(12.3 / 5)
    assert stats["ratio_max"] == pytest.approx(7.0)
    assert stats["effective_sample_size"] == pytest.approx(6.3**2 / (5 * 9.89))
    assert stats["num_action_tokens"] == 5.0


def test_tis_without_a_cap_is_importance_sampling_and_a_ratio_at_the_cap_is_not_truncated():
    logprobs, behavior, advantages = example(([1.0, 0.5, 2.0], [7.0, 0.8]))
    loss, stats = tis_policy_loss(logprobs, behavior, advantages, MASK, cap=math.inf)
    expected = token_tensor([-0.2, -0.2, 0.2], [-4.2, -0.24], fill=0.0)
    torch.testing.assert_close(gradient_of(loss, logprobs), expected)
    assert stats["truncated_fraction"] == 0.0
    _, at_cap = tis_policy_loss(logprobs, behavior, advantages, MASK, cap=2.0)
    assert at_cap["truncated_fraction"] == pytest.approx(1 / 5)  # 7 is truncated, 2 is not


def test_tis_bad_input():
    logprobs, behavior, advantages = example(([1.0, 1.0, 1.0], [1.0, 1.0]))
    for cap in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="cap must be positive"):
            tis_policy_loss(logprobs, behavior, advantages, MASK, cap=cap)
    behavior[0, 0] = math.inf
    with pytest.raises(ValueError, match="behavior_logprobs has NaN or infinite"):
        tis_policy_loss(logprobs, behavior, advantages, MASK, cap=2.0)


# ---------------------------------------------------------------------------------------- MIS

# Row 0: three action tokens and an observation; row 1: two action tokens and padding; row 2:
# action, observation, action, padding.
MIS_MASK = torch.tensor(
    [[True, True, True, False], [True, True, False, False], [True, False, True, False]]
)


def mis_example():
    logprobs = torch.tensor(
        [[-1.0, -1.5, -2.0, 0.0], [-0.3, -1.2, 0.0, 0.0], [-0.7, 0.0, -0.9, 0.0]],
        dtype=torch.float64,
        requires_grad=True,
    )
    ratios = torch.tensor(
        [[2.0, 2.0, 0.5, 1.0], [7.0, 0.8, 1.0, 1.0], [0.25, 1.0, 0.5, 1.0]], dtype=torch.float64
    )
    behavior = with_ratios(logprobs, ratios)
    behavior[~MIS_MASK] = float("nan")
    advantages = torch.tensor(
        [[1.0, 2.0, -0.5, 9.0], [3.0, 1.5, 9.0, 9.0], [4.0, 9.0, -4.0, 9.0]], dtype=torch.float64
    )
    return logprobs, behavior, advantages


def test_mis_hand_computed_loss_gradient_and_stats():
    logprobs, behavior, advantages = mis_example()
    loss, stats = masked_is_policy_loss(logprobs, behavior, advantages, MIS_MASK, low=0.5, high=2.0)
    # Geometric means: row 0 (2 * 2 * 0.5)^(1/3) = 2^(1/3), kept; row 1 sqrt(5.6) >= 2 and
    # row 2 sqrt(0.125) <= 0.5, rejected whole. N = 7 action tokens, rejected ones included.
    rho = 2.0 ** (1 / 3)
    assert loss.item() == pytest.approx(-rho * (1 * -1 + 2 * -1.5 + -0.5 * -2) / 7)
    (gradient,) = torch.autograd.grad(loss, logprobs)
    expected = torch.zeros(3, 4, dtype=torch.float64)
    expected[0, :3] = torch.tensor([-1.0, -2.0, 0.5], dtype=torch.float64) * rho / 7
    torch.testing.assert_close(gradient, expected)  # rho detached: linear in logprobs
    assert stats["masked_above_fraction"] == pytest.approx(2 / 7)
    assert stats["masked_below_fraction"] == pytest.approx(2 / 7)
    assert stats["rejected_sequence_fraction"] == pytest.approx(2 / 3)
    sequence_ratios = [rho, math.sqrt(5.6), math.sqrt(0.125)]
    assert stats["sequence_ratio_mean"] == pytest.approx(sum(sequence_ratios) / 3)
    assert stats["sequence_ratio_max"] == pytest.approx(math.sqrt(5.6))
    assert stats["ratio_mean"] == pytest.approx(13.05 / 7)
    assert stats["ratio_max"] == pytest.approx(7.0)
    assert stats["effective_sample_size"] == pytest.approx(3 / 7)  # 3 equal weights, 4 zeros
    assert stats["num_action_tokens"] == 7.0 and stats["num_sequences"] == 3.0


def test_mis_band_edges_are_rejected_and_a_wide_band_keeps_every_sequence():
    # Every token of row 0 has log ratio exactly log 2, every token of row 1 exactly log 0.5.
    logprobs = torch.zeros(2, 2, dtype=torch.float64, requires_grad=True)
    behavior = torch.tensor([[-math.log(2.0)] * 2, [math.log(2.0)] * 2], dtype=torch.float64)
    assert math.log(0.5) == -math.log(2.0)
    mask = torch.ones(2, 2, dtype=torch.bool)
    advantages = torch.ones(2, 2, dtype=torch.float64)
    loss, stats = masked_is_policy_loss(logprobs, behavior, advantages, mask, low=0.5, high=2.0)
    assert stats["rejected_sequence_fraction"] == 1.0 and loss.item() == 0.0
    assert stats["masked_above_fraction"] == 0.5 and stats["masked_below_fraction"] == 0.5
    wide, stats = masked_is_policy_loss(
        logprobs, behavior, advantages, mask, low=0.0, high=math.inf
    )
    assert stats["rejected_sequence_fraction"] == 0.0
    # Weights 2 and 0.5 on logprobs 0: the loss is 0 but the gradient -w A / N is not.
    expected = torch.tensor([[-0.5, -0.5], [-0.125, -0.125]], dtype=torch.float64)
    torch.testing.assert_close(torch.autograd.grad(wide, logprobs)[0], expected)


def test_mis_refuses_an_empty_band():
    logprobs, behavior, advantages = mis_example()
    for low, high in ((2.0, 0.5), (1.0, 1.0), (-0.1, 2.0)):
        with pytest.raises(ValueError, match=r"the band \(low, high\) = .* is empty"):
            masked_is_policy_loss(logprobs, behavior, advantages, MIS_MASK, low=low, high=high)


# ------------------------------------------------------------------------------ decoupled PPO


def decoupled_example():
    """Current logprobs (with grad), proximal ones at ratios ``u`` = current / proximal, and
    behaviour ones at weights ``w`` = proximal / behaviour."""
    logprobs = token_tensor(*LOGPROBS).requires_grad_()
    proximal = with_ratios(logprobs, token_tensor([1.0, 1.5, 0.5], [1.1, 0.7], fill=1.0))
    behavior = proximal - torch.log(token_tensor([1.0, 2.0, 4.0], [0.5, 3.0], fill=1.0))
    advantages = token_tensor([1.0, 2.0, -0.5], [3.0, 1.5], fill=100.0)
    return logprobs, proximal, behavior, advantages


def test_decoupled_ppo_hand_computed_loss_gradient_and_stats():
    logprobs, proximal, behavior, advantages = decoupled_example()
    loss, stats = decoupled_ppo_loss(
        logprobs, proximal, behavior, advantages, MASK, eps_low=0.2, eps_high=0.2
    )
    # Per token -w * min(u A, clip(u, 0.8, 1.2) A): -1 * 1; -2 * 2.4 (clip high binds);
    # -4 * -0.4 (clip low binds); -0.5 * 3.3; -3 * 1.05 (u = 0.7 with A > 0: unclipped).
    assert loss.item() == pytest.approx((-1.0 - 4.8 + 1.6 - 1.65 - 3.15) / 5)
    # The gradient is -w u A / N where no clip binds (w detached), exactly 0 where one does.
    expected = token_tensor([-0.2, 0.0, 0.0], [-0.33, -0.63], fill=0.0)
    gradient = gradient_of(loss, logprobs)
    torch.testing.assert_close(gradient, expected)
    assert gradient[0, 1] == 0.0 and gradient[0, 2] == 0.0
    assert stats["clip_fraction_high"] == pytest.approx(0.2)
    assert stats["clip_fraction_low"] == pytest.approx(0.2)
    assert stats["clip_fraction"] == pytest.approx(0.4)
    assert stats["masked_above_fraction"] == 0.0
    assert stats["behavior_weight_mean"] == pytest.approx(10.5 / 5)
    assert stats["behavior_weight_max"] == pytest.approx(4.0)
    assert stats["proximal_ratio_mean"] == pytest.approx(4.8 / 5)
    assert stats["ratio_mean"] == pytest.approx((1.0 + 3.0 + 2.0 + 0.55 + 2.1) / 5)  # u * w
    assert stats["ratio_max"] == pytest.approx(3.0)
    # Gradient weights w u: 1, 0, 0, 0.55, 2.1.
    assert stats["effective_sample_size"] == pytest.approx(3.65**2 / (5 * 5.7125))


def test_decoupled_ppo_weight_cap_masks_tokens_above_it():
    logprobs, proximal, behavior, advantages = decoupled_example()
    loss, stats = decoupled_ppo_loss(
        logprobs, proximal, behavior, advantages, MASK, weight_cap=2.5, eps_low=0.2, eps_high=0.2
    )
    # w = 4 and w = 3 are above the cap: those tokens leave the loss (and stay in N).
    assert loss.item() == pytest.approx((-1.0 - 4.8 - 1.65) / 5)
    expected = token_tensor([-0.2, 0.0, 0.0], [-0.33, 0.0], fill=0.0)
    torch.testing.assert_close(gradient_of(loss, logprobs), expected)
    assert stats["masked_above_fraction"] == pytest.approx(0.4)
    assert stats["behavior_weight_max"] == pytest.approx(4.0)  # before the cap


def test_decoupled_ppo_at_the_proximal_policy_is_untruncated_importance_sampling():
    # One gradient step per batch: the proximal policy is the current one, u = 1 exactly.
    logprobs, behavior, advantages = example(([1.0, 0.5, 3.0], [7.0, 0.8]))
    loss, stats = decoupled_ppo_loss(
        logprobs, logprobs.detach(), behavior, advantages, MASK, eps_low=0.2, eps_high=0.2
    )
    tis, _ = tis_policy_loss(logprobs, behavior, advantages, MASK, cap=math.inf)
    torch.testing.assert_close(gradient_of(loss, logprobs), gradient_of(tis, logprobs))
    ratios = token_tensor([1.0, 0.5, 3.0], [7.0, 0.8], fill=0.0)
    weighted = torch.where(MASK, ratios * token_tensor(*ADVANTAGES, fill=0.0), 0.0)
    assert loss.item() == pytest.approx(-weighted.sum().item() / 5)  # the value: -sum w A / N
    assert stats["clip_fraction"] == 0.0 and stats["proximal_ratio_mean"] == 1.0
    assert stats["behavior_weight_mean"] == pytest.approx(stats["ratio_mean"])
    # With a cap c: DIS with no lower edge and the upper edge at c (away from the edge itself).
    capped, _ = decoupled_ppo_loss(
        logprobs,
        logprobs.detach(),
        behavior,
        advantages,
        MASK,
        weight_cap=2.5,
        eps_low=0.2,
        eps_high=0.2,
    )
    dis, _ = dis_policy_loss(logprobs, behavior, advantages, MASK, eps_low=1.0, eps_high=1.5)
    torch.testing.assert_close(gradient_of(capped, logprobs), gradient_of(dis, logprobs))


def test_decoupled_ppo_bad_input():
    logprobs, proximal, behavior, advantages = decoupled_example()
    with pytest.raises(ValueError, match="weight_cap must be positive"):
        decoupled_ppo_loss(
            logprobs,
            proximal,
            behavior,
            advantages,
            MASK,
            weight_cap=0.0,
            eps_low=0.2,
            eps_high=0.2,
        )
    with pytest.raises(ValueError, match="eps_low"):
        decoupled_ppo_loss(
            logprobs, proximal, behavior, advantages, MASK, eps_low=0.0, eps_high=0.2
        )
    with pytest.raises(ValueError, match="proximal_logprobs has shape"):
        decoupled_ppo_loss(
            logprobs, proximal[:, :2], behavior, advantages, MASK, eps_low=0.2, eps_high=0.2
        )
    proximal[1, 0] = math.nan
    with pytest.raises(ValueError, match="proximal_logprobs has NaN"):
        decoupled_ppo_loss(
            logprobs, proximal, behavior, advantages, MASK, eps_low=0.2, eps_high=0.2
        )


# --------------------------------------------------------------------------------------- none


def test_plain_policy_gradient_ignores_the_behaviour_policy():
    logprobs, behavior, advantages = example(([1.0, 0.5, 3.0], [7.0, 0.8]))
    loss, stats = policy_gradient_loss(logprobs, behavior, advantages, MASK)
    # -(1*-1 + 2*-1.5 + -0.5*-2 + 3*-0.3 + 1.5*-1.2) / 5.
    assert loss.item() == pytest.approx(5.7 / 5)
    expected = token_tensor([-0.2, -0.4, 0.1], [-0.6, -0.3], fill=0.0)
    torch.testing.assert_close(gradient_of(loss, logprobs), expected)
    assert stats["effective_sample_size"] == 1.0
    assert stats["ratio_max"] == pytest.approx(7.0)  # reported, not used
    on_policy = logprobs.detach().clone()
    on_policy[~MASK] = float("nan")
    same, fresh = policy_gradient_loss(logprobs, on_policy, advantages, MASK)
    assert same.item() == loss.item() and fresh["ratio_max"] == 1.0


def test_with_no_action_token_every_correction_is_zero():
    logprobs = torch.zeros(2, 3, requires_grad=True)
    mask = torch.zeros(2, 3, dtype=torch.bool)
    zeros, ones = torch.zeros(2, 3), torch.ones(2, 3)
    for loss, stats in (
        tis_policy_loss(logprobs, zeros, ones, mask, cap=2.0),
        masked_is_policy_loss(logprobs, zeros, ones, mask, low=0.5, high=2.0),
        decoupled_ppo_loss(logprobs, zeros, zeros, ones, mask, eps_low=0.2, eps_high=0.2),
        policy_gradient_loss(logprobs, zeros, ones, mask),
    ):
        assert loss.item() == 0.0 and torch.autograd.grad(loss, logprobs)[0].eq(0).all()
        assert stats["num_action_tokens"] == 0.0 and math.isnan(stats["effective_sample_size"])


def test_docstring_examples_run():
    import doctest

    from sao_online.learning.losses import common, corrections

    for module in (common, corrections):
        results = doctest.testmod(module)
        assert results.attempted > 0 and results.failed == 0, module.__name__


# ------------------------------------------------------------------------- objectives, registry


def test_the_registry_builds_each_correction_and_method_from_the_config():
    from sao_online.algorithms import (
        CORRECTIONS,
        CriticGAE,
        DecoupledPPO,
        GroupNormalized,
        PlainPolicyGradient,
        SequenceMaskedIS,
        TruncatedIS,
        build_method,
    )
    from sao_online.config import load_config

    settings = {
        "tis_cap": 3.0,
        "mis_low": 0.25,
        "mis_high": 4.0,
        "decoupled_weight_cap": 5.0,
        "clip_eps_high": 0.28,
    }
    cfg = load_config({"algorithm": settings}).algorithm
    assert CORRECTIONS["tis"](cfg) == TruncatedIS(cap=3.0)
    assert CORRECTIONS["mis"](cfg) == SequenceMaskedIS(low=0.25, high=4.0)
    assert CORRECTIONS["decoupled"](cfg) == DecoupledPPO(0.2, 0.28, weight_cap=5.0)
    assert CORRECTIONS["none"](cfg) == PlainPolicyGradient()
    expected = {"tis": TruncatedIS, "mis": SequenceMaskedIS, "decoupled": DecoupledPPO}
    expected["nocorr"] = PlainPolicyGradient
    for correction, objective in expected.items():
        for estimator, kind, group_size in (("sao", CriticGAE, 1), ("grpo", GroupNormalized, 8)):
            method = build_method(load_config({"algorithm": {"name": f"{estimator}_{correction}"}}))
            assert type(method.estimator) is kind and type(method.objective) is objective
            assert method.group_size == group_size and method.name == f"{estimator}_{correction}"


def test_the_objectives_refuse_an_empty_band_when_built():
    from sao_online.algorithms import DecoupledPPO, SequenceMaskedIS, TruncatedIS

    with pytest.raises(ValueError, match="TruncatedIS.cap must be positive, got 0"):
        TruncatedIS(cap=0.0)
    with pytest.raises(ValueError, match=r"the band \(low, high\) = \(2.0, 0.5\) is empty"):
        SequenceMaskedIS(low=2.0, high=0.5)
    with pytest.raises(ValueError, match="DecoupledPPO.weight_cap must be positive"):
        DecoupledPPO(weight_cap=-1.0, eps_low=0.2, eps_high=0.2)
    with pytest.raises(ValueError, match="DecoupledPPO: eps_low must be in"):
        DecoupledPPO(eps_low=1.5, eps_high=0.2)


def test_decoupled_ppo_needs_the_learners_proximal_logprobs():
    from sao_online.algorithms import DecoupledPPO
    from sao_online.learning.batching import collate

    batch = collate([trajectory()], pad_token_id=0)  # six tokens, three of them actions
    logprobs = torch.full((1, 6), -0.5, requires_grad=True)
    with pytest.raises(ValueError, match="DecoupledPPO needs batch.proximal_logprobs"):
        DecoupledPPO(eps_low=0.2, eps_high=0.2)(logprobs, batch, torch.ones(1, 6))
    batch.proximal_logprobs = logprobs.detach()
    loss, stats = DecoupledPPO(eps_low=0.2, eps_high=0.2)(logprobs, batch, torch.ones(1, 6))
    # Behaviour logprobs 0: w = e^-0.5 on every action token, u = 1, A = 1.
    assert loss.item() == pytest.approx(-math.exp(-0.5))
    assert stats["clip_fraction"] == 0.0
