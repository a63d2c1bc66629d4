"""A slot key/value cache that reads, at each step, only about the columns its rows have reached.

``SlotKVCache`` keeps one buffer per layer, ``[slots, kv_heads, capacity, head_dim]``, with the
capacity set by the longest row: every decoding step reads every row up to that capacity. With
continuous batching the rows' lengths differ widely (a slot that just took a new prompt sits
beside one 250 tokens into its answer), so about half of what is read is columns no row has
reached. Reading a shorter slice of that buffer does not help: a strided batch of matrices is
much slower to multiply on the CPU than a contiguous one (measured: slower than reading it all).

Here the slots are kept in bands of ``band_size`` rows, each band with buffers of its own whose
capacity follows the band's longest row (rounded up to ``granule`` columns). Attention runs band
by band over each band's whole, contiguous buffer, so a step reads each band only up to its own
longest row. Which slot sits in which band is re-decided every ``resort_every`` decoding steps
(``resort``): slots sorted by length, longest first, so rows of similar length share a band, and
each moved slot's cached columns are copied to its new place. Between re-sorts a slot keeps its
place (a new episode starts in the place its slot had).

The decoder states each forward's rows and columns with ``plan``; the model then calls
``attend`` once per layer, which writes the chunk's keys and values and returns the attention
output, as ``SlotKVCache.attend`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sao_online.models.slot_cache import attention_heads_first

BAND_SIZE = 16
BAND_GRANULE = 32
RESORT_EVERY = 32


@dataclass
class _BandCall:
    """One band's part of a forward: its rows among the chunk's, where they go, what they read."""

    band: int
    start: int  # this band's rows are [start, stop) of the chunk in band order
    stop: int
    rows: torch.Tensor | None  # [n] row of each within the band; None: all of them, in order
    row_grid: torch.Tensor  # [n, W] rows broadcast over the chunk (the write's row index)
    columns: torch.Tensor  # [n, W] cache column of each chunk token
    length: int  # columns read
    mask: torch.Tensor  # [n, 1, W, length] additive attention mask


class BandedKVCache:
    """Key/value buffers for ``num_slots`` slots in bands of similar length.

    Args:
        num_slots: rows of the cache (the engine's concurrent episodes).
        num_layers: attention layers of the model.
        band_size: slots per band.
        granule: a band's capacity is a multiple of this many columns.
        mask_dtype: dtype of the additive attention masks (the model's).

    Example:
        >>> cache = BandedKVCache(num_slots=64, num_layers=4)
        >>> cache.plan(slots, columns, lengths)   # before each forward
        >>> attended = cache.attend(layer, queries, keys, values, scaling)   # per layer
    """

    def __init__(
        self,
        num_slots: int,
        num_layers: int,
        band_size: int = BAND_SIZE,
        granule: int = BAND_GRANULE,
        mask_dtype: torch.dtype = torch.float32,
    ) -> None:
        if min(num_slots, num_layers, band_size, granule) <= 0:
            raise ValueError(
                "BandedKVCache: num_slots, num_layers, band_size and granule must be positive, "
                f"got {num_slots}, {num_layers}, {band_size}, {granule}"
            )
        self.num_slots = num_slots
        self.num_layers = num_layers
        self.band_size = band_size
        self.granule = granule
        self.mask_dtype = mask_dtype
        self.num_bands = -(-num_slots // band_size)
        # Place p of the band order is row p % band_size of band p // band_size.
        self.place = list(range(num_slots))  # slot -> place
        self.members = [self._band_slots(band) for band in range(self.num_bands)]
        self.capacity = [granule] * self.num_bands
        self.keys: list[list[torch.Tensor]] | None = None  # [layer][band]
        self.values: list[list[torch.Tensor]] | None = None
        self.resizes = 0
        self.resorts = 0
        self.columns_read = 0  # per layer, summed over forwards: rows x columns attention read
        self._calls: list[_BandCall] = []
        self._order: torch.Tensor | None = None
        self._inverse: torch.Tensor | None = None
        self._column_index = torch.arange(1024)
        self._aranges: dict[int, torch.Tensor] = {}

    def band_rows(self, band: int) -> int:
        return min(self.band_size, self.num_slots - band * self.band_size)

    # -- layout -------------------------------------------------------------------------------
    def _allocate(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        def buffers(like: torch.Tensor) -> list[list[torch.Tensor]]:
            return [
                [
                    like.new_zeros((self.band_rows(band), like.shape[1], capacity, like.shape[3]))
                    for band, capacity in enumerate(self.capacity)
                ]
                for _ in range(self.num_layers)
            ]

        self.keys, self.values = buffers(keys), buffers(values)

    def _reserve(self, band: int, needed_columns: int) -> None:
        """Grows the band to hold ``needed_columns``, or shrinks it by more than a granule."""
        target = max(self.granule, -(-needed_columns // self.granule) * self.granule)
        current = self.capacity[band]
        if current - self.granule <= target <= current:
            return
        self.capacity[band] = target
        if self.keys is None:
            return
        kept = min(target, current)
        for tables in (self.keys, self.values):
            for layer in tables:
                old = layer[band]
                new = old.new_zeros((*old.shape[:2], target, old.shape[3]))
                new[:, :, :kept] = old[:, :, :kept]
                layer[band] = new
        self.resizes += 1

    def resort(self, lengths: list[int]) -> bool:
        """Re-bands the slots by length (longest first) and moves their cached columns.

        Args:
            lengths: the columns each slot's row holds.

        Returns:
            True when any slot moved.
        """
        order = sorted(range(self.num_slots), key=lambda slot: (-lengths[slot], slot))
        place = [0] * self.num_slots
        for position, slot in enumerate(order):
            place[slot] = position
        if place == self.place:
            return False
        old_place = self.place
        self.place = place
        self.members = [self._band_slots(band) for band in range(self.num_bands)]
        capacity = [
            max(self.granule, -(-max_in(lengths, members) // self.granule) * self.granule)
            for members in self.members
        ]
        self.capacity = capacity
        self.resorts += 1
        if self.keys is None:
            return True
        for tables in (self.keys, self.values):
            for index, layer in enumerate(tables):
                new = [
                    old.new_zeros(
                        (self.band_rows(band), old.shape[1], capacity[band], old.shape[3])
                    )
                    for band, old in enumerate(layer)
                ]
                for slot, length in enumerate(lengths):
                    if length:
                        source = layer[old_place[slot] // self.band_size]
                        target = new[place[slot] // self.band_size]
                        target[place[slot] % self.band_size, :, :length] = source[
                            old_place[slot] % self.band_size, :, :length
                        ]
                tables[index] = new
        return True

    def _band_slots(self, band: int) -> list[int]:
        first = band * self.band_size
        return [
            slot for slot, place in enumerate(self.place) if first <= place < first + self.band_size
        ]

    def copy_rows(self, copy_of: dict[int, int], lengths: list[int]) -> None:
        """Gives each target slot (target -> source) the source's cached columns ``[0, length)``."""
        for target, source in copy_of.items():
            length = lengths[source]
            target_band, target_row = divmod(self.place[target], self.band_size)
            source_band, source_row = divmod(self.place[source], self.band_size)
            self._reserve(target_band, max(length, max_in(lengths, self.members[target_band])))
            if self.keys is None:
                continue
            for tables in (self.keys, self.values):
                for layer in tables:
                    layer[target_band][target_row, :, :length] = layer[source_band][
                        source_row, :, :length
                    ]

    # -- one forward ---------------------------------------------------------------------------
    def plan(self, slots: list[int], columns: torch.Tensor, lengths: list[int]) -> None:
        """Declares the next forward: chunk row i is slot ``slots[i]``, its tokens at
        ``columns[i]``.

        Args:
            slots: the slot of each chunk row.
            columns: [k, W] cache column of every token of the chunk.
            lengths: the columns each slot's row holds before this forward.
        """
        device = columns.device
        place, band_size = self.place, self.band_size
        order = sorted(range(len(slots)), key=lambda row: place[slots[row]])
        identity = order == list(range(len(slots)))
        if not identity:
            columns = columns[torch.tensor(order, device=device)]
        write_end = (columns.max(dim=1).values + 1).tolist()
        # The chunk's rows in band order, cut into each band's run.
        runs: list[tuple[int, int, int]] = []  # (band, start, stop)
        for position, row in enumerate(order):
            band = place[slots[row]] // band_size
            if runs and runs[-1][0] == band:
                runs[-1] = (band, runs[-1][1], position + 1)
            else:
                runs.append((band, position, position + 1))
        calls: list[tuple[int, int, int, torch.Tensor | None, int]] = []
        for band, start, stop in runs:
            in_band = [place[slots[order[position]]] % band_size for position in range(start, stop)]
            # Every row of the band must survive a shrink, not only the rows in this call.
            written = max(write_end[start:stop])
            self._reserve(band, max(written, max_in(lengths, self.members[band])))
            if stop - start == self.band_rows(band):  # in_band is sorted: all rows, in order
                rows, length = None, self.capacity[band]
            else:
                rows, length = torch.tensor(in_band, device=device), written
            calls.append((band, start, stop, rows, length))
        # One mask for the chunk, as wide as the widest band read; each band reads a slice.
        widest = max(call[4] for call in calls)
        if widest > self._column_index.numel():
            self._column_index = torch.arange(2 * widest)
        if self._column_index.device != device:
            self._column_index = self._column_index.to(device)
        visible = self._column_index[:widest] <= columns.unsqueeze(-1)
        hidden = torch.finfo(self.mask_dtype).min
        mask = torch.where(visible, 0.0, hidden).to(self.mask_dtype).unsqueeze(1)
        self._calls = []
        for band, start, stop, rows, length in calls:
            grid_rows = self._band_arange(band, device) if rows is None else rows
            band_columns = columns[start:stop]
            self._calls.append(
                _BandCall(
                    band=band,
                    start=start,
                    stop=stop,
                    rows=rows,
                    row_grid=grid_rows[:, None].expand_as(band_columns),
                    columns=band_columns,
                    length=length,
                    mask=mask[start:stop, :, :, :length],
                )
            )
        self._order = None if identity else torch.tensor(order, device=device)
        self._inverse = None
        if not identity:
            inverse = [0] * len(order)
            for position, row in enumerate(order):
                inverse[row] = position
            self._inverse = torch.tensor(inverse, device=device)

    def _band_arange(self, band: int, device: torch.device) -> torch.Tensor:
        rows = self.band_rows(band)
        cached = self._aranges.get(rows)
        if cached is None or cached.device != device:
            cached = self._aranges[rows] = torch.arange(rows, device=device)
        return cached

    def attend(
        self,
        layer: int,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        scaling: float,
    ) -> torch.Tensor:
        """Writes the chunk's keys/values for ``layer`` and returns its attention output.

        Args:
            layer: the layer's index.
            queries: [k, q_heads, W, D].
            keys / values: [k, kv_heads, W, D] (keys after the rotary embedding).
            scaling: the attention score scale.

        Returns:
            [k, W, q_heads, D], rows in the chunk's order.
        """
        if self.keys is None:
            self._allocate(keys, values)
        if self._order is not None:
            queries, keys, values = (
                tensor.index_select(0, self._order) for tensor in (queries, keys, values)
            )
        outputs = []
        for call in self._calls:
            band_keys, band_values = self.keys[layer][call.band], self.values[layer][call.band]
            span = slice(call.start, call.stop)
            # Advanced indices on dims 0 and 2 put the [n, W] index dims first.
            band_keys[call.row_grid, :, call.columns] = keys[span].transpose(1, 2)
            band_values[call.row_grid, :, call.columns] = values[span].transpose(1, 2)
            if call.rows is None:  # the whole band, contiguous, read in place
                read_keys, read_values = band_keys, band_values
            else:
                read_keys = band_keys[call.rows, :, : call.length]
                read_values = band_values[call.rows, :, : call.length]
            self.columns_read += (call.stop - call.start) * call.length
            outputs.append(
                attention_heads_first(queries[span], read_keys, read_values, call.mask, scaling)
            )
        attended = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
        if self._inverse is not None:
            attended = attended.index_select(0, self._inverse)
        return attended.transpose(1, 2).contiguous()


def max_in(lengths: list[int], slots: list[int]) -> int:
    """The longest of ``slots``' lengths (0 for none)."""
    return max((lengths[slot] for slot in slots), default=0)
