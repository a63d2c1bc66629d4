"""Prefix sharing gives the plain forward pass's outputs and gradients on ragged batches."""

import pytest
import torch
from tiny_model import TINY_MODEL

from sao_online.config import load_config
from sao_online.learning.prefix_sharing import (
    causal_lm_forward,
    plan_prefix_sharing,
    shared_prefix_forward,
    value_model_forward,
)
from sao_online.models import ValueModel, build_tiny_policy
from sao_online.runtime.context import RunContext
from sao_online.runtime.envs import plan_to_request

PAD = 0


def ragged_batch():
    """Three groups with prompts of 5, 9 and 7 tokens, completions of 1 to 6 tokens, padding.

    Group 0's third member differs from the others at position 4, so that group can share only
    4 tokens; group 2 is a single row (an SAO-style episode).
    """
    generator = torch.Generator().manual_seed(3)

    def draw(n):
        return torch.randint(3, 200, (n,), generator=generator)

    prompt_a, prompt_b, prompt_c = draw(5), draw(9), draw(7)
    deviant = prompt_a.clone()
    deviant[4] = prompt_a[4] + 1
    rows = [
        (0, torch.cat([prompt_a, draw(6)])),
        (0, torch.cat([prompt_a, draw(2)])),
        (0, torch.cat([deviant, draw(4)])),
        (1, torch.cat([prompt_b, draw(1)])),
        (1, torch.cat([prompt_b, draw(5)])),
        (2, torch.cat([prompt_c, draw(3)])),
    ]
    width = max(len(tokens) for _, tokens in rows)
    tokens = torch.full((len(rows), width), PAD, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for row, (_, sequence) in enumerate(rows):
        tokens[row, : len(sequence)] = sequence
        attention_mask[row, : len(sequence)] = True
    group_ids = torch.tensor([group for group, _ in rows])
    return tokens, attention_mask, group_ids


def test_plan_shares_only_the_verified_common_prefix():
    tokens, attention_mask, group_ids = ragged_batch()
    plan = plan_prefix_sharing(tokens, attention_mask, group_ids, min_saving=0.0)
    # Group 0: the deviant member cuts the shared prefix to 4. Group 1: the 9-token prompt (its
    # shorter member keeps its one completion token). The singleton reads its own first 9 tokens
    # (the widest prefix; it keeps its last token as its suffix).
    assert plan.prefix_lengths.tolist() == [4, 4, 4, 9, 9, 9]
    assert plan.row_lengths.tolist() == [11, 7, 9, 10, 14, 10]
    assert plan.prefix_width == 9 and plan.suffix_width == 7
    assert plan.num_groups == 3
    assert plan.token_positions() == 3 * 9 + 6 * 7


def test_plan_declines_when_nothing_is_shared_or_it_saves_too_little():
    tokens, attention_mask, _ = ragged_batch()
    assert plan_prefix_sharing(tokens, attention_mask, torch.arange(6)) is None  # SAO: all distinct
    same = torch.zeros(6, dtype=torch.long)
    # One group of every row: the prompts differ from their first token, nothing is common.
    assert plan_prefix_sharing(tokens, attention_mask, same) is None
    # The ragged batch runs 69 of 84 positions: an 18% saving, under the default 20%.
    assert plan_prefix_sharing(tokens, attention_mask, ragged_batch()[2]) is None


def test_plan_rejects_bad_input():
    tokens, attention_mask, group_ids = ragged_batch()
    with pytest.raises(ValueError, match="group_ids"):
        plan_prefix_sharing(tokens, attention_mask, group_ids[:3])
    with pytest.raises(ValueError, match="right-padded"):
        plan_prefix_sharing(tokens, attention_mask.flip(1), group_ids)
    with pytest.raises(ValueError, match="at least one real token"):
        empty = attention_mask.clone()
        empty[2] = False
        plan_prefix_sharing(tokens, empty, group_ids)


def _tiny_policy():
    policy, _ = build_tiny_policy(num_layers=2, hidden_size=64, seed=1)
    policy.train()
    return policy


def _row_weights(shape):
    # Different weights per row and position: the members' gradients on the shared prefix must
    # add up, not just equal one member's.
    return torch.randn(shape, generator=torch.Generator().manual_seed(5))


def _parameter_gradients(model, per_token, mask):
    """Gradients of a loss weighting every real position of ``per_token`` [B, T] differently."""
    model.zero_grad(set_to_none=True)
    # A mean over positions, as the learner's losses are: gradients of order 1.
    ((per_token * _row_weights(per_token.shape) * mask).sum() / mask.sum()).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_policy_logprobs_and_gradients_match_the_plain_pass():
    torch.manual_seed(0)
    tokens, attention_mask, group_ids = ragged_batch()
    plan = plan_prefix_sharing(tokens, attention_mask, group_ids, min_saving=0.0)
    policy = _tiny_policy()

    def logprobs_of(logits):
        next_logprobs = torch.log_softmax(logits[:, :-1], dim=-1)
        return next_logprobs.gather(2, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)

    plain_logits = policy(input_ids=tokens, attention_mask=attention_mask.long()).logits
    shared_logits = shared_prefix_forward(causal_lm_forward(policy), tokens, plan, PAD)
    real = attention_mask[:, 1:]
    plain, shared = logprobs_of(plain_logits), logprobs_of(shared_logits)
    torch.testing.assert_close(shared[real], plain[real], atol=1e-5, rtol=0)
    assert torch.equal(
        shared_logits[~attention_mask], torch.zeros_like(shared_logits[~attention_mask])
    )

    plain_grads = _parameter_gradients(policy, plain, real)
    shared_grads = _parameter_gradients(policy, shared, real)
    assert plain_grads.keys() == shared_grads.keys() and len(plain_grads) > 0
    for name, gradient in plain_grads.items():
        assert gradient.abs().sum() > 0, name
        torch.testing.assert_close(shared_grads[name], gradient, atol=1e-5, rtol=1e-4, msg=name)


def test_critic_values_and_gradients_match_the_plain_pass():
    torch.manual_seed(0)
    tokens, attention_mask, group_ids = ragged_batch()
    plan = plan_prefix_sharing(tokens, attention_mask, group_ids, min_saving=0.0)
    critic = ValueModel.from_policy(_tiny_policy(), freeze_attention=True)
    torch.nn.init.normal_(critic.value_head.weight, std=0.5)  # zero-initialised: make it count

    plain = critic(tokens, attention_mask)
    shared = shared_prefix_forward(value_model_forward(critic), tokens, plan, PAD)
    torch.testing.assert_close(shared[attention_mask], plain[attention_mask], atol=1e-5, rtol=0)

    plain_grads = _parameter_gradients(critic, plain, attention_mask)
    shared_grads = _parameter_gradients(critic, shared, attention_mask)
    assert plain_grads.keys() == shared_grads.keys()
    assert not any("self_attn" in name for name in plain_grads)  # frozen attention stays frozen
    for name, gradient in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], gradient, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("num_slots", [8, 3])
