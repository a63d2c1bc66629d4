"""A slot key/value cache that reads, at each step, only about the columns its rows have reached.

``SlotKVCache`` keeps one buffer per layer, ``[slots, kv_heads, capacity, head_dim]``, with the
capacity set by the longest row: every decoding step reads every row up to that capacity. With
continuous batching the rows' lengths differ widely (a slot that just took a new prompt sits
beside one 250 tokens into its answer), so about half of what is read is columns no row has
reached. Reading a shorter slice of that buffer does not help: a strided batch of matrices is
much slower to multiply on the CPU than a contiguous one (measured: slower than reading it all).

Here the slots are kept in bands of rows of similar length, each band with buffers of its own
whose capacity follows the band's longest row (rounded up to ``granule`` columns). Attention
runs band by band over each band's whole, contiguous buffer, so a step reads each band only up
to its own longest row. Every ``resort_every`` decoding steps the slots are sorted by length,
longest first, and cut into bands where that saves more reads than a band's own operations cost
(``partition``; slots of one length, as in a GRPO batch decoding in lockstep, stay one band);
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

# A band's own tensor operations (about ten per layer and forward) cost about what reading this
# many row-columns of keys and values costs (tiny model, one CPU thread): a band pays for itself
# when it spares more reads than that.
BAND_OVERHEAD = 256
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
        band_overhead: what a band's own operations cost, in row-columns read (see
            ``partition``); 0 bands every distinct length apart.
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
        band_overhead: int = BAND_OVERHEAD,
        granule: int = BAND_GRANULE,
        mask_dtype: torch.dtype = torch.float32,
    ) -> None:
        if min(num_slots, num_layers, granule) <= 0 or band_overhead < 0:
            raise ValueError(
                "BandedKVCache: num_slots, num_layers and granule must be positive and "
                f"band_overhead >= 0, got {num_slots}, {num_layers}, {granule}, {band_overhead}"
            )
        self.num_slots = num_slots
        self.num_layers = num_layers
        self.band_overhead = band_overhead
        self.granule = granule
        self.mask_dtype = mask_dtype
        self.place = list(range(num_slots))  # slot -> place in the band order
        self._set_bands([num_slots], [granule])
        self.keys: list[list[torch.Tensor]] | None = None  # [layer][band]
        self.values: list[list[torch.Tensor]] | None = None
        self.resizes = 0
        self.resorts = 0
        self.columns_read = 0  # summed over layers and forwards: rows x columns attention read
        self._calls: list[_BandCall] = []
        self._order: torch.Tensor | None = None
        self._inverse: torch.Tensor | None = None
        self._column_index = torch.arange(1024)
        self._aranges: dict[int, torch.Tensor] = {}

    def _set_bands(self, sizes: list[int], capacity: list[int]) -> None:
        """Bands of ``sizes`` rows over the places in order, with their capacities."""
        self.band_sizes = sizes
        self.capacity = capacity
        self.band_start = [sum(sizes[:band]) for band in range(len(sizes))]
        self.band_of_place = [band for band, size in enumerate(sizes) for _ in range(size)]
        self.members: list[list[int]] = [[] for _ in sizes]
        for slot in sorted(range(self.num_slots), key=self.place.__getitem__):
            self.members[self.band_of_place[self.place[slot]]].append(slot)

    @property
    def num_bands(self) -> int:
        return len(self.band_sizes)

    def locate(self, slot: int) -> tuple[int, int]:
        """(band, row within the band) of ``slot``."""
        band = self.band_of_place[self.place[slot]]
        return band, self.place[slot] - self.band_start[band]

    def _rounded(self, columns: int) -> int:
        return max(self.granule, -(-columns // self.granule) * self.granule)

    # -- layout -------------------------------------------------------------------------------
    def _allocate(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        def buffers(like: torch.Tensor) -> list[list[torch.Tensor]]:
            return [
                [
                    like.new_zeros((rows, like.shape[1], capacity, like.shape[3]))
                    for rows, capacity in zip(self.band_sizes, self.capacity)
                ]
                for _ in range(self.num_layers)
            ]

        self.keys, self.values = buffers(keys), buffers(values)

    def _reserve(self, band: int, needed_columns: int) -> None:
        """Grows the band to hold ``needed_columns``, or shrinks it by more than a granule."""
        target = self._rounded(needed_columns)
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

    def partition(self, sorted_lengths: list[int]) -> list[int]:
        """Band sizes over rows sorted longest first that minimise the estimated cost.

        A band of n rows whose longest holds L columns costs n x (L + 1, rounded up to the
        granule) columns read per layer, plus ``band_overhead`` for the band's own tensor
        operations; ties go to fewer, larger bands. Rows of equal length stay in one band.
        """
        count = len(sorted_lengths)
        best = [0.0] + [float("inf")] * count
        cut = [0] * (count + 1)
        for stop in range(1, count + 1):
            for start in range(stop):
                width = self._rounded(sorted_lengths[start] + 1)
                cost = best[start] + (stop - start) * width + self.band_overhead
                if cost < best[stop]:
                    best[stop], cut[stop] = cost, start
        sizes = []
        stop = count
        while stop:
            sizes.append(stop - cut[stop])
            stop = cut[stop]
        return sizes[::-1]

    def resort(self, lengths: list[int]) -> bool:
        """Re-bands the slots by length (longest first) and moves their cached columns.

        Args:
            lengths: the columns each slot's row holds.

        Returns:
            True when the layout changed.
        """
        order = sorted(range(self.num_slots), key=lambda slot: (-lengths[slot], slot))
        sizes = self.partition([lengths[slot] for slot in order])
        place = [0] * self.num_slots
        for position, slot in enumerate(order):
            place[slot] = position
        if place == self.place and sizes == self.band_sizes:
            return False
        old_locations = [self.locate(slot) for slot in range(self.num_slots)]
        self.place = place
        self._set_bands(sizes, [1] * len(sizes))
        self.capacity = [self._rounded(max_in(lengths, members)) for members in self.members]
        self.resorts += 1
        if self.keys is None:
            return True
        for tables in (self.keys, self.values):
            for index, layer in enumerate(tables):
                like = layer[0]
                new = [
                    like.new_zeros((rows, like.shape[1], capacity, like.shape[3]))
                    for rows, capacity in zip(self.band_sizes, self.capacity)
                ]
                for slot, length in enumerate(lengths):
                    if length:
                        old_band, old_row = old_locations[slot]
                        band, row = self.locate(slot)
                        new[band][row, :, :length] = layer[old_band][old_row, :, :length]
                tables[index] = new
        return True

    def copy_rows(self, copy_of: dict[int, int], lengths: list[int]) -> None:
        """Gives each target slot (target -> source) the source's cached columns ``[0, length)``."""
        for target, source in copy_of.items():
            length = lengths[source]
            target_band, target_row = self.locate(target)
            source_band, source_row = self.locate(source)
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
        place, band_of_place, band_start = self.place, self.band_of_place, self.band_start
        order = sorted(range(len(slots)), key=lambda row: place[slots[row]])
        identity = order == list(range(len(slots)))
        if not identity:
            columns = columns[torch.tensor(order, device=device)]
        write_end = (columns.max(dim=1).values + 1).tolist()
        # The chunk's rows in band order, cut into each band's run.
        runs: list[tuple[int, int, int]] = []  # (band, start, stop)
        for position, row in enumerate(order):
            band = band_of_place[place[slots[row]]]
            if runs and runs[-1][0] == band:
                runs[-1] = (band, runs[-1][1], position + 1)
            else:
                runs.append((band, position, position + 1))
        calls: list[tuple[int, int, int, torch.Tensor | None, int]] = []
        for band, start, stop in runs:
            in_band = [
                place[slots[order[position]]] - band_start[band] for position in range(start, stop)
            ]
            # Every row of the band must survive a shrink, not only the rows in this call.
            written = max(write_end[start:stop])
            self._reserve(band, max(written, max_in(lengths, self.members[band])))
            if stop - start == self.band_sizes[band]:  # in_band is sorted: all rows, in order
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
        rows = self.band_sizes[band]
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
