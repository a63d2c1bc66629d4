"""Episode token layout: prompts and observation segments under chat templates."""

import pytest

from sao_online.models import ChatLayout, build_byte_tokenizer

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _tokenizer(template=None):
    tokenizer = build_byte_tokenizer()
    if template is not None:
        tokenizer.chat_template = template
    return tokenizer


@pytest.mark.parametrize("template", [None, CHATML_TEMPLATE], ids=["tiny", "chatml"])
@pytest.mark.parametrize("system_prompt", [None, "Be brief."])
def test_prompt_actions_and_segments_concatenate_to_the_full_rendering(template, system_prompt):
    tokenizer = _tokenizer(template)
    layout = ChatLayout(tokenizer, system_prompt=system_prompt)
    observations = ["Task: add 2+3", "Wrong, try again", "ok"]
    actions = ["It is 6", "It is 5 ✓"]
    end = tokenizer.eos_token
    tokens = layout.prompt_tokens(observations[0])
    history = [{"role": "user", "content": observations[0]}]
    for action, observation in zip(actions, observations[1:]):
        tokens += tokenizer.encode(action, add_special_tokens=False) + [tokenizer.eos_token_id]
        history.append({"role": "assistant", "content": action})
        tokens += layout.observation_tokens(history, observation, action_end=end)
        history.append({"role": "user", "content": observation})
    full = layout.render(history, add_generation_prompt=True)
    assert tokens == tokenizer.encode(full, add_special_tokens=False)


def test_segment_text_for_the_tiny_template():
    layout = ChatLayout(_tokenizer())
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert (
        layout.observation_text(history, "obs", action_end="<|im_end|>")
        == "<|user|>obs<|im_end|><|assistant|>"
    )
    # An action cut by a length cap did not write the end-of-turn token: the segment closes it.
    assert (
        layout.observation_text(history, "obs", action_end=None)
        == "<|im_end|><|user|>obs<|im_end|><|assistant|>"
    )


def test_segment_for_chatml_keeps_the_newline_after_the_end_token():
    layout = ChatLayout(_tokenizer(CHATML_TEMPLATE))
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert layout.observation_text(history, "obs", action_end="<|im_end|>") == (
        "\n<|im_start|>user\nobs<|im_end|>\n<|im_start|>assistant\n"
    )


def test_template_that_rewrites_history_falls_back_to_the_text_after_the_action():
    # Marks only the last assistant message, so adding a user turn changes earlier text.
    rewriting = (
        "{% for message in messages %}"
        "{% if loop.last and message['role'] == 'assistant' %}{{ '[last]' }}{% endif %}"
        "{{ '<|' + message['role'] + '|>' + message['content'] + '<|im_end|>' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
    )
    layout = ChatLayout(_tokenizer(rewriting))
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert (
        layout.observation_text(history, "o", action_end="<|im_end|>")
        == "<|user|>o<|im_end|><|assistant|>"
    )


def test_bad_history_and_missing_template_raise():
    layout = ChatLayout(_tokenizer())
    with pytest.raises(ValueError, match="assistant"):
        layout.observation_text([{"role": "user", "content": "q"}], "o", action_end=None)
    tokenizer = _tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="chat_template"):
        ChatLayout(tokenizer)