def test_rollout_prefills_a_shared_prompt_once_and_samples_the_same_episodes(num_slots):
    # Two groups of 4 (identical prompts within a group). With 3 slots, members start in
    # different steps, alone or beside members of the other group.
    config = load_config(
        None,
        [
            *TINY_MODEL,
            "rollout.max_turns=1",
            "rollout.max_action_tokens=6",
            "algorithm.name=grpo",
            "algorithm.group_size=4",
            "rollout.batch_size=8",
        ],
    )
    ctx = RunContext.build(config)
    plans = ctx.planner.next_group() + ctx.planner.next_group()

    def rollout(share):
        engine = ctx.make_engine(num_slots=num_slots)
        engine.share_prompt_prefill = share
        requests = iter([plan_to_request(config, plan) for plan in plans])
        return engine, list(engine.run(lambda: next(requests, None)))

    shared_engine, shared = rollout(True)
    plain_engine, plain = rollout(False)
    assert len(shared) == len(plain) == 8
    for with_sharing, without in zip(shared, plain):
        assert torch.equal(with_sharing.tokens, without.tokens)
        torch.testing.assert_close(
            with_sharing.behavior_logprobs, without.behavior_logprobs, atol=1e-5, rtol=0
        )
    prompt_lengths = [int((~t.action_mask).sum()) for t in plain]
    assert plain_engine.decoder.prefilled_tokens == sum(prompt_lengths)
    assert shared_engine.decoder.prefilled_tokens < plain_engine.decoder.prefilled_tokens
    if num_slots == 8:  # every member starts in the first step: one prefill per group
        first_of_each_group = {t.group_id: length for t, length in zip(plain, prompt_lengths)}
        assert shared_engine.decoder.prefilled_tokens == sum(first_of_each_group.values())
