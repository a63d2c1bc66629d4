"""The critic: zero-initialised head, frozen attention, independence from the policy, round trip."""

import pytest
import torch

from sao_online.models import ValueModel, build_tiny_policy

INPUT_IDS = torch.tensor([[257, 260, 104, 105, 258, 261], [257, 260, 33, 258, 261, 256]])
ATTENTION_MASK = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])


@pytest.fixture
def policy():
    model, _ = build_tiny_policy(num_layers=2, hidden_size=64, seed=0)
    return model


def _train(critic, steps):
    optimizer = torch.optim.SGD(critic.trainable_parameters(), lr=0.05)
    for _ in range(steps):
        optimizer.zero_grad()
        values = critic(INPUT_IDS, ATTENTION_MASK)
        (((values - 1.0) ** 2 * ATTENTION_MASK).sum() / ATTENTION_MASK.sum()).backward()
        optimizer.step()


def test_values_are_exactly_zero_at_init(policy):
    critic = ValueModel.from_policy(policy)
    values = critic(INPUT_IDS, ATTENTION_MASK)
    assert values.shape == (2, 6) and values.dtype == torch.float32
    assert torch.equal(values, torch.zeros(2, 6))
    assert torch.equal(critic.value_head.weight, torch.zeros(1, 64))
    assert torch.equal(critic.value_head.bias, torch.zeros(1))


def test_backbone_starts_as_the_policys_and_is_a_separate_copy(policy):
    critic = ValueModel.from_policy(policy)
    policy_state = policy.model.state_dict()
    for name, tensor in critic.backbone.state_dict().items():
        assert torch.equal(tensor, policy_state[name]), name
    _train(critic, steps=2)
    assert not torch.equal(
        critic.backbone.layers[0].mlp.up_proj.weight, policy.model.layers[0].mlp.up_proj.weight
    )
    assert torch.equal(
        policy.model.state_dict()["layers.0.mlp.up_proj.weight"],
        policy_state["layers.0.mlp.up_proj.weight"],
    )


def test_frozen_attention_stays_fixed_while_mlp_norms_embedding_head_train(policy):
    critic = ValueModel.from_policy(policy, freeze_attention=True)
    frozen = {name for name, parameter in critic.named_parameters() if not parameter.requires_grad}
    assert frozen and all("self_attn" in name for name in frozen)
    assert {name for name, _ in critic.named_parameters() if "self_attn" in name} == frozen
    trainable_ids = {id(parameter) for parameter in critic.trainable_parameters()}
    assert all(
        id(parameter) not in trainable_ids
        for name, parameter in critic.named_parameters()
        if name in frozen
    )
    before = {name: parameter.detach().clone() for name, parameter in critic.named_parameters()}
    # The head is zero, so the first step moves only the head; the second reaches the backbone.
    _train(critic, steps=2)
    after = dict(critic.named_parameters())
    for name in frozen:
        assert torch.equal(before[name], after[name]), name
    for name in (
        "value_head.weight",
        "backbone.layers.1.mlp.down_proj.weight",
        "backbone.norm.weight",
        "backbone.embed_tokens.weight",
    ):
        assert not torch.equal(before[name], after[name]), name


def test_unfrozen_critic_trains_everything(policy):
    critic = ValueModel.from_policy(policy, freeze_attention=False)
    assert all(parameter.requires_grad for parameter in critic.parameters())


def test_save_and_load_round_trip_gives_identical_values(policy, tmp_path):
    critic = ValueModel.from_policy(policy)
    _train(critic, steps=3)
    values = critic(INPUT_IDS, ATTENTION_MASK)
    assert values.abs().sum() > 0
    critic.save_pretrained(tmp_path / "critic")
    reloaded = ValueModel.from_pretrained(tmp_path / "critic")
    assert torch.equal(reloaded(INPUT_IDS, ATTENTION_MASK), values)
    assert reloaded.freeze_attention
    assert {name for name, p in reloaded.named_parameters() if not p.requires_grad} == {
        name for name, p in critic.named_parameters() if not p.requires_grad
    }
    with pytest.raises(ValueError, match="lacks"):
        ValueModel.from_pretrained(tmp_path)
