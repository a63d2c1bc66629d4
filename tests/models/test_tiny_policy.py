"""The embedded tiny policy and policy loading."""

import pytest
import torch

from sao_online.models import build_tiny_policy, load_policy


def test_default_size_is_about_one_million_parameters():
    model, tokenizer = build_tiny_policy()
    # embedding 262 x 128 (tied with the head) + 4 layers x (attention 4 x 128^2 + MLP
    # 3 x 128 x 512 + two norms of 128) + final norm 128.
    expected = 262 * 128 + 4 * (4 * 128 * 128 + 3 * 128 * 512 + 2 * 128) + 128
    assert expected == 1_083_264
    assert sum(parameter.numel() for parameter in model.parameters()) == expected
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.max_position_embeddings >= 512
    assert not model.training


def test_same_seed_same_weights_and_global_rng_untouched():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    first, _ = build_tiny_policy(num_layers=2, hidden_size=64, seed=7)
    assert torch.equal(torch.rand(3), expected_next)
    second, _ = build_tiny_policy(num_layers=2, hidden_size=64, seed=7)
    other, _ = build_tiny_policy(num_layers=2, hidden_size=64, seed=8)
    for (name, tensor), same_seed in zip(first.named_parameters(), second.parameters()):
        assert torch.equal(tensor, same_seed), name
    assert not torch.equal(first.model.embed_tokens.weight, other.model.embed_tokens.weight)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"num_layers": 0}, "num_layers"),
        ({"hidden_size": 60, "num_heads": 8}, "divisible"),
        ({"intermediate_size": -1}, "intermediate_size"),
    ],
)
def test_bad_sizes_raise_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        build_tiny_policy(**kwargs)


def test_load_policy_builds_tiny_from_name_or_config():
    model, tokenizer = load_policy({"num_layers": 2, "hidden_size": 64, "seed": 3})
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 64
    default, _ = load_policy("tiny")
    assert default.config.num_hidden_layers == 4
    with pytest.raises(ValueError, match="num_layer"):
        load_policy({"num_layer": 2})
    with pytest.raises(ValueError, match="no folder '/nonexistent/policy/dir'"):
        load_policy("/nonexistent/policy/dir")


def test_hf_save_and_load_round_trip_gives_identical_logits(tmp_path):
    model, tokenizer = build_tiny_policy(num_layers=2, hidden_size=64, seed=1)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load_policy(tmp_path)
    ids = torch.tensor([tokenizer.encode("round trip", add_special_tokens=False)])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
    messages = [{"role": "user", "content": "x"}]
    assert loaded_tokenizer.apply_chat_template(
        messages, tokenize=False
    ) == tokenizer.apply_chat_template(messages, tokenize=False)
