"""Advantage estimators as pure tensor functions.

Conventions shared with :mod:`sao_online.learning.losses`: token tensors have shape
``[batch, time]``; ``action_mask`` is a bool tensor that is True exactly where the policy
sampled the token (prompt, observation and padding tokens are False). Per-episode quantities
have shape ``[batch]``.

Everything here runs without gradient: advantages and returns are targets, not graph paths.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = [
    "broadcast_to_tokens",
    "check_episode_rewards",
    "check_token_tensors",
    "compute_dtype",
    "group_advantages",
    "length_adaptive_lambda",
    "response_span_mask",
    "rloo_advantages",
    "skip_observation_gae",
    "step_level_values",
    "zero_variance_group_fraction",
]


def check_token_tensors(
    action_mask: torch.Tensor, mask_name: str = "action_mask", **tensors: torch.Tensor
) -> None:
    """Checks ``action_mask`` is bool ``[batch, time]`` and each named float tensor matches it.

    Raises TypeError (wrong dtype) or ValueError (wrong shape) naming the offending argument;
    ``mask_name`` is how the mask is called in those messages.
    """
    if not isinstance(action_mask, torch.Tensor) or action_mask.dtype != torch.bool:
        found = action_mask.dtype if isinstance(action_mask, torch.Tensor) else type(action_mask)
        raise TypeError(f"{mask_name} must be a bool tensor, got {found}")
    if action_mask.dim() != 2:
        raise ValueError(f"{mask_name} must be [batch, time], got {tuple(action_mask.shape)}")
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(tensor).__name__}")
        if tensor.shape != action_mask.shape:
            raise ValueError(
                f"{name} has shape {tuple(tensor.shape)}, {mask_name} has "
                f"{tuple(action_mask.shape)}; they must match"
            )
        if not tensor.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {tensor.dtype}")


def compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any input is float64, else float32 (bf16/fp16 are upcast for the recursion)."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


@torch.no_grad()
def skip_observation_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    action_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float | torch.Tensor = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation that runs over action tokens only.

    For an action token ``t`` whose next action token is ``t'`` (observation tokens between
    turns are skipped, so ``t'`` is the first action token of the next turn)::

        delta_t = r_t + gamma * V(t') - V(t)        (V(t') = 0 after the last action token)
        A_t     = delta_t + gamma * lam * A_{t'}
        R_t     = A_t + V(t)

    Non-action tokens (prompt, observations, padding) get advantage 0 and return 0: they carry
    no learning signal and no value target, and a zero there keeps masked sums exact.

    Args:
        rewards: ``[batch, time]``; rewards must sit on action tokens (the last action token of
            the turn that earned them).
        values: ``[batch, time]`` critic values; only action positions are read.
        action_mask: bool ``[batch, time]``.
        gamma: discount in ``[0, 1]``.
        lam: GAE lambda, a float in ``[0, 1]`` or a per-row tensor ``[batch]`` (SAO's policy
            advantages use :func:`length_adaptive_lambda`; critic targets use ``lam=1``).

    Returns:
        ``(advantages, returns)``, both ``[batch, time]`` in float32 (float64 if an input is
        float64), detached, zero on non-action tokens. With ``lam=1`` the returns are the
        discounted reward-to-go over action tokens, independent of the values.

    Raises:
        ValueError: bad shapes, ``gamma``/``lam`` outside [0, 1], reward on a non-action token.

    Example:
        >>> mask = torch.tensor([[False, True, True, False, True]])  # prompt, turn 1, obs, turn 2
        >>> rewards = torch.tensor([[0.0, 0.0, 0.5, 0.0, 1.0]])
        >>> adv, ret = skip_observation_gae(rewards, torch.zeros(1, 5), mask)
        >>> ret.tolist()
        [[0.0, 1.5, 1.5, 0.0, 1.0]]
    """
    check_token_tensors(action_mask, rewards=rewards, values=values)
    if not 0.0 <= float(gamma) <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    batch_size, _ = action_mask.shape
    dtype = compute_dtype(rewards, values)
    if isinstance(lam, torch.Tensor) and lam.shape != (batch_size,):
        raise ValueError(f"lam as a tensor must be [batch]=({batch_size},), got {tuple(lam.shape)}")
    lam_per_row = torch.as_tensor(lam, device=rewards.device, dtype=dtype).expand(batch_size)
    if bool(((lam_per_row < 0) | (lam_per_row > 1) | lam_per_row.isnan()).any()):
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    if bool((rewards.masked_select(~action_mask) != 0).any()):
        raise ValueError(
            "rewards has non-zero entries on non-action tokens; rewards must sit on "
            "action tokens (the last action token of the turn that earned them)"
        )

    rewards = rewards.detach().to(dtype)
    values = values.detach().to(dtype)
    num_actions = action_mask.sum(dim=1)
    max_actions = int(num_actions.max()) if batch_size else 0

    # Vectorised over rows: a stable sort on "is not an action" compacts each row's action
    # positions to the front in time order; scan those in reverse, then scatter back.
    order = torch.sort((~action_mask).to(torch.int8), dim=1, stable=True).indices
    positions = order[:, :max_actions]
    valid = torch.arange(max_actions, device=action_mask.device) < num_actions.unsqueeze(1)
    compact_rewards = rewards.gather(1, positions).masked_fill(~valid, 0.0)
    compact_values = values.gather(1, positions).masked_fill(~valid, 0.0)
    # V(t') of the next action token; the slot after a row's last action is invalid, hence 0.
    next_values = torch.zeros_like(compact_values)
    next_values[:, :-1] = compact_values[:, 1:]
    deltas = compact_rewards + gamma * next_values - compact_values

    # Advantages by the delta recursion; returns by the lambda-return recursion
    # R_t = r_t + gamma * ((1 - lam) * V(t') + lam * R_t'), equal to A_t + V(t) in exact
    # arithmetic. Computing R directly keeps lam = 1 returns the exact reward-to-go: A + V would
    # leave float residue of V, which turns "every return is 0" into a tiny non-zero variance.
    compact_advantages = torch.zeros_like(deltas)
    compact_returns = torch.zeros_like(deltas)
    running_advantage = torch.zeros(batch_size, device=deltas.device, dtype=dtype)
    running_return = torch.zeros(batch_size, device=deltas.device, dtype=dtype)
    for index in range(max_actions - 1, -1, -1):
        running_advantage = deltas[:, index] + gamma * lam_per_row * running_advantage
        compact_advantages[:, index] = running_advantage
        bootstrap = (1 - lam_per_row) * next_values[:, index] + lam_per_row * running_return
        running_return = compact_rewards[:, index] + gamma * bootstrap
        compact_returns[:, index] = running_return

    # Invalid slots point at non-action positions and carry 0, so the scatters leave them at 0.
    advantages = torch.zeros(action_mask.shape, device=rewards.device, dtype=dtype)
    advantages.scatter_(1, positions, compact_advantages.masked_fill(~valid, 0.0))
    returns = torch.zeros(action_mask.shape, device=rewards.device, dtype=dtype)
    returns.scatter_(1, positions, compact_returns.masked_fill(~valid, 0.0))
    return advantages, returns


