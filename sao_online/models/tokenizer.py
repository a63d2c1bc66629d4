"""A byte-level tokenizer with a compact ChatML-like chat template for the tiny default policy.

Token ids 0..255 are the raw bytes of the UTF-8 text (id == byte value), so any string round
trips exactly and the tokenizer needs no training. A handful of special tokens follow the bytes.
Because one byte is one token here, the chat template keeps its headers to one token each: a
message is ``<|role|>content<|im_end|>`` and the whole conversation starts with ``<|bos|>``.

Example:
    >>> tokenizer = build_byte_tokenizer()
    >>> tokenizer.apply_chat_template(
    ...     [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    '<|bos|><|user|>hi<|im_end|><|assistant|>'
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<|pad|>"
BOS_TOKEN = "<|bos|>"
END_OF_TURN_TOKEN = "<|im_end|>"
ROLE_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>"}
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, END_OF_TURN_TOKEN, *ROLE_TOKENS.values()]
NUM_BYTE_TOKENS = 256
BYTE_VOCAB_SIZE = NUM_BYTE_TOKENS + len(SPECIAL_TOKENS)

# Roles map to single tokens (bytes are tokens here, so "assistant\n" would cost 10 of them).
# Unknown roles fail loudly instead of silently rendering as plain text.
CHAT_TEMPLATE = (
    "{{ '<|bos|>' }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unsupported chat role: ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|im_end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def _byte_to_unicode() -> dict[int, str]:
    """The GPT-2 byte-level alphabet: each byte maps to one printable unicode character.

    The ``tokenizers`` ByteLevel pre-tokenizer rewrites bytes into exactly these characters, so
    the vocabulary must be keyed by them.
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\N{INVERTED EXCLAMATION MARK}"), ord("\N{NOT SIGN}") + 1),
        *range(ord("\N{REGISTERED SIGN}"), ord("\N{LATIN SMALL LETTER Y WITH DIAERESIS}") + 1),
    ]
    mapping = {byte: chr(byte) for byte in printable}
    shifted = 0
    for byte in range(NUM_BYTE_TOKENS):
        if byte not in mapping:
            mapping[byte] = chr(NUM_BYTE_TOKENS + shifted)
            shifted += 1
    return mapping


def build_byte_tokenizer() -> PreTrainedTokenizerFast:
    """Builds the byte-level tokenizer of the tiny default policy.

    Returns:
        A ``PreTrainedTokenizerFast`` with 256 byte tokens (id == byte value), the special
        tokens in ``SPECIAL_TOKENS`` (ids 256 onwards), ``eos_token`` = ``<|im_end|>`` (the end of
        a turn, which ends every action), ``pad_token`` = ``<|pad|>``, ``bos_token`` = ``<|bos|>``
        and ``chat_template`` = ``CHAT_TEMPLATE``. It saves and reloads with
        ``save_pretrained`` / ``AutoTokenizer.from_pretrained``.
    """
    vocabulary = {char: byte for byte, char in _byte_to_unicode().items()}
    backend = Tokenizer(models.BPE(vocab=vocabulary, merges=[]))
    # No regex split and no prefix space: every byte becomes exactly one token, nothing is added.
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS_TOKEN,
        eos_token=END_OF_TURN_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        model_max_length=2048,
    )
