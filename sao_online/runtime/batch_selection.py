"""Which completed episodes the asynchronous learner trains on next, as a pure function.

The rule (``select_batch``) keeps every episode within ``max_staleness`` versions of the version
it was admitted at, and never deadlocks (property-tested in ``tests/runtime``):

1. Training now moves the learner to ``version + 1``; anything admitted at or before
   ``due = version - max_staleness`` would then be too stale. If such an episode is still
   running or waiting for its group, wait for it.
2. Take B ready episodes, oldest admission first (a group is as old as its oldest member and
   stays contiguous), unless fewer than B are ready and more may still come.
3. After this batch the learner trains k more batches (versions v+1 .. v+k) before anything
   admitted at or before ``due + k`` passes the bound, so at most k*B of those may be left
   untrained, for every k up to ``max_staleness``. If that fails, fresh episodes that happened to
   finish first would take older ones' places and later force a batch to leave a due episode
   behind: wait for the stragglers instead. (Checking only k = 1 lets older episodes pile up
   until no batch is allowed while the gate, full, admits nothing: a deadlock.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class ReadyEpisode(Protocol):
    """A completed episode waiting for training."""

    @property
    def admitted_version(self) -> int: ...

    @property
    def group_id(self) -> int: ...


Item = TypeVar("Item", bound=ReadyEpisode)


def select_batch(
    ready: Sequence[Item],
    *,
    version: int,
    max_staleness: int,
    batch_size: int,
    waiting_versions: Sequence[int],
    exhausted: bool,
) -> tuple[list[Item], list[Item]] | None:
    """The next batch and what stays ready, or None when the learner must wait.

    Args:
        ready: completed episodes (whole groups) in completion order.
        version: the learner's current version.
        max_staleness: the bound on (trained version - admitted version).
        batch_size: B, episodes per update.
        waiting_versions: admitted versions of episodes not ready yet (still running, or done
            but waiting for the rest of their group).
        exhausted: nothing more will be admitted or is waiting, so a short last batch is fine.

    Returns:
        ``(batch, rest)`` with ``len(batch) <= batch_size``, or None.

    Example:
        >>> from types import SimpleNamespace as Episode
        >>> ready = [Episode(admitted_version=v, group_id=g) for v, g in [(3, 0), (2, 1), (3, 2)]]
        >>> batch, rest = select_batch(ready, version=3, max_staleness=4, batch_size=2,
        ...                            waiting_versions=[], exhausted=False)
        >>> [e.group_id for e in batch], [e.group_id for e in rest]
        ([1, 0], [2])
    """
    due_version = version - max_staleness
    if any(admitted <= due_version for admitted in waiting_versions):
        return None
    if len(ready) < batch_size and not (exhausted and ready):
        return None
    oldest_in_group: dict[int, int] = {}
    for item in ready:
        previous = oldest_in_group.get(item.group_id, item.admitted_version)
        oldest_in_group[item.group_id] = min(previous, item.admitted_version)
    # Stable sort: oldest admission first, completion order otherwise (groups stay contiguous).
    ordered = sorted(ready, key=lambda item: oldest_in_group[item.group_id])
    batch, rest = ordered[:batch_size], ordered[batch_size:]
    untrained = [item.admitted_version for item in rest] + list(waiting_versions)
    for k in range(1, max_staleness + 1):
        if sum(admitted <= due_version + k for admitted in untrained) > k * batch_size:
            return None
    return batch, rest
