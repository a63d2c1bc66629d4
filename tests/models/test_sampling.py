"""Token sampling: greedy, temperature, top-p, determinism, recorded logprobs."""

import pytest
import torch

from sao_online.models import sample_tokens

LOGITS = torch.tensor([[0.0, 1.0, 2.0, -30.0], [3.0, 0.0, 0.0, 0.0]])


def test_greedy_takes_the_argmax_and_records_the_temperature_one_logprob():
    tokens, logprobs = sample_tokens(LOGITS, temperature=0.0)
    assert tokens.tolist() == [2, 0]
    expected = torch.log_softmax(LOGITS, dim=-1)[[0, 1], [2, 0]]
    torch.testing.assert_close(logprobs, expected)


def test_recorded_logprob_is_of_the_temperature_scaled_distribution():
    generator = torch.Generator().manual_seed(0)
    tokens, logprobs = sample_tokens(LOGITS.repeat(50, 1), temperature=0.7, generator=generator)
    scaled = torch.log_softmax(LOGITS.repeat(50, 1) / 0.7, dim=-1)
    torch.testing.assert_close(logprobs, scaled.gather(-1, tokens[:, None]).squeeze(-1))


def test_frequencies_follow_the_distribution_and_zero_mass_is_never_drawn():
    generator = torch.Generator().manual_seed(1)
    draws = 40_000
    tokens, _ = sample_tokens(LOGITS[:1].repeat(draws, 1), temperature=1.0, generator=generator)
    frequencies = torch.bincount(tokens, minlength=4).float() / draws
    probabilities = torch.softmax(LOGITS[0], dim=-1)
    # Standard error of a frequency near 0.5 with 40k draws is 0.0025; allow 4 of them.
    torch.testing.assert_close(frequencies, probabilities, atol=0.01, rtol=0)
    assert frequencies[3] == 0


def test_top_p_draws_only_inside_the_nucleus():
    generator = torch.Generator().manual_seed(2)
    # Probabilities 0.665, 0.245, 0.090: a 0.7 nucleus holds the top two only.
    tokens, logprobs = sample_tokens(LOGITS[:1].repeat(20_000, 1), top_p=0.7, generator=generator)
    assert set(tokens.tolist()) == {1, 2}
    share_of_top = (tokens == 2).float().mean().item()
    assert share_of_top == pytest.approx(0.665 / (0.665 + 0.245), abs=0.015)
    # Logprobs stay those of the untruncated distribution.
    torch.testing.assert_close(logprobs, torch.log_softmax(LOGITS[0], -1)[tokens])


def test_same_seed_same_tokens():
    logits = torch.randn(64, 50, generator=torch.Generator().manual_seed(3))
    first, _ = sample_tokens(logits, generator=torch.Generator().manual_seed(9))
    second, _ = sample_tokens(logits, generator=torch.Generator().manual_seed(9))
    other, _ = sample_tokens(logits, generator=torch.Generator().manual_seed(10))
    assert torch.equal(first, second)
    assert not torch.equal(first, other)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p")],
)
def test_invalid_settings_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sample_tokens(LOGITS, **kwargs)
