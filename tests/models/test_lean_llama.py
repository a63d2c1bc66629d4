"""The lean Llama-family forward: the same logits as the Hugging Face forward, weights seen live."""

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from sao_online.models.lean_llama import LeanLlamaForward, lean_forward_support
from sao_online.models.slot_decoder import SlotDecoder

VOCAB = 97


def _llama(kv_heads=4, tie=True, bias=False, seed=0):
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=tie,
        attention_bias=bias,
        rms_norm_eps=1e-5,
        rope_theta=500.0,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()
        # Random (not unit) norm weights, so a norm applied in the wrong place shows.
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "norm" in name:
                    parameter.uniform_(0.5, 1.5)
    return model


def _qwen2():
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        model = Qwen2ForCausalLM(config).eval()
        with torch.no_grad():  # Qwen2 has q/k/v biases; make them nonzero
            for layer in model.model.layers:
                for projection in (
                    layer.self_attn.q_proj,
                    layer.self_attn.k_proj,
                    layer.self_attn.v_proj,
                ):
                    projection.bias.normal_()
    return model


def _reference_last_logits(model, sequence):
    """The Hugging Face forward over one whole sequence alone, uncached."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([sequence]), use_cache=False).logits[0, -1]


def _drive(decoder, model, sequences, decode_steps, generator):
    """Prefill every sequence in one left-padded chunk, then decode; check each step's logits."""
    slots, logits = decoder.step(sequences)
    assert slots == list(range(len(sequences)))
    for slot in slots:
        torch.testing.assert_close(
            logits[slot], _reference_last_logits(model, sequences[slot]), atol=1e-5, rtol=1e-5
        )
    for _ in range(decode_steps):
        fed = [[int(torch.randint(VOCAB, (1,), generator=generator))] for _ in sequences]
        for sequence, tokens in zip(sequences, fed):
            sequence.extend(tokens)
        slots, logits = decoder.step(fed)
        for row, slot in enumerate(slots):
            torch.testing.assert_close(
                logits[row], _reference_last_logits(model, sequences[slot]), atol=1e-5, rtol=1e-5
            )


@pytest.mark.parametrize(
    "build",
    [lambda: _llama(), lambda: _llama(kv_heads=2, tie=False, bias=True), _qwen2],
    ids=["llama_mha_tied", "llama_gqa_untied_bias", "qwen2_gqa"],
)
def test_prefill_and_decode_logits_equal_the_huggingface_forward(build):
    model = build()
    decoder = SlotDecoder(model, num_slots=3, pad_token_id=0, device="cpu", lean_forward=True)
    assert decoder.lean is not None
    generator = torch.Generator().manual_seed(0)
    # Lengths 7, 2 and 5: the shorter prompts are left-padded in the prefill chunk.
    sequences = [[3, 14, 15, 92, 65, 35, 89], [79, 32], [38, 46, 26, 43, 38]]
    _drive(decoder, model, sequences, decode_steps=4, generator=generator)
    # A slot restarted with a new prompt while the others decode (a chunk of one row, then a
    # decode of a subset once the others are idle).
    decoder.restart(1)
    sequences[1] = [5, 6, 7]
    slots, logits = decoder.step([[], sequences[1], []])
    torch.testing.assert_close(
        logits[0], _reference_last_logits(model, sequences[1]), atol=1e-5, rtol=1e-5
    )
    sequences[1].append(11)
    slots, logits = decoder.step([[], [11], []])
    assert slots == [1]
    torch.testing.assert_close(
        logits[0], _reference_last_logits(model, sequences[1]), atol=1e-5, rtol=1e-5
    )


def test_in_place_weight_updates_are_seen_and_rebuild_only_the_changed_fused_matrix():
    model = _llama(kv_heads=2)
    lean = SlotDecoder(model, num_slots=2, pad_token_id=0, device="cpu", lean_forward=True)
    plain = SlotDecoder(model, num_slots=2, pad_token_id=0, device="cpu", lean_forward=False)
    assert plain.lean is None
    prompts = [[1, 2, 3, 4], [9, 8]]
    torch.testing.assert_close(lean.step(prompts)[1], plain.step(prompts)[1])
    built = lean.lean.fused_rebuilds
    assert built == 2 * 2  # q/k/v and gate/up of two layers (no biases here)
    torch.testing.assert_close(lean.step([[5], [6]])[1], plain.step([[5], [6]])[1])
    assert lean.lean.fused_rebuilds == built  # nothing changed: nothing rebuilt

    with torch.no_grad():  # an optimiser-like in-place step on one projection
        model.model.layers[1].self_attn.k_proj.weight.add_(0.5)
    assert lean.lean.fused_rebuilds == built
    torch.testing.assert_close(lean.step([[7], [7]])[1], plain.step([[7], [7]])[1])
    assert lean.lean.fused_rebuilds == built + 1

    # A whole new set of weights copied in (what a rollout worker does on publish).
    model.load_state_dict(_llama(kv_heads=2, seed=3).state_dict())
    torch.testing.assert_close(lean.step([[4], [2]])[1], plain.step([[4], [2]])[1])
    assert lean.lean.fused_rebuilds == built + 1 + 4
    lean.restart(0)
    _, logits = lean.step([[10, 20, 30], []])
    torch.testing.assert_close(
        logits[0], _reference_last_logits(model, [10, 20, 30]), atol=1e-5, rtol=1e-5
    )


def test_unsupported_architectures_fall_back_or_are_refused_with_the_reason():
    config = GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, n_positions=64, attn_implementation="sdpa"
    )
    gpt2 = GPT2LMHeadModel(config).eval()
    assert "gpt2" in lean_forward_support(gpt2)
    with pytest.raises(ValueError, match="model type 'gpt2'"):
        LeanLlamaForward(gpt2)
    llama = _llama()
    assert lean_forward_support(llama) is None
    # Chosen by default where supported; never with the model's own attention.
    assert SlotDecoder(llama, 1, pad_token_id=0, device="cpu").lean is not None
    assert SlotDecoder(llama, 1, pad_token_id=0, device="cpu", fast_attention=False).lean is None
    llama.config.hidden_act = "gelu"
    with pytest.raises(ValueError, match="lean_forward=True but activation 'gelu'"):
        SlotDecoder(llama, 1, pad_token_id=0, device="cpu", lean_forward=True)
