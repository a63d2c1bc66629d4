"""SlotKVCache capacity and writes; slot_attention against PyTorch's SDPA."""

import torch
import torch.nn.functional as F

from sao_online.models import SlotKVCache
from sao_online.models.slot_cache import slot_attention


def test_capacity_grows_and_shrinks_by_granules_and_keeps_rows():
    cache = SlotKVCache(num_slots=2, num_layers=1, granule=4)
    assert cache.reserve(3) == 4
    keys = torch.arange(2 * 1 * 3 * 2, dtype=torch.float32).view(2, 1, 3, 2)
    columns = torch.tensor([[0, 1, 2], [0, 1, 2]])
    cache.plan_write(None, columns, 4)
    returned_keys, _ = cache.update(keys, keys + 100, layer_idx=0)
    assert returned_keys.shape == (2, 1, 4, 2) and returned_keys.is_contiguous()
    assert torch.equal(returned_keys[:, :, :3], keys)
    assert cache.reserve(9) == 12  # grow to the next multiple of the granule
    assert cache.reserve(7) == 12  # within one granule: no shrink (hysteresis)
    assert cache.reserve(2) == 4  # more than a granule smaller: shrink
    assert cache.resizes == 2
    stored = cache.layers[0].keys
    assert stored.shape == (2, 1, 4, 2)
    assert torch.equal(stored[:, :, :3], keys)


def test_rows_write_at_their_own_columns_and_subsets_gather():
    cache = SlotKVCache(num_slots=3, num_layers=1, granule=8)
    cache.reserve(8)
    cache.plan_write(None, torch.tensor([[0], [0], [0]]), 8)
    cache.update(torch.zeros(3, 1, 1, 2), torch.zeros(3, 1, 1, 2), layer_idx=0)
    # Slot 2 then slot 0 write two tokens each, at different columns.
    new = torch.ones(2, 1, 2, 2)
    cache.plan_write(torch.tensor([2, 0]), torch.tensor([[5, 6], [1, 2]]), 7)
    keys, _ = cache.update(new, new, layer_idx=0)
    assert keys.shape == (2, 1, 7, 2)
    stored = cache.layers[0].keys[:, 0, :, 0]
    assert stored[2].tolist() == [0, 0, 0, 0, 0, 1, 1, 0]
    assert stored[0].tolist() == [0, 1, 1, 0, 0, 0, 0, 0]
    assert stored[1].abs().sum() == 0


def test_slot_attention_matches_sdpa_with_grouped_heads_and_a_mask():
    generator = torch.Generator().manual_seed(0)
    batch, query_heads, kv_heads, width, length, dim = 3, 6, 2, 4, 9, 8
    query = torch.randn(batch, query_heads, width, dim, generator=generator)
    key = torch.randn(batch, kv_heads, length, dim, generator=generator)
    value = torch.randn(batch, kv_heads, length, dim, generator=generator)
    visible = torch.rand(batch, 1, width, length, generator=generator) > 0.4
    visible[..., 0] = True
    additive = torch.zeros(visible.shape).masked_fill(~visible, torch.finfo(torch.float32).min)
    output, _ = slot_attention(None, query, key, value, additive, scaling=0.3)
    group = query_heads // kv_heads
    expected = F.scaled_dot_product_attention(
        query,
        key.repeat_interleave(group, dim=1),
        value.repeat_interleave(group, dim=1),
        attn_mask=visible,
        scale=0.3,
    ).transpose(1, 2)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
