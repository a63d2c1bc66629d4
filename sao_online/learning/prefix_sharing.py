"""Prompt-prefix sharing: run a group's common prefix once, then each member's own suffix.

The members of a GRPO group start from the same prompt, so the learner's plain forward pass
recomputes the same prefix activations once per member (8 times for groups of 8: about 70% of
the token positions of a batch of 32-token completions). Here the prefix of each group runs
once, with gradient, and its key/value cache is indexed out to the members; each member then
runs only its suffix, attending to the cached prefix with the positions it has in the full
sequence. The outputs are reassembled into the same ``[batch, time, ...]`` layout the plain
pass gives, so everything downstream (logprobs, entropy, KL, values) is unchanged, and the
gradient of every prefix activation is the sum of the members' gradients, as in the plain
pass: the two agree up to float rounding.

Shared prefixes are verified from the tokens, never assumed from group ids: group ids only
propose which rows to compare, and a group shares the longest prefix all its members have in
common (for multi-turn episodes that is at least the first turn's prompt). Every member keeps at
least one token of its own, so each suffix is non-empty.

The rollout engine does the same for sampling: a prompt that several slots start in one step is
prefilled once (``RolloutEngine(share_prompt_prefill=True)``).

Example:
    >>> plan = plan_prefix_sharing(batch.tokens, batch.attention_mask, batch.group_ids)
    >>> if plan is not None:
    ...     logits = shared_prefix_forward(causal_lm_forward(policy), batch.tokens, plan)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Sharing costs a second model call and the gathers that reassemble the outputs; below this
# fraction of token positions saved the plain pass is as fast.
MIN_TOKEN_SAVING = 0.2

PrefixForward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], tuple[torch.Tensor, Any]]
"""``forward(input_ids, attention_mask, position_ids, cache) -> (outputs [N, L, ...], cache)``."""


@dataclass(frozen=True)
class PrefixPlan:
    """How the rows of a right-padded batch share prefixes.

    Attributes:
        row_group: [B] int64, the prefix (group) each row reads; groups are numbered 0..G-1.
        group_representative: [G] int64, a row of each group whose tokens hold the prefix.
        prefix_lengths: [B] int64, tokens row b takes from its group's prefix (the same for
            every row of a group).
        row_lengths: [B] int64, real tokens per row.
        prefix_width: P, the longest prefix (the prefix pass is [G, P]).
        suffix_width: S, the longest suffix (the suffix pass is [B, S]).
    """

    row_group: torch.Tensor
    group_representative: torch.Tensor
    prefix_lengths: torch.Tensor
    row_lengths: torch.Tensor
    prefix_width: int
    suffix_width: int

    @property
    def num_groups(self) -> int:
        return int(self.group_representative.shape[0])

    def token_positions(self) -> int:
        """Token positions the two passes run (the plain pass runs ``B * T``)."""
        return (
            self.num_groups * self.prefix_width + int(self.row_group.shape[0]) * self.suffix_width
        )


def _common_prefix_length(tokens: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Length of the longest run of leading positions where every row has the same real token."""
    same = (tokens == tokens[:1]).all(dim=0) & attention_mask.all(dim=0)
    return int(same.long().cumprod(dim=0).sum())


