"""Cached forwards for many independent token sequences ("slots") through one model.

``SlotDecoder`` is the model side of the rollout engine. Each slot is one sequence (one episode)
that grows by whatever tokens the caller feeds it; a slot can be restarted at any time. One call
of ``step`` feeds every slot its pending tokens and returns the next-token logits of each:

- slots with one pending token (decoding) go through one batched forward over all slots, reading
  the ``SlotKVCache`` in place (a slot with nothing to decode feeds a pad token into its first
  free column, which its next real token overwrites or nothing ever sees);
- slots with several pending tokens (a new prompt, an observation) go through one more forward
  as a left-padded chunk holding only those slots.

For Llama-family models (``lean_forward_support``) both forwards run ``LeanLlamaForward``, a
hand-written forward over the model's own weights, over a ``BandedKVCache``: slots of similar
length share a band, and each band's attention reads only up to its own longest row instead of
the longest row of all. Other architectures go through the Hugging Face forward with a
``SlotKVCache`` passed as its ``Cache``.

Column ``c`` of a slot's cache row holds its token at position ``c``; each query sees its own
row's columns up to its own. With greedy decoding the logits equal those of a full forward over
each sequence alone (the rollout tests check tokens and logprobs against such a reference).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers import PreTrainedModel

from sao_online.models.banded_cache import RESORT_EVERY, BandedKVCache
from sao_online.models.lean_llama import LeanLlamaForward, lean_forward_support
from sao_online.models.slot_cache import SLOT_ATTENTION, SlotKVCache

SUPPORTED_ATTENTION = ("sdpa", "eager")
# Below this share of slots decoding, gathering their cache rows beats running every slot.
_SUBSET_DECODE_SHARE = 1 / 3


class SlotDecoder:
    """Batched, cached forwards over ``num_slots`` independent sequences.

    Args:
        model: a Hugging Face causal LM with full (non-sliding) attention and the ``sdpa`` or
            ``eager`` attention implementation, already on ``device``.
        num_slots: number of sequences.
        pad_token_id: token fed where a slot has nothing to feed.
        device: where the inputs are built (the model's device).
        fast_attention: run attention with ``slot_attention`` (plain matmuls, 2-3x faster than
            SDPA on CPU for these shapes) during these forwards only; the model's configured
            implementation is restored after each call. False keeps the model's own.
        lean_forward: run the hand-written ``LeanLlamaForward`` instead of the model's own
            forward (same logits, a fraction of the Python overhead per step). None uses it
            when the architecture is supported (Llama, Qwen2) and ``fast_attention`` is on;
            True requires it; False always uses the Hugging Face forward.
        banded_cache: keep the cache in bands of similar length, each read only up to its
            longest row (``BandedKVCache``); needs the lean forward. None: whenever the lean
            forward runs. False: one buffer read up to the longest row of all
            (``SlotKVCache``). The logits are the same up to float rounding.

    Raises:
        ValueError: the model cannot be served (attention implementation, layer types),
            ``lean_forward=True`` for an architecture it does not support, or
            ``banded_cache=True`` without the lean forward.

    Example:
        >>> decoder = SlotDecoder(model, num_slots=2, pad_token_id=0, device="cpu")
        >>> slots, logits = decoder.step([[5, 6, 7], []])   # slot 0 reads a prompt
        >>> slots, logits = decoder.step([[42], []])         # then decodes one token
    """

    def __init__(
        self,
        model: PreTrainedModel,
        num_slots: int,
        *,
        pad_token_id: int,
        device: torch.device | str,
        fast_attention: bool = True,
        lean_forward: bool | None = None,
        banded_cache: bool | None = None,
    ) -> None:
        config = text_config(model)
        check_servable(model, config)
        unsupported = lean_forward_support(model)
        if lean_forward and unsupported is not None:
            raise ValueError(f"SlotDecoder: lean_forward=True but {unsupported}")
        if lean_forward is None:
            lean_forward = unsupported is None and fast_attention
        # The lean forward: None when the Hugging Face forward serves the model.
        self.lean = LeanLlamaForward(model) if lean_forward else None
        if banded_cache and self.lean is None:
            raise ValueError("SlotDecoder: banded_cache=True needs the lean forward")
        self.banded = self.lean is not None if banded_cache is None else banded_cache
        self.resort_every = RESORT_EVERY  # decoding steps between re-sorts of the bands
        self.model = model
        self.num_slots = num_slots
        self.pad_token_id = pad_token_id
        self.device = torch.device(device)
        self.fast_attention = fast_attention
        self.decode_forwards = 0
        self.prefill_forwards = 0
        self.prefilled_tokens = 0
        self._num_layers = config.num_hidden_layers
        self._mask_dtype = next(model.parameters()).dtype
        parameters = inspect.signature(model.forward).parameters
        self._cache_argument = "cache" if "cache" in parameters else "past_key_values"
        self._keep_last_logits = "logits_to_keep" in parameters
        self._column_index = torch.arange(1024, device=self.device)
        self.reset()

    def reset(self) -> None:
        """Empties every slot (and drops the cache buffers)."""
        if self.banded:
            self.cache: BandedKVCache | SlotKVCache = BandedKVCache(
                self.num_slots, self._num_layers, mask_dtype=self._mask_dtype
            )
        else:
            self.cache = SlotKVCache(self.num_slots, self._num_layers)
        # Columns of each slot's cache row holding its sequence (= its next position).
        self.lengths: list[int] = [0] * self.num_slots

    def restart(self, slot: int) -> None:
        """Starts ``slot`` over: its next tokens are positions 0, 1, ..."""
        self.lengths[slot] = 0

    @torch.inference_mode()
    def copy_rows(self, copy_of: dict[int, int]) -> None:
        """Gives each target slot of ``copy_of`` (target -> source) its source's cached sequence.

        Keys and values of the source's positions ``[0, length)`` are copied in every layer; the
        target then continues from the same length, as if it had been fed the same tokens.
        """
        self.cache.copy_rows(copy_of, self.lengths)
        for target, source in copy_of.items():
            self.lengths[target] = self.lengths[source]

    @torch.inference_mode()
    def step(self, pending: list[list[int]]) -> tuple[list[int], torch.Tensor]:
        """Feeds each slot its pending tokens; returns the slots fed and their next-token logits.

        Args:
            pending: per slot, the tokens to append (empty for a slot with nothing to feed).

        Returns:
            ``(slots, logits)``: the slots that were fed (prefilled ones first, then decoded
            ones, each group in slot order) and [len(slots), V] logits after each one's last
            token. Logits are inference tensors.
        """
        decode_slots: list[int] = []
        prefill_slots: list[int] = []
        for slot, tokens in enumerate(pending):
            if len(tokens) == 1:
                decode_slots.append(slot)
            elif tokens:
                prefill_slots.append(slot)
        logits_parts: list[torch.Tensor] = []
        if prefill_slots:
            logits_parts.append(self._forward_prefill(prefill_slots, pending))
        if decode_slots:
            logits_parts.append(self._forward_decode(decode_slots, pending))
        if not logits_parts:
            return [], torch.empty(0, 0, device=self.device)
        logits = logits_parts[0] if len(logits_parts) == 1 else torch.cat(logits_parts)
        return prefill_slots + decode_slots, logits

    def _forward_decode(self, decode_slots: list[int], pending: list[list[int]]) -> torch.Tensor:
        self.decode_forwards += 1
        lengths = self.lengths
        if self.banded and self.decode_forwards % self.resort_every == 0:
            self.cache.resort(lengths)
        if len(decode_slots) <= _SUBSET_DECODE_SHARE * self.num_slots:
            # Few slots decoding (e.g. the tail of a run): gather their cache rows instead of
            # running every slot through the model.
            columns = torch.tensor([[lengths[slot]] for slot in decode_slots], device=self.device)
            input_ids = torch.tensor([pending[slot] for slot in decode_slots], device=self.device)
            logits = self._call_model(input_ids, columns, decode_slots)
        else:
            feed = [tokens[0] if len(tokens) == 1 else self.pad_token_id for tokens in pending]
            columns = torch.tensor(lengths, device=self.device).unsqueeze(1)
            input_ids = torch.tensor(feed, device=self.device).unsqueeze(1)
            logits = self._call_model(input_ids, columns, None)
            logits = logits[torch.tensor(decode_slots, device=self.device)]
        for slot in decode_slots:
            lengths[slot] += 1
        return logits

    def _forward_prefill(self, prefill_slots: list[int], pending: list[list[int]]) -> torch.Tensor:
        self.prefill_forwards += 1
        counts = [len(pending[slot]) for slot in prefill_slots]
        width = max(counts)
        self.prefilled_tokens += sum(counts)
        chunk = [
            [self.pad_token_id] * (width - count) + pending[slot]
            for slot, count in zip(prefill_slots, counts)
        ]
        starts = torch.tensor([self.lengths[slot] for slot in prefill_slots], device=self.device)
        count_tensor = torch.tensor(counts, device=self.device).unsqueeze(1)
        offsets = width - count_tensor
        chunk_index = torch.arange(width, device=self.device).unsqueeze(0)
        # Real tokens (right-aligned) go to the slot's next columns in order; the padding in
        # front goes to the columns just after them, which nothing visible reads.
        relative = torch.where(
            chunk_index >= offsets, chunk_index - offsets, count_tensor + chunk_index
        )
        columns = starts.unsqueeze(1) + relative
        logits = self._call_model(torch.tensor(chunk, device=self.device), columns, prefill_slots)
        for slot, count in zip(prefill_slots, counts):
            self.lengths[slot] += count
        return logits

    def _call_model(
        self, input_ids: torch.Tensor, columns: torch.Tensor, slots: list[int] | None
    ) -> torch.Tensor:
        """One forward of a [rows, W] chunk whose token j of row i sits at cache column
        ``columns[i, j]`` (= its position); returns the logits of each row's last chunk token.

        ``slots`` names the slot of each row; None when the chunk covers every slot in order.
        """
        if self.banded:
            self.cache.plan(
                list(range(self.num_slots)) if slots is None else slots, columns, self.lengths
            )
            return self.lean(input_ids, columns, self.cache)
        write_end = int(columns.max()) + 1
        # Every slot's current sequence must survive a shrink, not only the rows in this call.
        capacity = self.cache.reserve(max(max(self.lengths), write_end))
        kv_length = capacity if slots is None else write_end
        if kv_length > self._column_index.numel():
            self._column_index = torch.arange(2 * kv_length, device=self.device)
        visible = self._column_index[:kv_length] <= columns.unsqueeze(-1)
        hidden = torch.finfo(self._mask_dtype).min
        mask = torch.where(visible, 0.0, hidden).to(self._mask_dtype).unsqueeze(1)
        rows = None if slots is None else torch.tensor(slots, device=self.device)
        self.cache.plan_write(rows, columns, kv_length, mask)
        if self.lean is not None:
            return self.lean(input_ids, columns, self.cache)
        arguments: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "position_ids": columns,
            self._cache_argument: self.cache,
            "use_cache": True,
        }
        if self._keep_last_logits:
            arguments["logits_to_keep"] = 1
        if not self.fast_attention:
            return self.model(**arguments).logits[:, -1]
        config = self.model.config
        configured = config._attn_implementation
        config._attn_implementation = SLOT_ATTENTION
        try:
            return self.model(**arguments).logits[:, -1]
        finally:
            config._attn_implementation = configured


def text_config(model: PreTrainedModel) -> Any:
    """The config describing the model's language layers."""
    config = model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def check_servable(model: PreTrainedModel, config: Any) -> None:
    """Raises ValueError when the model's attention cannot take per-slot 4D masks."""
    attention = getattr(model.config, "_attn_implementation", None)
    if attention not in SUPPORTED_ATTENTION:
        raise ValueError(
            f"attention implementation {attention!r} is not supported; call "
            "model.set_attn_implementation('sdpa') (or 'eager') first"
        )
    layer_types = getattr(config, "layer_types", None) or []
    if any(kind != "full_attention" for kind in layer_types):
        raise ValueError(
            f"only full-attention layers are supported, got {sorted(set(layer_types))}"
        )
