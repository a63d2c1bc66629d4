"""A tiny stand-in for a real pretrained chat model, built in code (no downloads).

Unlike the embedded byte-level policy, its tokenizer is a trained byte-level BPE (merges, so
token boundaries depend on context, as in real tokenizers), its chat template is ChatML with a
default system message written when none is given (SmolLM2's layout), and the model uses
grouped-query attention with more query heads than key/value heads (SmolLM2: 9 and 3).
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

END_OF_TEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"

# The SmolLM2-Instruct layout: any role is rendered, and a default system message comes first.
CHATML_WITH_DEFAULT_SYSTEM = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a small test assistant.<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# A template that knows only system, user and assistant turns (refuses tool messages).
CHATML_WITHOUT_TOOLS = (
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown role ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS = [
    "Write one line in the requested style about the sea, the moon or a cat.",
    "The tool answered: the result is 42. Call the calculator with the arguments.",
    "Observation: you are at row 2, column 3. The goal is north east of you.",
    "def solve(values): return sorted(values)  # unit tests passed: 3 of 3",
    "Classical, cute and dramatic styles; the judge rewards one of them.",
    'user assistant system tool: {"name": "calc", "arguments": {"x": 1}}',
]


def build_bpe_tokenizer(vocab_size: int = 420, template: str = CHATML_WITH_DEFAULT_SYSTEM):
    """A byte-level BPE trained on a fixed corpus (deterministic) with ChatML special tokens."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_CORPUS * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=IM_START,
        eos_token=IM_END,
        pad_token=IM_END,
        unk_token=END_OF_TEXT,
        chat_template=template,
        model_max_length=2048,
    )


def build_chat_policy(
    seed: int = 0,
    spread: float = 0.2,
    template: str = CHATML_WITH_DEFAULT_SYSTEM,
    dtype: torch.dtype = torch.float32,
):
    """(model, tokenizer): a 2-layer Llama with 6 query and 2 key/value heads over the BPE.

    Weights are drawn with std ``spread`` so greedy choices are clear-cut and actions end at
    varied lengths.
    """
    tokenizer = build_bpe_tokenizer(template=template)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() > 1:
                    parameter.normal_(0.0, spread)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.to(dtype).eval(), tokenizer


def reference_greedy_episode(model, layout, env, seed, stop_ids, *, max_action_tokens, max_turns):
    """One greedy episode, unbatched and uncached: a full forward over all tokens per token.

    Mirrors the rollout engine's rules (``on_action_cap="submit"``): an action ends at a stop
    token or at ``max_action_tokens``; the episode ends when the env ends it or after
    ``max_turns`` actions.

    Returns:
        ``(tokens, action_positions, action_logprobs)``.
    """
    tokenizer = layout.tokenizer
    observation, _ = env.reset(seed=seed)
    tokens = layout.prompt_tokens(observation)
    history = [{"role": "user", "content": observation}]
    positions, logprobs = [], []
    for turn in range(1, max_turns + 1):
        action = []
        while True:
            with torch.no_grad():
                # Every token through every layer, without a cache; only the last position's
                # logits are computed (the head is per position: the others are never read).
                logits = model(torch.tensor([tokens]), logits_to_keep=1).logits[0, -1].float()
            token = int(logits.argmax())
            logprobs.append(float(torch.log_softmax(logits, dim=-1)[token]))
            positions.append(len(tokens))
            tokens.append(token)
            action.append(token)
            if token in stop_ids or len(action) == max_action_tokens:
                break
        stopped = action[-1] in stop_ids
        text = tokenizer.decode(action[:-1] if stopped else action, skip_special_tokens=True)
        observation, _, terminated, truncated, _ = env.step(text)
        if terminated or truncated or turn == max_turns:
            break
        history.append({"role": "assistant", "content": text})
        end = tokenizer.decode([action[-1]]) if stopped else None
        tokens += layout.observation_tokens(history, observation, end)
        history.append(layout.observation_message(observation))
    return tokens, positions, logprobs
