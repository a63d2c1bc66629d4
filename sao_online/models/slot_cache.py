"""A key/value cache with one row per rollout slot, each row written at its own columns.

The Hugging Face ``DynamicCache`` appends the same number of columns to every row with
``torch.cat``, which copies the whole cache at every decoding step (on a small model on CPU that
copy costs more than the attention itself) and forces all rows to share one length. Here each
layer owns one buffer ``[num_slots, kv_heads, capacity, head_dim]`` and every call writes each
row's new keys and values at the columns the caller chooses.

The rollout engine keeps one invariant: a slot's current episode occupies columns
``0 .. length - 1`` of its row, in order, and column ``c`` holds the token at position ``c``. A new
episode simply starts writing at column 0 again. Columns at or past ``length`` hold leftovers
(an older episode, padding) that the engine's attention mask hides. Buffers start zeroed and
only ever receive finite keys and values, so hidden leftovers cannot turn into NaN.

Capacity is kept at the longest row rounded up to a granule (64 columns): when every slot takes
part in a call, attention reads the whole buffer, which is contiguous, instead of a strided
slice of it (a strided batch makes the CPU batched matmul several times slower). The buffer grows
and shrinks one granule at a time as the longest episode changes; each resize copies the cache
once, which amortises to a small fraction of a step.

Before each forward the caller states where this call writes with ``plan_write``; the model
then calls ``update`` once per layer, as with any Hugging Face cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, CacheLayerMixin

CAPACITY_GRANULE = 64
SLOT_ATTENTION = "sao_slot_attention"


@dataclass
class WritePlan:
    """Where the next forward writes, for every layer.

    Attributes:
        rows: [k] slot index of each batch row, or None when the batch is all slots in order.
        row_grid: [k, W] ``rows`` broadcast over the chunk (the index_put row index).
        columns: [k, W] cache column of each chunk token.
        kv_length: columns handed to attention; the full capacity when ``rows`` is None.
        mask: [k, 1, W, kv_length] additive attention mask for ``attend`` (None: not given).
    """

    rows: torch.Tensor | None
    row_grid: torch.Tensor
    columns: torch.Tensor
    kv_length: int
    mask: torch.Tensor | None = None


class SlotCacheLayer(CacheLayerMixin):
    """One layer's buffers of a ``SlotKVCache``."""

    is_sliding = False

    def __init__(self, num_slots: int) -> None:
        super().__init__()
        self.num_slots = num_slots
        self.kv_length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        raise RuntimeError("SlotCacheLayer buffers are allocated by SlotKVCache")

    def allocate(self, capacity: int, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        rows_and_heads = (self.num_slots, key_states.shape[1])
        self.keys = key_states.new_zeros((*rows_and_heads, capacity, key_states.shape[3]))
        self.values = value_states.new_zeros((*rows_and_heads, capacity, value_states.shape[3]))
        self.is_initialized = True

    def resize(self, capacity: int) -> None:
        kept = min(capacity, self.keys.shape[2])
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros((*old.shape[:2], capacity, old.shape[3]))
            new[:, :, :kept] = old[:, :, :kept]
            setattr(self, name, new)

    def write(
        self, key_states: torch.Tensor, value_states: torch.Tensor, plan: WritePlan
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Stores the chunk's keys/values at the planned columns; returns what attention reads.

        Args:
            key_states: [k, kv_heads, W, head_dim] (after rotary embedding).
            value_states: [k, kv_heads, W, head_dim].
            plan: the current ``WritePlan``.

        Returns:
            Keys and values ``[k, kv_heads, kv_length, head_dim]``: the whole buffer (no copy)
            when the batch is every slot in order, a gathered copy for a subset of slots.
        """
        # Advanced indices on dims 0 and 2 put the [k, W] index dims first: [k, W, heads, dim].
        self.keys[plan.row_grid, :, plan.columns] = key_states.transpose(1, 2)
        self.values[plan.row_grid, :, plan.columns] = value_states.transpose(1, 2)
        self.kv_length = plan.kv_length
        if plan.rows is None:
            return self.keys[:, :, : plan.kv_length], self.values[:, :, : plan.kv_length]
        return self.keys[plan.rows, :, : plan.kv_length], self.values[
            plan.rows, :, : plan.kv_length
        ]

    def update(self, key_states, value_states, *args, **kwargs):
        raise RuntimeError("SlotCacheLayer is written through SlotKVCache.update")

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.kv_length, 0

    def get_seq_length(self) -> int:
        return self.kv_length

    def get_max_length(self) -> int:
        return -1


class SlotKVCache(Cache):
    """A Hugging Face ``Cache`` whose rows are independent rollout slots.

    Args:
        num_slots: rows of the cache (the engine's number of concurrent episodes).
        num_layers: attention layers of the model.
        granule: capacity is a multiple of this many columns.

    Example:
        >>> cache = SlotKVCache(num_slots=2, num_layers=model.config.num_hidden_layers)
        >>> kv_length = cache.reserve(6)          # room for columns 0..5 in every row
        >>> cache.plan_write(rows=None, columns=torch.tensor([[0], [5]]), kv_length=kv_length)
        >>> model(input_ids, attention_mask=mask_4d, position_ids=columns, cache=cache)
    """

    def __init__(self, num_slots: int, num_layers: int, granule: int = CAPACITY_GRANULE) -> None:
        if num_slots <= 0 or num_layers <= 0 or granule <= 0:
            raise ValueError(
                "SlotKVCache: num_slots, num_layers and granule must be positive, got "
                f"{num_slots}, {num_layers}, {granule}"
            )
        super().__init__(layers=[SlotCacheLayer(num_slots) for _ in range(num_layers)])
        self.num_slots = num_slots
        self.granule = granule
        self.capacity = granule
        self.resizes = 0
        self._plan: WritePlan | None = None
        self._all_rows = torch.arange(num_slots)
        self.columns_read = 0  # summed over layers and forwards: rows x columns attention read

    def reserve(self, needed_columns: int) -> int:
        """Makes the capacity fit ``needed_columns`` (grow, or shrink by more than a granule).

        Args:
            needed_columns: the highest column any row holds or is about to write, plus one.

        Returns:
            The capacity, which is the ``kv_length`` to use when every slot takes part.
        """
        target = -(-needed_columns // self.granule) * self.granule
        if target > self.capacity or target < self.capacity - self.granule:
            if self.layers[0].is_initialized:
                for layer in self.layers:
                    layer.resize(target)
                self.resizes += 1
            self.capacity = target
        return self.capacity

    def plan_write(
        self,
        rows: torch.Tensor | None,
        columns: torch.Tensor,
        kv_length: int,
        mask: torch.Tensor | None = None,
    ) -> None:
        """Declares where the next forward writes (call ``reserve`` first).

        Args:
            rows: [k] slot indices of the batch rows, or None for all slots in order.
            columns: [k, W] cache column of every token of the chunk (below the capacity).
            kv_length: leading columns attention reads: the capacity when ``rows`` is None,
                otherwise at least max(columns) + 1.
            mask: the additive attention mask ``attend`` applies, [k, 1, W, kv_length].
        """
        if rows is None:
            if self._all_rows.device != columns.device:
                self._all_rows = self._all_rows.to(columns.device)
            row_grid = self._all_rows[:, None].expand_as(columns)
        else:
            row_grid = rows[:, None].expand_as(columns)
        self._plan = WritePlan(rows, row_grid, columns, kv_length, mask)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """Called by each attention layer: writes per the current plan (see ``plan_write``)."""
        if self._plan is None:
            raise RuntimeError("SlotKVCache.update called before plan_write")
        layer = self.layers[layer_idx]
        if not layer.is_initialized:
            layer.allocate(self.capacity, key_states, value_states)
        return layer.write(key_states, value_states, self._plan)

    def attend(
        self,
        layer_idx: int,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        scaling: float,
    ) -> torch.Tensor:
        """Writes the chunk's keys/values and returns ``slot_attention`` over what it reads
        ([k, W, q_heads, D]), with the mask given to ``plan_write``."""
        read_keys, read_values = self.update(keys, values, layer_idx)
        self.columns_read += read_keys.shape[0] * read_keys.shape[2]
        attended, _ = slot_attention(
            None, queries, read_keys, read_values, self._plan.mask, scaling=scaling
        )
        return attended

    def copy_rows(self, copy_of: dict[int, int], lengths: list[int]) -> None:
        """Gives each target slot (target -> source) the source's cached columns ``[0, length)``."""
        targets_of: dict[int, list[int]] = {}
        for target, source in copy_of.items():
            targets_of.setdefault(source, []).append(target)
        for source, targets in targets_of.items():
            length = lengths[source]
            for layer in self.layers:
                if not layer.is_initialized:
                    continue
                rows = torch.tensor(targets, device=layer.keys.device)
                layer.keys[rows, :, :length] = layer.keys[source, :, :length]
                layer.values[rows, :, :length] = layer.values[source, :, :length]


def slot_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention with an additive mask as two plain batched matmuls (no repeated key heads).

    On CPU, for the engine's shapes (one or a few queries against a contiguous cache), this is
    2-3x faster than ``scaled_dot_product_attention``. Query heads sharing a key/value head
    (grouped-query attention) are stacked along the query axis instead of repeating the keys.

    Args:
        module: the attention module (unused beyond the Hugging Face calling convention).
        query: [B, q_heads, W, D].
        key / value: [B, kv_heads, L, D].
        attention_mask: [B, 1, W, L] additive float mask (0 visible, a large negative hidden).
        scaling: score scale; ``D ** -0.5`` when None.

    Returns:
        ``([B, W, q_heads, D] output, None)`` like the Hugging Face attention functions.
    """
    if kwargs.get("softcap") is not None or kwargs.get("sliding_window") is not None:
        raise ValueError("slot_attention supports neither logit soft-capping nor sliding windows")
    output = attention_heads_first(query, key, value, attention_mask, scaling)
    return output.transpose(1, 2).contiguous(), None


def attention_heads_first(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor,
    scaling: float | None = None,
) -> torch.Tensor:
    """``slot_attention``'s arithmetic, returning [B, q_heads, W, D] (heads before positions)."""
    batch, query_heads, width, head_dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    group = query_heads // kv_heads
    if scaling is None:
        scaling = head_dim**-0.5
    grouped_query = query.reshape(batch, kv_heads, group * width, head_dim)
    scores = torch.matmul(grouped_query, key.transpose(-1, -2))
    scores = scores.view(batch, kv_heads, group, width, length)
    scores.mul_(scaling).add_(attention_mask.unsqueeze(2))
    # Softmax in float32 as Hugging Face's eager attention does, for half-precision models.
    probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    probabilities = probabilities.view(batch, kv_heads, group * width, length)
    return torch.matmul(probabilities, value).view(batch, query_heads, width, head_dim)


AttentionInterface.register(SLOT_ATTENTION, slot_attention)
