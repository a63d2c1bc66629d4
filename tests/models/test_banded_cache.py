"""The banded cache: each band reads up to its own longest row, and nothing else changes."""

import random

import gymnasium as gym
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from sao_online.models import build_tiny_policy
from sao_online.models.banded_cache import BandedKVCache
from sao_online.models.slot_decoder import SlotDecoder
from sao_online.rollout import EpisodeRequest, RolloutEngine

VOCAB = 61


def _llama(kv_heads=2):
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(config).eval()


def _reference_last_logits(model, sequence):
    with torch.no_grad():
        return model(input_ids=torch.tensor([sequence]), use_cache=False).logits[0, -1]


def test_bands_re_sort_and_every_step_keeps_the_uncached_logits():
    model = _llama()
    decoder = SlotDecoder(model, num_slots=5, pad_token_id=0, device="cpu")
    assert decoder.banded
    decoder.resort_every = 3
    # A band for every distinct length, growing 4 columns at a time: every path (grow, shrink,
    # re-sort, a chunk with part of a band) is taken.
    decoder.cache = BandedKVCache(5, 2, band_overhead=0, granule=4)
    rng = random.Random(0)
    sequences = [[rng.randrange(1, VOCAB) for _ in range(length)] for length in (3, 9, 1, 6, 2)]
    slots, logits = decoder.step(sequences)
    for row, slot in enumerate(slots):
        torch.testing.assert_close(
            logits[row], _reference_last_logits(model, sequences[slot]), atol=1e-5, rtol=1e-5
        )
    for step in range(40):
        pending = []
        for slot, sequence in enumerate(sequences):
            if step % 11 == slot * 2:  # slots restart with new prompts now and then
                decoder.restart(slot)
                sequence[:] = [rng.randrange(1, VOCAB) for _ in range(rng.randrange(2, 5))]
                pending.append(list(sequence))
            elif step % 7 == slot:  # an observation of a few tokens
                tokens = [rng.randrange(1, VOCAB) for _ in range(3)]
                sequence.extend(tokens)
                pending.append(tokens)
            elif (step + slot) % 5 == 0:  # waiting for its environment
                pending.append([])
            else:
                token = rng.randrange(1, VOCAB)
                sequence.append(token)
                pending.append([token])
        slots, logits = decoder.step(pending)
        assert slots == [s for s, p in enumerate(pending) if len(p) > 1] + [
            s for s, p in enumerate(pending) if len(p) == 1
        ]
        for row, slot in enumerate(slots):
            torch.testing.assert_close(
                logits[row], _reference_last_logits(model, sequences[slot]), atol=1e-5, rtol=1e-5
            )
    cache = decoder.cache
    assert isinstance(cache, BandedKVCache) and cache.resorts > 0 and cache.resizes > 0
    # After a re-sort each band holds rows of neighbouring lengths, longest first.
    decoder.cache.resort(decoder.lengths)
    by_place = sorted(range(5), key=lambda slot: cache.place[slot])
    assert [decoder.lengths[s] for s in by_place] == sorted(decoder.lengths, reverse=True)
    # With no cost per band, every distinct capacity (length + 1 in granules of 4) is a band.
    assert cache.num_bands == len({-(-(length + 1) // 4) for length in decoder.lengths})


def test_the_partition_bands_rows_only_where_it_spares_more_reads_than_it_costs():
    cache = BandedKVCache(8, 1, band_overhead=256, granule=32)
    # Lockstep rows (a GRPO batch): one band, as one buffer would.
    assert cache.partition([100] * 8) == [8]
    # Two clear groups: 4 x 96 + 4 x 32 + 2 x 256 = 640 columns against 8 x 256 = 2048.
    assert cache.partition([250, 250, 240, 230, 20, 10, 5, 0]) == [4, 4]
    # Splitting off one slightly shorter row saves less than a band costs.
    assert cache.partition([200, 200, 200, 150]) == [4]
    assert BandedKVCache(4, 1, band_overhead=0, granule=1).partition([9, 5, 5, 1]) == [1, 2, 1]


def test_a_copied_row_continues_like_its_source_in_another_band():
    model = _llama(kv_heads=4)
    decoder = SlotDecoder(model, num_slots=4, pad_token_id=0, device="cpu")
    decoder.cache = BandedKVCache(4, 2, band_overhead=0, granule=1)
    decoder.step([[5, 6, 7, 8, 9, 10, 11], [1, 2], [], []])
    decoder.cache.resort(decoder.lengths)  # slot 0 alone in its band, slot 3 in another
    assert decoder.cache.locate(0)[0] != decoder.cache.locate(3)[0]
    decoder.copy_rows({3: 0})  # slot 3 sits in the other band
    assert decoder.lengths[3] == 7
    _, logits = decoder.step([[12], [], [], [12]])
    torch.testing.assert_close(logits[0], logits[1], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(
        logits[1], _reference_last_logits(model, [5, 6, 7, 8, 9, 10, 11, 12]), atol=1e-5, rtol=1e-5
    )


def test_banded_cache_needs_the_lean_forward():
    with pytest.raises(ValueError, match="banded_cache=True needs the lean forward"):
        SlotDecoder(
            _llama(), 2, pad_token_id=0, device="cpu", lean_forward=False, banded_cache=True
        )


class _Answer(gym.Env[str, str]):
    """One turn, or two for even seeds (a second prompt-like observation mid-episode)."""

    metadata: dict = {}
    observation_space = gym.spaces.Text(max_length=256)
    action_space = gym.spaces.Text(max_length=4096)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turns, self.limit = 0, 1 + (seed % 2 == 0)
        return f"Task {seed}: say something.", {}

    def step(self, action):
        self.turns += 1
        return "Go on.", float(len(action) % 3), self.turns >= self.limit, False, {}


def _engine_run(model, tokenizer, banded):
    engine = RolloutEngine(
        model,
        tokenizer,
        num_slots=16,
        temperature=1.0,
        max_turns=2,
        max_action_tokens=80,
        max_episode_tokens=300,
        seed=7,
        on_action_cap="submit",
        banded_cache=banded,
    )
    requests = iter([EpisodeRequest(_Answer(), seed=k, prompt_id=k) for k in range(48)])
    with engine:
        trajectories = sorted(engine.run(lambda: next(requests, None)), key=lambda t: t.prompt_id)
    return trajectories, engine.decoder


def test_the_engine_samples_the_same_tokens_reading_fewer_columns():
    # Random weights: each answer stops at the end-of-turn token after a geometric number of
    # tokens, so slots of very different lengths decode side by side.
    model, tokenizer = build_tiny_policy(num_layers=2, hidden_size=64, seed=1)
    banded, banded_decoder = _engine_run(model, tokenizer, banded=True)
    single, single_decoder = _engine_run(model, tokenizer, banded=False)
    assert banded_decoder.banded and not single_decoder.banded
    assert banded_decoder.cache.resorts > 0
    lengths = [t.num_action_tokens for t in banded]
    assert min(lengths) < 20 and max(lengths) > 60  # the lengths really vary
    for a, b in zip(banded, single):
        assert a.tokens.tolist() == b.tokens.tolist()
        torch.testing.assert_close(a.behavior_logprobs, b.behavior_logprobs, atol=1e-5, rtol=0)
    assert banded_decoder.cache.columns_read < 0.85 * single_decoder.cache.columns_read
