"""Prefill a prompt once when several slots start it in the same decoding step (GRPO groups)."""

from __future__ import annotations

import torch

from sao_online.models.slot_decoder import SlotDecoder


def step_sharing_prompts(
    decoder: SlotDecoder, pending: list[list[int]]
) -> tuple[list[int], torch.Tensor]:
    """``decoder.step(pending)`` with each distinct new prompt prefilled once.

    Slots starting the same prompt (from an empty cache row) are identical up to their first
    sample: the first of them is fed, the others get a copy of its cache row and of its logits.
    The result lists slots and logits rows in the order ``decoder.step`` would have (prefilled
    slots, then decoded ones, each in slot order), so the sampler draws the same random numbers
    for the same slots.

    Args:
        decoder: the engine's slot decoder.
        pending: per slot, the tokens it must feed before its next sample ([] when idle).

    Returns:
        ``(slots, logits)``: the slots sampled, in order, and one logits row each.
    """
    first_with_prompt: dict[tuple[int, ...], int] = {}
    copy_of: dict[int, int] = {}
    for slot, tokens in enumerate(pending):
        if len(tokens) > 1 and decoder.lengths[slot] == 0:
            source = first_with_prompt.setdefault(tuple(tokens), slot)
            if source != slot:
                copy_of[slot] = source
    if not copy_of:
        return decoder.step(pending)
    fed = [[] if slot in copy_of else tokens for slot, tokens in enumerate(pending)]
    fed_slots, fed_logits = decoder.step(fed)
    decoder.copy_rows(copy_of)
    row_of = {slot: row for row, slot in enumerate(fed_slots)}
    prefilled = [slot for slot, tokens in enumerate(pending) if len(tokens) > 1]
    decoded = [slot for slot, tokens in enumerate(pending) if len(tokens) == 1]
    order = prefilled + decoded
    rows = [row_of[copy_of.get(slot, slot)] for slot in order]
    return order, fed_logits[torch.tensor(rows, device=fed_logits.device)]