def plan_prefix_sharing(
    tokens: torch.Tensor,
    attention_mask: torch.Tensor,
    group_ids: torch.Tensor,
    min_saving: float = MIN_TOKEN_SAVING,
) -> PrefixPlan | None:
    """Plans prefix sharing for a right-padded batch, or returns None when it would not pay.

    Rows with equal ``group_ids`` are candidates; their shared prefix is the longest common
    token prefix of the real tokens, capped so every row keeps at least one token of its own.
    A row alone in its group reads its own prefix (as long as the longest shared one, so its
    suffix is no longer than it must be).

    Args:
        tokens: [B, T] int64 token ids, right-padded.
        attention_mask: [B, T] bool (or 0/1), True on real tokens; each row starts with a real
            token and is contiguous.
        group_ids: [B] int64 group of each row (rows of a group usually share their prompt).
        min_saving: share only when it saves at least this fraction of the ``B * T`` positions.

    Returns:
        A :class:`PrefixPlan`, or None when no two rows share a prefix worth running once.

    Raises:
        ValueError: shapes disagree, or a row is empty or not right-padded.
    """
    if tokens.dim() != 2 or attention_mask.shape != tokens.shape:
        raise ValueError(
            f"plan_prefix_sharing: tokens {tuple(tokens.shape)} and attention_mask "
            f"{tuple(attention_mask.shape)} must both be [batch, time]"
        )
    if group_ids.shape != tokens.shape[:1]:
        raise ValueError(
            f"plan_prefix_sharing: group_ids must be [batch] = [{tokens.shape[0]}], "
            f"got {tuple(group_ids.shape)}"
        )
    real = attention_mask.bool()
    row_lengths = real.sum(dim=1)
    if not bool(row_lengths.gt(0).all()):
        raise ValueError("plan_prefix_sharing: every row needs at least one real token")
    device = tokens.device
    positions = torch.arange(tokens.shape[1], device=device)
    if not torch.equal(real, positions.unsqueeze(0) < row_lengths.unsqueeze(1)):
        raise ValueError(
            "plan_prefix_sharing: attention_mask must be right-padded "
            "(real tokens first, then padding)"
        )
    batch_size, width = tokens.shape
    distinct, row_group = torch.unique(group_ids, return_inverse=True)
    prefix_lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
    representatives = []
    singletons = []
    for group in range(len(distinct)):
        rows = (row_group == group).nonzero().squeeze(1)
        representatives.append(int(rows[0]))
        if len(rows) == 1:
            singletons.append(int(rows[0]))
            continue
        shared = _common_prefix_length(tokens[rows], real[rows])
        prefix_lengths[rows] = min(shared, int(row_lengths[rows].min()) - 1)
    prefix_width = int(prefix_lengths.max())
    if prefix_width == 0:
        return None
    for row in singletons:
        prefix_lengths[row] = min(prefix_width, int(row_lengths[row]) - 1)
    suffix_width = int((row_lengths - prefix_lengths).max())
    plan = PrefixPlan(
        row_group=row_group,
        group_representative=torch.tensor(representatives, device=device),
        prefix_lengths=prefix_lengths,
        row_lengths=row_lengths,
        prefix_width=prefix_width,
        suffix_width=suffix_width,
    )
    if plan.token_positions() > (1.0 - min_saving) * batch_size * width:
        return None
    return plan


