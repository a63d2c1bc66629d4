"""A real-style chat model (trained BPE, ChatML template with a default system message, GQA)
through the rollout engine and the learner: cached decoding and prefix sharing equal uncached
references for every registered environment and for both observation roles."""

import gymnasium
import pytest
import torch
from chat_models import (
    CHATML_WITHOUT_TOOLS,
    build_bpe_tokenizer,
    build_chat_policy,
    reference_greedy_episode,
)

import sao_online.environments  # noqa: F401  (registers the environments)
from sao_online.learning.batching import collate
from sao_online.learning.prefix_sharing import (
    causal_lm_forward,
    plan_prefix_sharing,
    shared_prefix_forward,
    value_model_forward,
)
from sao_online.models import ChatLayout, ValueModel, token_logprobs
from sao_online.rollout import EpisodeRequest, RolloutEngine

ENV_IDS = sorted(name for name in gymnasium.registry if name.startswith("sao_online/"))
MAX_ACTION_TOKENS = 10


def _stop_ids(tokenizer):
    """The end-of-turn token plus every 9th token, so greedy actions of a random model end at
    varied lengths (some by the cap, some by a stop token)."""
    return {tokenizer.eos_token_id, *range(3, len(tokenizer), 9)}


@pytest.mark.parametrize("observation_role", ["user", "tool"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_greedy_episodes_equal_an_uncached_reference_for_every_environment(
    env_id, observation_role
):
    model, tokenizer = build_chat_policy(seed=1)
    stop_ids = _stop_ids(tokenizer)
    engine = RolloutEngine(
        model,
        tokenizer,
        num_slots=2,
        temperature=0.0,
        max_turns=3,
        max_action_tokens=MAX_ACTION_TOKENS,
        max_episode_tokens=1024,
        on_action_cap="submit",
        stop_token_ids=sorted(stop_ids),
        observation_role=observation_role,
    )
    seeds = range(4)
    requests = iter(
        [EpisodeRequest(gymnasium.make(env_id), seed=seed, prompt_id=seed) for seed in seeds]
    )
    trajectories = list(engine.run(lambda: next(requests, None)))
    assert sorted(t.prompt_id for t in trajectories) == list(seeds)
    layout = ChatLayout(tokenizer, observation_role=observation_role)
    for trajectory in trajectories:
        tokens, positions, logprobs = reference_greedy_episode(
            model,
            layout,
            gymnasium.make(env_id),
            trajectory.seed,
            stop_ids,
            max_action_tokens=MAX_ACTION_TOKENS,
            max_turns=3,
        )
        assert trajectory.tokens.tolist() == tokens
        assert torch.nonzero(trajectory.action_mask).squeeze(-1).tolist() == positions
        torch.testing.assert_close(
            trajectory.behavior_logprobs[positions], torch.tensor(logprobs), atol=1e-4, rtol=0
        )
        # The template's default system message opens every episode.
        text = tokenizer.decode(trajectory.tokens)
        assert text.startswith("<|im_start|>system\nYou are a small test assistant.<|im_end|>")
        if trajectory.num_turns > 1:
            assert f"<|im_start|>{observation_role}\n" in text


def test_sampled_behavior_logprobs_equal_teacher_forced_logprobs():
    model, tokenizer = build_chat_policy(seed=2)
    engine = RolloutEngine(
        model,
        tokenizer,
        num_slots=3,
        temperature=0.8,
        max_turns=2,
        max_action_tokens=12,
        max_episode_tokens=512,
        on_action_cap="submit",
        stop_token_ids=sorted(_stop_ids(tokenizer)),
        seed=5,
    )
    requests = iter(
        [
            EpisodeRequest(gymnasium.make("sao_online/ToolShift-v0"), seed=seed, prompt_id=seed)
            for seed in range(6)
        ]
    )
    trajectories = list(engine.run(lambda: next(requests, None)))
    assert len(trajectories) == 6 and any(t.num_turns > 1 for t in trajectories)
    for trajectory in trajectories:
        reference = token_logprobs(model, trajectory.tokens[None], temperature=0.8)[0]
        mask = trajectory.action_mask
        torch.testing.assert_close(
            trajectory.behavior_logprobs[mask], reference[mask], atol=1e-4, rtol=0
        )


def test_prefix_sharing_equals_the_plain_pass_on_grouped_episodes():
    # Groups of 3 episodes of one prompt each, sampled: members share the system message and the
    # prompt, then diverge.
    model, tokenizer = build_chat_policy(seed=3)
    engine = RolloutEngine(
        model,
        tokenizer,
        num_slots=6,
        temperature=1.0,
        max_turns=2,
        max_action_tokens=8,
        max_episode_tokens=512,
        on_action_cap="submit",
        stop_token_ids=sorted(_stop_ids(tokenizer)),
        seed=1,
    )
    requests = iter(
        [
            EpisodeRequest(
                gymnasium.make("sao_online/ToolShift-v0"),
                seed=group,
                prompt_id=group,
                group_id=group,
            )
            for group in (10, 11)
            for _ in range(3)
        ]
    )
    trajectories = list(engine.run(lambda: next(requests, None)))
    batch = collate(trajectories, tokenizer.pad_token_id)
    plan = plan_prefix_sharing(batch.tokens, batch.attention_mask, batch.group_ids, min_saving=0.0)
    assert plan is not None and plan.prefix_width > 20  # system message + prompt
    real = batch.attention_mask
    with torch.no_grad():
        plain = model(input_ids=batch.tokens, attention_mask=real.long()).logits
        shared = shared_prefix_forward(
            causal_lm_forward(model), batch.tokens, plan, tokenizer.pad_token_id
        )
        torch.testing.assert_close(shared[real], plain[real], atol=1e-4, rtol=0)
        critic = ValueModel.from_policy(model)
        torch.nn.init.normal_(critic.value_head.weight, std=0.5)
        plain_values = critic(batch.tokens, real)
        shared_values = shared_prefix_forward(
            value_model_forward(critic), batch.tokens, plan, tokenizer.pad_token_id
        )
        torch.testing.assert_close(shared_values[real], plain_values[real], atol=1e-4, rtol=0)


@pytest.mark.parametrize("observation_role", ["user", "tool"])
@pytest.mark.parametrize("system_prompt", [None, "Answer tersely."])
def test_bpe_layout_concatenates_to_the_full_rendering(observation_role, system_prompt):
    tokenizer = build_bpe_tokenizer()
    layout = ChatLayout(tokenizer, system_prompt=system_prompt, observation_role=observation_role)
    observations = ["Compute 865*673. Tool: CALL calc(<int><op><int>).", "RESULT 582145", "ok"]
    actions = ["CALL calc(865*673)", "ANSWER 582145"]
    tokens = layout.prompt_tokens(observations[0])
    history = [{"role": "user", "content": observations[0]}]
    for action, observation in zip(actions, observations[1:]):
        tokens += tokenizer.encode(action, add_special_tokens=False) + [tokenizer.eos_token_id]
        history.append({"role": "assistant", "content": action})
        tokens += layout.observation_tokens(history, observation, action_end=tokenizer.eos_token)
        history.append(layout.observation_message(observation))
    full = layout.render(history, add_generation_prompt=True)
    assert tokens == tokenizer.encode(full, add_special_tokens=False)
    assert f"<|im_start|>{observation_role}\nRESULT 582145<|im_end|>" in full
    assert ("Answer tersely." in full) == (system_prompt is not None)
    assert ("small test assistant" in full) == (system_prompt is None)


def test_a_template_without_tool_turns_refuses_the_tool_role():
    tokenizer = build_bpe_tokenizer(template=CHATML_WITHOUT_TOOLS)
    ChatLayout(tokenizer, observation_role="user")
    with pytest.raises(ValueError, match="cannot render a 'tool' message"):
        ChatLayout(tokenizer, observation_role="tool")
    with pytest.raises(ValueError, match="observation_role must be one of"):
        ChatLayout(tokenizer, observation_role="environment")


def test_turns_end_at_the_generation_configs_end_tokens_too():
    model, tokenizer = build_chat_policy(seed=1)
    end_of_text = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert RolloutEngine(model, tokenizer).stop_token_ids == {tokenizer.eos_token_id}
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, end_of_text]
    engine = RolloutEngine(model, tokenizer)
    assert engine.stop_token_ids == {tokenizer.eos_token_id, end_of_text}