def length_adaptive_lambda(
    num_action_tokens: torch.Tensor | int, alpha: float = 1.5
) -> torch.Tensor:
    """SAO's per-trajectory policy lambda, ``lambda = 1 - 1 / (alpha * l)``.

    Longer trajectories get a lambda closer to 1 so the effective GAE horizon grows with the
    response length ``l`` (the number of action tokens).

    Args:
        num_action_tokens: ``l`` per row, an int tensor ``[batch]`` (or a single int). A row with
            ``l = 0`` is treated as ``l = 1``; it has no action token, so its lambda is unused.
        alpha: positive scale (paper default 1.5).

    Returns:
        float32 lambdas, clipped below at 0 (reachable only when ``alpha * l < 1``) so each is a
        valid GAE lambda in ``[0, 1)``.
    """
    if not float(alpha) > 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    lengths = torch.as_tensor(num_action_tokens)
    if bool((lengths < 0).any()):
        raise ValueError("num_action_tokens must be non-negative")
    lengths = lengths.to(torch.float32).clamp(min=1.0)
    return (1.0 - 1.0 / (alpha * lengths)).clamp(min=0.0)


def check_episode_rewards(rewards: torch.Tensor) -> None:
    """Checks ``rewards`` is a finite 1-D tensor ``[batch]`` (ValueError naming what is wrong)."""
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise ValueError("rewards must be a 1-D tensor [batch] of per-episode rewards")
    if not bool(torch.isfinite(rewards).all()):
        raise ValueError("rewards contains NaN or infinite values")


def _check_episode_inputs(rewards: torch.Tensor, group_ids: torch.Tensor) -> None:
    check_episode_rewards(rewards)
    if not isinstance(group_ids, torch.Tensor) or group_ids.shape != rewards.shape:
        raise ValueError(
            f"group_ids must be a tensor with the shape of rewards {tuple(rewards.shape)}"
        )
    if group_ids.is_floating_point() or group_ids.dtype == torch.bool:
        raise TypeError(f"group_ids must be an integer tensor, got {group_ids.dtype}")


