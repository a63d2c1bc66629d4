"""The tiny model and short episodes that most tests run, as command-line overrides.

A test that needs something else says only what differs::

    load_config(None, tiny_overrides("runtime.backend=sync", "rollout.max_action_tokens=6"))

An override of a key already in the list replaces it in place, so the list a failing test prints
holds each key once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sao_online.config.loading import apply_overrides

#: The policy most tests train: two layers 64 wide, no warm start (a second to build).
TINY_MODEL = ("model.warm_start=false", "model.num_layers=2", "model.hidden_size=64")

#: The smallest policy, for tests that run whole experiments (several processes, resumed runs)
#: and need the model only to exist.
SMALLEST_MODEL = ("model.warm_start=false", "model.num_layers=1", "model.hidden_size=32")

#: One-turn episodes of a few tokens, eight to a batch.
SHORT_EPISODES = (
    "rollout.max_turns=1",
    "rollout.max_action_tokens=12",
    "rollout.max_episode_tokens=128",
    "rollout.batch_size=8",
)


def merge_overrides(*lists: Iterable[str]) -> list[str]:
    """The overrides of `lists` in order, a later ``key=value`` replacing an earlier one's value.

    Example:
        >>> merge_overrides(["a=1", "b=2"], ["b=3", "c=4"])
        ['a=1', 'b=3', 'c=4']
    """
    merged: dict[str, str] = {}
    for overrides in lists:
        for override in overrides:
            key = override.split("=", 1)[0].strip()
            merged[key] = override
    return list(merged.values())


def tiny_overrides(*changes: str, model: Iterable[str] = TINY_MODEL) -> list[str]:
    """`model` (the tiny one unless given) with short episodes, and `changes` on top."""
    return merge_overrides(model, SHORT_EPISODES, changes)


def model_section(model: Iterable[str] = SMALLEST_MODEL) -> dict[str, Any]:
    """`model` as the ``model:`` section of a config dict (tests that write a config file).

    Example:
        >>> model_section()
        {'warm_start': False, 'num_layers': 1, 'hidden_size': 32}
    """
    return apply_overrides({}, list(model))["model"]


def rollout_section(episodes: Iterable[str] = SHORT_EPISODES) -> dict[str, Any]:
    """`episodes` as the ``rollout:`` section of a config dict.

    Example:
        >>> rollout_section()["batch_size"]
        8
    """
    return apply_overrides({}, list(episodes))["rollout"]
