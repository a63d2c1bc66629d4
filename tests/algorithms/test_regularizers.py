"""KL to a reference policy and entropy bonus: hand values, torch.distributions, sampling."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical, kl_divergence

from sao_online.learning.regularizers import entropy_bonus, exact_kl, k3_kl, token_exact_kl


def test_exact_kl_hand_computed():
    # p = (1/2, 1/2), q = (1/4, 3/4): KL(p || q) = 1/2 ln 2 + 1/2 ln(2/3) = 1/2 ln(4/3).
    logits = torch.log(torch.tensor([[[0.5, 0.5]]]))
    ref_logits = torch.log(torch.tensor([[[0.25, 0.75]]])) + 3.0  # a shift changes nothing
    kl = exact_kl(logits, ref_logits, torch.tensor([[True]]))
    assert kl.item() == pytest.approx(0.5 * math.log(4 / 3), rel=1e-6)


def test_exact_kl_matches_torch_distributions_on_action_tokens_only():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
    ref_logits = torch.randn(3, 5, 7, dtype=torch.float64)
    mask = torch.rand(3, 5) < 0.5
    mask[0, 0] = True
    expected = kl_divergence(Categorical(logits=logits), Categorical(logits=ref_logits))[mask]
    kl = exact_kl(logits, ref_logits, mask)
    torch.testing.assert_close(kl, expected.mean())
    (gradient,) = torch.autograd.grad(kl, logits)
    assert gradient[~mask].eq(0).all()
    assert gradient[mask].ne(0).any()


def test_exact_kl_is_zero_for_equal_logits_and_handles_zero_probabilities():
    logits = torch.randn(2, 3, 4)
    mask = torch.ones(2, 3, dtype=torch.bool)
    assert exact_kl(logits, logits.clone(), mask).abs().item() < 1e-6
    # The policy puts no mass on token 1 (logit -inf): 0 * log 0 counts as 0, gradients finite.
    policy = torch.tensor([[[0.0, -math.inf]]], requires_grad=True)
    kl = exact_kl(policy, torch.zeros(1, 1, 2), torch.tensor([[True]]))
    assert kl.item() == pytest.approx(math.log(2))
    (gradient,) = torch.autograd.grad(kl, policy)
    assert torch.isfinite(gradient).all()
    # The reference puts no mass where the policy does: the true KL is infinite.
    assert math.isinf(
        token_exact_kl(torch.zeros(1, 1, 2), torch.tensor([[[0.0, -math.inf]]])).item()
    )


def test_k3_is_unbiased_for_the_kl_when_sampling_from_the_policy():
    generator = torch.Generator().manual_seed(0)
    policy_logits = torch.tensor([1.0, 0.0, -1.0, 0.5], dtype=torch.float64)
    reference_logits = torch.tensor([0.0, 0.5, 0.0, -0.5], dtype=torch.float64)
    policy_logprobs = torch.log_softmax(policy_logits, -1)
    reference_logprobs = torch.log_softmax(reference_logits, -1)
    samples = torch.multinomial(
        policy_logprobs.exp(), 200_000, replacement=True, generator=generator
    ).unsqueeze(0)
    mask = torch.ones_like(samples, dtype=torch.bool)
    estimate = k3_kl(policy_logprobs[samples], reference_logprobs[samples], mask)
    exact = (policy_logprobs.exp() * (policy_logprobs - reference_logprobs)).sum()
    assert estimate.item() == pytest.approx(exact.item(), rel=0.03)


def test_k3_hand_value_nonnegative_zero_when_equal_and_masked():
    logprobs = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    ref_logprobs = torch.tensor([[-1.0 + math.log(2.0), -2.0, 50.0]])
    mask = torch.tensor([[True, True, False]])
    kl = k3_kl(logprobs, ref_logprobs, mask)
    # Token 0: x = ln 2, k3 = 2 - ln 2 - 1; token 1: 0; token 2 is not an action.
    assert kl.item() == pytest.approx((1 - math.log(2)) / 2)
    (gradient,) = torch.autograd.grad(kl, logprobs)
    assert gradient[0, 2] == 0.0
    assert k3_kl(logprobs, logprobs.detach(), mask).item() == 0.0
    torch.manual_seed(0)
    assert k3_kl(torch.randn(4, 6), torch.randn(4, 6), torch.ones(4, 6, dtype=torch.bool)) >= 0


def test_entropy_bonus():
    logits = torch.zeros(1, 3, 4)
    logits[0, 1] = torch.tensor([0.0, -math.inf, -math.inf, -math.inf])  # deterministic
    logits[0, 2] = torch.tensor([0.3, -1.0, 2.0, 0.1])
    logits.requires_grad_()
    mask = torch.tensor([[True, True, False]])
    entropy = entropy_bonus(logits, mask)
    assert entropy.item() == pytest.approx((math.log(4) + 0.0) / 2)
    (gradient,) = torch.autograd.grad(entropy, logits)
    assert torch.isfinite(gradient).all() and gradient[0, 2].eq(0).all()
    torch.manual_seed(0)
    random_logits = torch.randn(2, 3, 5)
    full = torch.ones(2, 3, dtype=torch.bool)
    torch.testing.assert_close(
        entropy_bonus(random_logits, full), Categorical(logits=random_logits).entropy().mean()
    )


def test_regularizers_reject_bad_shapes():
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"logits must have shape \[batch, time, vocab\]"):
        entropy_bonus(torch.zeros(2, 3), mask)
    with pytest.raises(ValueError, match="logits shapes differ"):
        exact_kl(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5), mask)
    with pytest.raises(ValueError, match="ref_logprobs has shape"):
        k3_kl(torch.zeros(2, 3), torch.zeros(2, 2), mask)
