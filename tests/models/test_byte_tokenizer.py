"""The byte-level tokenizer: exact byte round trips, special tokens, the chat template."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from sao_online.models import CHAT_TEMPLATE, build_byte_tokenizer
from sao_online.models.tokenizer import BYTE_VOCAB_SIZE, SPECIAL_TOKENS

TOKENIZER = build_byte_tokenizer()


@settings(max_examples=200, deadline=None)
@given(st.text().filter(lambda text: "<|" not in text))
def test_any_unicode_text_encodes_to_its_utf8_bytes_and_back(text):
    # Text spelling a special token ("<|pad|>") becomes that token; see the specials test.
    ids = TOKENIZER.encode(text, add_special_tokens=False)
    assert ids == list(text.encode("utf-8"))
    assert TOKENIZER.decode(ids) == text


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=24))
def test_arbitrary_byte_ids_decode_like_python_lossy_utf8(raw):
    # The model may emit any byte sequence, including invalid UTF-8.
    assert TOKENIZER.decode(list(raw)) == raw.decode("utf-8", errors="replace")


def test_special_tokens_follow_the_bytes_and_are_single_tokens():
    assert len(TOKENIZER) == BYTE_VOCAB_SIZE == 256 + len(SPECIAL_TOKENS)
    ids = [TOKENIZER.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS]
    assert ids == list(range(256, 256 + len(SPECIAL_TOKENS)))
    assert TOKENIZER.eos_token == "<|im_end|>"
    assert TOKENIZER.encode("a<|im_end|>b", add_special_tokens=False) == [
        97,
        TOKENIZER.eos_token_id,
        98,
    ]
    assert TOKENIZER.pad_token_id != TOKENIZER.eos_token_id


def test_chat_template_renders_compact_chatml():
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "ok?"},
    ]
    rendered = TOKENIZER.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rendered == (
        "<|bos|><|system|>S<|im_end|><|user|>hi<|im_end|>"
        "<|assistant|>yo<|im_end|><|user|>ok?<|im_end|><|assistant|>"
    )
    without_prompt = TOKENIZER.apply_chat_template(messages[:2], tokenize=False)
    assert without_prompt == "<|bos|><|system|>S<|im_end|><|user|>hi<|im_end|>"
    # Headers are one token each: bos, role, 2 content bytes, end, assistant header.
    ids = TOKENIZER.encode(
        TOKENIZER.apply_chat_template(messages[1:2], add_generation_prompt=True, tokenize=False),
        add_special_tokens=False,
    )
    assert len(ids) == 6


def test_chat_template_rejects_unknown_roles():
    with pytest.raises(Exception, match="unsupported chat role: tool"):
        TOKENIZER.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_save_and_reload_keeps_vocabulary_and_template(tmp_path):
    TOKENIZER.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "héllo <|im_end|> \x00\n"
    assert reloaded.encode(text, add_special_tokens=False) == TOKENIZER.encode(
        text, add_special_tokens=False
    )
    assert reloaded.chat_template == CHAT_TEMPLATE
    assert (reloaded.eos_token, reloaded.pad_token, reloaded.bos_token) == (
        "<|im_end|>",
        "<|pad|>",
        "<|bos|>",
    )