def shared_prefix_forward(
    forward: PrefixForward, tokens: torch.Tensor, plan: PrefixPlan, pad_token_id: int = 0
) -> torch.Tensor:
    """Runs ``forward`` with shared prefixes; returns what the plain pass returns, [B, T, ...].

    Args:
        forward: a model call that accepts and returns a key/value cache (see
            :func:`causal_lm_forward` and :func:`value_model_forward`).
        tokens: [B, T] the right-padded batch the plan was made for.
        plan: from :func:`plan_prefix_sharing` on the same batch.
        pad_token_id: id placed at padding positions of the two passes (they are masked).

    Returns:
        The outputs at every real position of ``tokens``, exactly where the plain pass puts
        them; padding positions hold zeros.
    """
    batch_size, width = tokens.shape
    device = tokens.device
    positions_p = torch.arange(plan.prefix_width, device=device)
    positions_s = torch.arange(plan.suffix_width, device=device)
    group_prefix_lengths = plan.prefix_lengths[plan.group_representative]

    # Prefix pass: [G, P], each group's prompt once, positions from 0.
    prefix_mask = positions_p.unsqueeze(0) < group_prefix_lengths.unsqueeze(1)
    # A group whose members differ from their first token still gets one real position, so no
    # row of the pass is fully masked (that would put NaN into the cache its members read).
    prefix_mask[:, 0] = True
    prefix_tokens = tokens[plan.group_representative, : plan.prefix_width]
    prefix_tokens = torch.where(prefix_mask, prefix_tokens, pad_token_id)
    prefix_outputs, cache = forward(
        prefix_tokens, prefix_mask.long(), positions_p.expand(plan.num_groups, -1), None
    )
    # Every member reads its group's keys and values; indexing keeps them in the graph, so the
    # members' gradients add up on the shared prefix.
    cache.batch_select_indices(plan.row_group)

    # Suffix pass: [B, S], each row from the end of its prefix, at its true positions.
    suffix_lengths = plan.row_lengths - plan.prefix_lengths
    suffix_real = positions_s.unsqueeze(0) < suffix_lengths.unsqueeze(1)
    source_columns = (plan.prefix_lengths.unsqueeze(1) + positions_s).clamp(max=width - 1)
    suffix_tokens = torch.where(suffix_real, tokens.gather(1, source_columns), pad_token_id)
    cached_real = positions_p.unsqueeze(0) < plan.prefix_lengths.unsqueeze(1)
    suffix_attention = torch.cat([cached_real, suffix_real], dim=1)
    suffix_positions = plan.prefix_lengths.unsqueeze(1) + positions_s
    suffix_outputs, _ = forward(suffix_tokens, suffix_attention.long(), suffix_positions, cache)

    # Reassemble [B, T]: position t of row b comes from its group's prefix row (t < prefix),
    # its suffix row (t < length) or a zero row (padding), via one gather over stacked rows.
    trailing = prefix_outputs.shape[2:]
    stacked = torch.cat(
        [
            prefix_outputs.reshape(-1, *trailing),
            suffix_outputs.reshape(-1, *trailing),
            prefix_outputs.new_zeros(1, *trailing),
        ]
    )
    columns = torch.arange(width, device=device).unsqueeze(0)
    prefix_index = plan.row_group.unsqueeze(1) * plan.prefix_width + columns
    suffix_index = (
        plan.num_groups * plan.prefix_width
        + torch.arange(batch_size, device=device).unsqueeze(1) * plan.suffix_width
        + (columns - plan.prefix_lengths.unsqueeze(1))
    )
    padding_index = stacked.shape[0] - 1
    in_prefix = columns < plan.prefix_lengths.unsqueeze(1)
    in_suffix = ~in_prefix & (columns < plan.row_lengths.unsqueeze(1))
    index = torch.where(
        in_prefix, prefix_index, torch.where(in_suffix, suffix_index, padding_index)
    )
    return stacked.index_select(0, index.reshape(-1)).reshape(batch_size, width, *trailing)


def _cache_argument(model: torch.nn.Module) -> str:
    """The name a Hugging Face model's forward takes its cache by (``past_key_values`` before
    transformers 5 renamed it ``cache``)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _model_call(model: torch.nn.Module) -> Callable[..., tuple[Any, Any]]:
    """``call(input_ids, attention_mask, position_ids, cache) -> (output, cache)`` for ``model``."""
    argument = _cache_argument(model)

    def call(
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
    ) -> tuple[Any, Any]:
        output = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            **{argument: cache},
        )
        return output, getattr(output, argument)

    return call


def causal_lm_forward(model: torch.nn.Module) -> PrefixForward:
    """A :data:`PrefixForward` returning a Hugging Face causal LM's logits."""
    call = _model_call(model)

    def run(
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
    ) -> tuple[torch.Tensor, Any]:
        output, cache = call(input_ids, attention_mask, position_ids, cache)
        return output.logits, cache

    return run


def hidden_state_forward(backbone: torch.nn.Module) -> PrefixForward:
    """A :data:`PrefixForward` returning a Hugging Face base model's final hidden states."""
    call = _model_call(backbone)

    def run(
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
    ) -> tuple[torch.Tensor, Any]:
        output, cache = call(input_ids, attention_mask, position_ids, cache)
        return output.last_hidden_state, cache

    return run


def value_model_forward(critic: torch.nn.Module) -> PrefixForward:
    """A :data:`PrefixForward` returning a ``ValueModel``'s per-token values."""
    call = _model_call(critic.backbone)

    def run(
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
    ) -> tuple[torch.Tensor, Any]:
        output, cache = call(input_ids, attention_mask, position_ids, cache)
        return critic.value_head(output.last_hidden_state.float()).squeeze(-1), cache

    return run
