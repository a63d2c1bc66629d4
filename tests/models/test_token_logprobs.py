"""token_logprobs: shift, gather, padding, temperature, entropy."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from sao_online.models import build_tiny_policy, token_logprobs


class BigramModel(nn.Module):
    """Logits depend only on the current token: a table we can compute by hand."""

    def __init__(self, table):
        super().__init__()
        self.table = nn.Parameter(table)

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=False):
        return SimpleNamespace(logits=self.table[input_ids])


TABLE = torch.tensor([[0.0, 1.0, 2.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])


def test_hand_computed_bigram_logprobs_with_right_padding():
    model = BigramModel(TABLE.clone())
    input_ids = torch.tensor([[0, 2, 1], [1, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    logprobs = token_logprobs(model, input_ids, attention_mask)
    log_softmax = torch.log_softmax(TABLE, dim=-1)
    expected = torch.tensor(
        [
            [0.0, log_softmax[0, 2], log_softmax[2, 1]],
            [0.0, log_softmax[1, 0], 0.0],
        ]
    )
    torch.testing.assert_close(logprobs, expected)
    # e.g. log softmax([2, 0, 0])[0] = 2 - log(e^2 + 2)
    assert logprobs[1, 1].item() == pytest.approx(
        2 - torch.log(torch.tensor(2.0).exp() + 2).item(), abs=1e-6
    )


def test_temperature_and_entropy_match_direct_computation():
    model = BigramModel(TABLE.clone())
    input_ids = torch.tensor([[0, 1, 2, 2]])
    result = token_logprobs(
        model, input_ids, temperature=0.5, return_entropy=True, return_logits=True
    )
    scaled = torch.log_softmax(TABLE / 0.5, dim=-1)
    torch.testing.assert_close(
        result.logprobs[0, 1:], torch.stack([scaled[0, 1], scaled[1, 2], scaled[2, 2]])
    )
    entropy = -(scaled.exp() * scaled).sum(-1)
    torch.testing.assert_close(result.entropy[0, 1:], entropy[[0, 1, 2]])
    assert result.entropy[0, 0] == 0
    assert result.logits.shape == (1, 4, 3)


def test_left_and_right_padding_and_single_rows_agree_on_a_transformer():
    torch.manual_seed(0)
    model, _ = build_tiny_policy(num_layers=2, hidden_size=64, seed=0)
    short, long = [5, 9, 200, 7], [1, 2, 3, 4, 5, 6]
    right = torch.tensor([short + [0, 0], long])
    right_mask = torch.tensor([[1] * 4 + [0, 0], [1] * 6])
    left = torch.tensor([[0, 0] + short, long])
    left_mask = torch.tensor([[0, 0] + [1] * 4, [1] * 6])
    with torch.no_grad():
        from_right = token_logprobs(model, right, right_mask)
        from_left = token_logprobs(model, left, left_mask)
        alone = token_logprobs(model, torch.tensor([short]))
    torch.testing.assert_close(from_right[0, :4], alone[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(from_left[0, 2:], alone[0], atol=1e-5, rtol=0)
    assert torch.equal(from_left[0, :3], torch.zeros(3))  # padding and the first real token
    torch.testing.assert_close(from_right[1], from_left[1], atol=1e-5, rtol=0)


def test_gradients_flow_to_the_model():
    model = BigramModel(TABLE.clone())
    token_logprobs(model, torch.tensor([[0, 2, 1]])).sum().backward()
    assert model.table.grad is not None and model.table.grad.abs().sum() > 0


def test_bad_input_raises():
    model = BigramModel(TABLE.clone())
    with pytest.raises(ValueError, match="batch, time"):
        token_logprobs(model, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="attention_mask shape"):
        token_logprobs(model, torch.tensor([[0, 1]]), torch.tensor([[1, 1, 1]]))
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(model, torch.tensor([[0, 1]]), temperature=0.0)
