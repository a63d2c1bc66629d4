"""A hand-written cached forward for Llama-family models, reading the model's own weights.

The Hugging Face forward of a small model on CPU spends most of a decoding step in Python:
dozens of module calls per layer, each with hooks, keyword plumbing and output dataclasses,
around ops that take microseconds. ``LeanLlamaForward`` computes the same function with plain
tensor ops: per layer one fused q/k/v projection, one rotary embedding over queries and keys
together, the cache write and attention (the cache's ``attend``), the output projection and one
fused gate/up projection. Only the last position of each row reaches the output head (the
engine needs nothing else).

Weights are the Hugging Face model's own parameter tensors, read at every call, so in-place
updates (``load_state_dict``, an optimiser step) are seen at once. The fused q/k/v and gate/up
matrices are copies: each is rebuilt when any of its source tensors changed, detected from the
tensors' version counters (bumped by every in-place write) and storage addresses (a replaced
parameter).

Supported: ``LlamaForCausalLM`` and ``Qwen2ForCausalLM`` (the same layer with biases on q/k/v),
any width, grouped-query attention, tied or untied output head, any rotary scaling the model's
own rotary module implements (it computes cos/sin here too). ``lean_forward_support`` says why
another model is not.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sao_online.models.banded_cache import BandedKVCache
from sao_online.models.slot_cache import SlotKVCache

SUPPORTED_MODEL_TYPES = ("llama", "qwen2")


def lean_forward_support(model: torch.nn.Module) -> str | None:
    """None when ``LeanLlamaForward`` can serve ``model``, otherwise the reason it cannot."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        return f"model type {model_type!r} is not one of {SUPPORTED_MODEL_TYPES}"
    if getattr(config, "hidden_act", None) != "silu":
        return f"activation {getattr(config, 'hidden_act', None)!r} is not 'silu'"
    if getattr(config, "mlp_bias", False):
        return "MLP biases are not supported"
    if getattr(config, "use_sliding_window", False):
        return "sliding-window attention is not supported"
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(inner, "rotary_emb"):
        return "the model has no .model.layers / .model.rotary_emb"
    if model.get_output_embeddings() is None:
        return "the model has no output head"
    return None


class _FusedWeight:
    """The concatenation of some parameter tensors along dim 0, rebuilt when one of them changes.

    Args:
        sources: the tensors to concatenate (None entries are skipped, e.g. missing biases).
    """

    def __init__(self, sources: list[torch.Tensor | None]) -> None:
        self.sources = [tensor for tensor in sources if tensor is not None]
        self.stamp: tuple[tuple[int, int], ...] | None = None
        self.fused: torch.Tensor | None = None
        self.rebuilds = 0

    def get(self) -> torch.Tensor | None:
        if not self.sources:
            return None
        stamp = tuple((tensor._version, tensor.data_ptr()) for tensor in self.sources)
        if stamp != self.stamp:
            with torch.no_grad():
                self.fused = torch.cat([tensor.detach() for tensor in self.sources])
            self.stamp = stamp
            self.rebuilds += 1
        return self.fused


class _LeanLayer:
    """One decoder layer's tensors (the model's own, plus fused copies)."""

    def __init__(self, layer: torch.nn.Module) -> None:
        attention, mlp = layer.self_attn, layer.mlp
        self.input_norm = layer.input_layernorm
        self.post_norm = layer.post_attention_layernorm
        self.qkv_weight = _FusedWeight(
            [attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight]
        )
        self.qkv_bias = _FusedWeight(
            [attention.q_proj.bias, attention.k_proj.bias, attention.v_proj.bias]
        )
        self.output = attention.o_proj
        self.gate_up = _FusedWeight([mlp.gate_proj.weight, mlp.up_proj.weight])
        self.down = mlp.down_proj
        self.scaling = attention.scaling

    def fused(self) -> list[_FusedWeight]:
        return [self.qkv_weight, self.qkv_bias, self.gate_up]


