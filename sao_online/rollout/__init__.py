"""Batched multi-turn rollouts with a KV cache and continuous batching (``RolloutEngine``).

- ``engine``: the decoding loop, caps and token layout (see its docstring);
- ``episode``: ``EpisodeRequest`` (what to run), per-slot bookkeeping, the ``Trajectory`` built;
- ``env_calls``: environment calls inline or on threads, each with a deadline, behind one
  interface; ``EnvError`` for an environment that breaks the contract;
- ``env_results``: the checks on what ``reset`` and ``step`` return;
- ``prompt_sharing``: one prefill for the slots of a group that start the same prompt.
"""

from sao_online.rollout.engine import (
    ActionCapPolicy,
    EngineRound,
    EnvCallStrategy,
    PendingWork,
    RolloutEngine,
)
from sao_online.rollout.env_calls import EnvCalls, EnvError
from sao_online.rollout.episode import TRUNCATED_BY_KEY, EpisodeRequest, RolloutStats

__all__ = [
    "TRUNCATED_BY_KEY",
    "ActionCapPolicy",
    "EngineRound",
    "EnvCallStrategy",
    "EnvCalls",
    "EnvError",
    "EpisodeRequest",
    "PendingWork",
    "RolloutEngine",
    "RolloutStats",
]
