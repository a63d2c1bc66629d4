"""Policies, tokenizer, critic and the model-side pieces of the rollout engine."""

from sao_online.models.chat import ChatLayout
from sao_online.models.converted import cache_root
from sao_online.models.critic import ValueModel
from sao_online.models.logprobs import TokenLogprobs, position_ids_from_mask, token_logprobs
from sao_online.models.policy import TINY_POLICY_NAME, build_tiny_policy, load_policy
from sao_online.models.sampling import sample_tokens
from sao_online.models.slot_cache import SlotKVCache
from sao_online.models.slot_decoder import SlotDecoder
from sao_online.models.sources import (
    PACKAGED_MODELS,
    ModelNotFoundError,
    resolve_device,
    resolve_dtype,
    resolve_model_source,
)
from sao_online.models.tokenizer import CHAT_TEMPLATE, build_byte_tokenizer

__all__ = [
    "CHAT_TEMPLATE",
    "PACKAGED_MODELS",
    "TINY_POLICY_NAME",
    "ChatLayout",
    "ModelNotFoundError",
    "SlotDecoder",
    "SlotKVCache",
    "TokenLogprobs",
    "ValueModel",
    "build_byte_tokenizer",
    "build_tiny_policy",
    "cache_root",
    "load_policy",
    "position_ids_from_mask",
    "resolve_device",
    "resolve_dtype",
    "resolve_model_source",
    "sample_tokens",
    "token_logprobs",
]