class LeanLlamaForward:
    """The cached forward of a Llama-family causal LM over a slot cache.

    Args:
        model: a supported model (see ``lean_forward_support``).

    Raises:
        ValueError: the model is not supported (the message says why).

    Example:
        >>> lean = LeanLlamaForward(model)
        >>> cache.plan(slots, columns, lengths)              # a BandedKVCache
        >>> last_logits = lean(input_ids, columns, cache)    # [rows, vocab]
    """

    def __init__(self, model: torch.nn.Module) -> None:
        reason = lean_forward_support(model)
        if reason is not None:
            raise ValueError(f"LeanLlamaForward: {reason}")
        config = model.config
        inner = model.model
        self.model = model
        self.embedding = inner.embed_tokens
        self.rotary = inner.rotary_emb
        self.final_norm = inner.norm
        self.head = model.get_output_embeddings()
        self.layers = [_LeanLayer(layer) for layer in inner.layers[: config.num_hidden_layers]]
        self.query_heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads or config.num_attention_heads
        self.head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads
        )
        self.eps = float(config.rms_norm_eps)
        self.intermediate = config.intermediate_size

    @property
    def fused_rebuilds(self) -> int:
        """How many times a fused matrix was (re)built from its source tensors."""
        return sum(fused.rebuilds for layer in self.layers for fused in layer.fused())

    def _norm(self, hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # As Hugging Face's RMSNorm: normalise in float32, cast back, then scale.
        if hidden.dtype == torch.float32:
            return F.rms_norm(hidden, (hidden.shape[-1],), weight, self.eps)
        normed = F.rms_norm(hidden.float(), (hidden.shape[-1],), None, self.eps)
        return weight * normed.to(hidden.dtype)

    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        cache: BandedKVCache | SlotKVCache,
    ) -> torch.Tensor:
        """Next-token logits after the last token of each row; writes the chunk to ``cache``.

        Args:
            input_ids: [k, W] tokens (rows left-padded to a common width).
            positions: [k, W] position (= cache column) of each token.
            cache: the slot cache, with this forward already planned (its ``attend`` writes a
                layer's keys and values and returns the attention output with its mask).

        Returns:
            [k, V] logits of each row's last token.
        """
        rows, width = input_ids.shape
        query_heads, kv_heads, head_dim = self.query_heads, self.kv_heads, self.head_dim
        hidden = F.embedding(input_ids, self.embedding.weight)
        cos, sin = self.rotary(hidden, position_ids=positions)
        # [k, W, 1, D]: one rotation for the query and key heads stacked on dim 2.
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
        half = head_dim // 2
        rotated_heads = query_heads + kv_heads
        for index, layer in enumerate(self.layers):
            normed = self._norm(hidden, layer.input_norm.weight)
            qkv = F.linear(normed, layer.qkv_weight.get(), layer.qkv_bias.get())
            qkv = qkv.view(rows, width, rotated_heads + kv_heads, head_dim)
            query_key, values = qkv[:, :, :rotated_heads], qkv[:, :, rotated_heads:]
            first, second = query_key[..., :half], query_key[..., half:]
            query_key = query_key * cos + torch.cat((-second, first), dim=-1) * sin
            queries = query_key[:, :, :query_heads].transpose(1, 2)
            keys = query_key[:, :, query_heads:].transpose(1, 2)
            attended = cache.attend(
                index, queries, keys, values.transpose(1, 2), scaling=layer.scaling
            )
            hidden = hidden + F.linear(
                attended.view(rows, width, query_heads * head_dim),
                layer.output.weight,
                layer.output.bias,
            )
            normed = self._norm(hidden, layer.post_norm.weight)
            gate, up = F.linear(normed, layer.gate_up.get()).split(self.intermediate, dim=-1)
            hidden = hidden + F.linear(F.silu(gate) * up, layer.down.weight)
        last = self._norm(hidden[:, -1], self.final_norm.weight)
        return F.linear(last, self.head.weight, getattr(self.head, "bias", None))