def _group_statistics(
    rewards: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group index, size, mean, population std and a zero-variance flag (all per group)."""
    unique_ids, group_index = torch.unique(group_ids, return_inverse=True)
    num_groups = unique_ids.numel()
    rewards = rewards.detach().to(compute_dtype(rewards))
    sizes = torch.zeros(num_groups, dtype=rewards.dtype, device=rewards.device)
    sizes.index_add_(0, group_index, torch.ones_like(rewards))
    sums = torch.zeros_like(sizes).index_add_(0, group_index, rewards)
    means = sums / sizes
    squared_deviations = (rewards - means[group_index]) ** 2
    stds = (torch.zeros_like(sizes).index_add_(0, group_index, squared_deviations) / sizes).sqrt()
    # Exact test (max == min) rather than std == 0, which rounding can miss.
    highest = torch.full_like(sizes, -torch.inf).scatter_reduce(0, group_index, rewards, "amax")
    lowest = torch.full_like(sizes, torch.inf).scatter_reduce(0, group_index, rewards, "amin")
    return group_index, sizes, means, stds, highest == lowest


@torch.no_grad()
def group_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, normalize_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Group-relative advantages: GRPO (``normalize_std=True``) or Dr.GRPO (``False``).

    ``A_i = r_i - mean_g``, divided by ``std_g + eps`` for GRPO. The std is the population std
    (divide by G, not G - 1): it is defined for every group size, and it makes each normalised
    group have unit variance. Implementations using the sample std (e.g. ``torch.std``'s default)
    give advantages larger by ``sqrt(G / (G - 1))``, a constant factor for a fixed group size.
    A group whose rewards are all equal gets advantages of exactly zero.

    Args:
        rewards: per-episode rewards ``[batch]``.
        group_ids: integer tensor ``[batch]``; equal ids form a group (any values, any order).
        normalize_std: divide by the group std (GRPO) or not (Dr.GRPO).
        eps: added to the std to bound the scale of near-constant groups.

    Returns:
        Advantages ``[batch]`` (float32, or float64 for float64 rewards); empty for an empty batch.

    Example:
        >>> group_advantages(torch.tensor([1.0, 0.0, 2.0, 2.0]), torch.tensor([7, 7, 3, 3]),
        ...                  normalize_std=False).tolist()
        [0.5, -0.5, 0.0, 0.0]
    """
    _check_episode_inputs(rewards, group_ids)
    group_index, _, means, stds, zero_variance = _group_statistics(rewards, group_ids)
    advantages = rewards.to(means.dtype) - means[group_index]
    if normalize_std:
        advantages = advantages / (stds[group_index] + eps)
    return advantages.masked_fill(zero_variance[group_index], 0.0)


def zero_variance_group_fraction(rewards: torch.Tensor, group_ids: torch.Tensor) -> float:
    """Fraction of groups whose rewards are all equal (they give no GRPO learning signal).

    Takes the arguments of :func:`group_advantages`. A group of size 1 counts as zero-variance;
    an empty batch gives NaN.
    """
    _check_episode_inputs(rewards, group_ids)
    zero_variance = _group_statistics(rewards, group_ids)[4]
    return float(zero_variance.to(torch.float64).mean())


@torch.no_grad()
def rloo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """REINFORCE leave-one-out advantages: ``A_i = r_i - mean of the other members' rewards``.

    Equivalently ``A_i = G / (G - 1) * (r_i - mean_g)``. Takes the arguments of
    :func:`group_advantages`; groups whose rewards are all equal get exactly zero.

    Raises:
        ValueError: if a group has a single member: it has no "others" to form a baseline, and
            silently returning 0 would hide a misconfigured group size.
    """
    _check_episode_inputs(rewards, group_ids)
    group_index, sizes, means, _, zero_variance = _group_statistics(rewards, group_ids)
    singletons = torch.unique(group_ids)[sizes == 1]
    if singletons.numel():
        raise ValueError(
            f"rloo_advantages needs at least 2 episodes per group; group ids "
            f"{singletons.tolist()[:5]} have 1"
        )
    member_sizes = sizes[group_index]
    advantages = member_sizes / (member_sizes - 1) * (rewards.to(means.dtype) - means[group_index])
    return advantages.masked_fill(zero_variance[group_index], 0.0)


def response_span_mask(action_mask: torch.Tensor) -> torch.Tensor:
    """True from each row's first action token to its last one, observations between included.

    Passing this mask to :func:`skip_observation_gae` in place of ``action_mask`` turns the
    skip-observation recursion into plain token-level GAE over the response: observation tokens
    become ordinary steps with their own value, reward 0 and a ``gamma * lam`` decay each.

    Example:
        >>> mask = torch.tensor([[False, True, False, False, True, False]])
        >>> response_span_mask(mask).tolist()
        [[False, True, True, True, True, False]]
    """
    check_token_tensors(action_mask)
    seen_before = action_mask.to(torch.int32).cumsum(dim=1) > 0
    seen_after = action_mask.flip(1).to(torch.int32).cumsum(dim=1).flip(1) > 0
    return seen_before & seen_after


def broadcast_to_tokens(episode_values: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Places ``episode_values [batch]`` on every action token of its row, 0 elsewhere."""
    check_token_tensors(action_mask)
    batch_size = action_mask.shape[0]
    if not isinstance(episode_values, torch.Tensor) or episode_values.shape != (batch_size,):
        found = tuple(episode_values.shape) if isinstance(episode_values, torch.Tensor) else None
        raise ValueError(f"episode_values must be [batch]=({batch_size},), got {found}")
    expanded = episode_values.unsqueeze(1).expand(action_mask.shape)
    return torch.where(action_mask, expanded, torch.zeros_like(expanded))


StepLevelMode = Literal["last_token", "average"]


@torch.no_grad()
def step_level_values(
    token_values: torch.Tensor, turn_ids: torch.Tensor, mode: StepLevelMode = "last_token"
) -> torch.Tensor:
    """Replaces token-level values by one value per turn (the paper's step-level ablation).

    ``"last_token"`` gives every token of a turn the value of the turn's last action token (the
    paper's "Last-Token" variant); ``"average"`` gives it the mean over the turn's action tokens
    ("Average"). Works on critic values (before GAE) or on advantages (after GAE) alike.

    Args:
        token_values: float ``[batch, time]``.
        turn_ids: int ``[batch, time]``, the turn index of each action token, -1 elsewhere.
        mode: ``"last_token"`` or ``"average"``.

    Returns:
        ``[batch, time]`` with each action token holding its turn's value, 0 where
        ``turn_ids == -1``.

    Example:
        >>> values = torch.tensor([[1.0, 2.0, 0.0, 4.0, 6.0]])
        >>> turns = torch.tensor([[0, 0, -1, 1, 1]])
        >>> step_level_values(values, turns, "average").tolist()
        [[1.5, 1.5, 0.0, 5.0, 5.0]]
    """
    if mode not in ("last_token", "average"):
        raise ValueError(f"mode must be 'last_token' or 'average', got {mode!r}")
    if not isinstance(turn_ids, torch.Tensor) or turn_ids.is_floating_point():
        raise TypeError("turn_ids must be an integer tensor")
    if bool((turn_ids < -1).any()):
        raise ValueError("turn_ids must be >= 0 on action tokens and -1 elsewhere")
    is_action = turn_ids >= 0
    check_token_tensors(is_action, mask_name="turn_ids", token_values=token_values)
    batch_size, time = turn_ids.shape
    num_turns = int(turn_ids.max()) + 1 if turn_ids.numel() else 0
    if num_turns == 0:
        return torch.zeros_like(token_values)
    # One slot per (row, turn); non-action tokens go to a spare slot that is discarded.
    row_offsets = torch.arange(batch_size, device=turn_ids.device).unsqueeze(1) * num_turns
    spare_slot = batch_size * num_turns
    slots = torch.where(is_action, row_offsets + turn_ids, spare_slot).reshape(-1)
    flat_values = token_values.detach().reshape(-1)
    if mode == "last_token":
        flat_positions = torch.arange(batch_size * time, device=turn_ids.device)
        last_position = torch.full((spare_slot + 1,), -1, dtype=torch.long, device=turn_ids.device)
        last_position.scatter_reduce_(0, slots, flat_positions, "amax")
        per_slot = flat_values[last_position.clamp(min=0)]
    else:
        sums = torch.zeros(spare_slot + 1, dtype=flat_values.dtype, device=flat_values.device)
        sums.index_add_(0, slots, flat_values)
        counts = torch.zeros_like(sums).index_add_(0, slots, torch.ones_like(flat_values))
        per_slot = sums / counts.clamp(min=1)
    result = per_slot[slots].reshape(batch_size, time)
    return torch.where(is_action, result, torch.zeros_like(result))
