"""Which completed episodes the asynchronous learner trains on next, as pure functions.

Every episode carries an ``oldest_version``: the oldest policy version its tokens may hold, as
far as the learner knows. That is the version it was admitted at (no episode starts on older
weights), or, with ``runtime.staleness_from: tokens``, the version its worker started sampling
it with once the worker says so, and its oldest token's version once it is done. Training at
version v keeps it within the bound while v - oldest_version <= max_staleness.

The rule (``select_batch``) keeps every trained token within ``max_staleness`` versions and never
deadlocks (property-tested in ``tests/runtime``):

1. Training now moves the learner to ``version + 1``; anything whose oldest version is at or
   before ``due = version - max_staleness`` would then be too stale. If such an episode is still
   running or waiting for its group, wait for it.
2. Take B ready episodes, oldest first (a group is as old as its oldest member and stays
   contiguous), unless fewer than B are ready and more may still come.
3. After this batch the learner trains k more batches (versions v+1 .. v+k) before anything
   at or before ``due + k`` passes the bound, so at most k*B of those may be left untrained,
   for every k up to ``max_staleness``. If that fails, fresh episodes that happened to finish
   first would take older ones' places and later force a batch to leave a due episode behind:
   wait for the stragglers instead. (Checking only k = 1 lets older episodes pile up until no
   batch is allowed while the gate, full, admits nothing: a deadlock.)

When the learner would wait with B episodes ready, the stragglers it waits for can instead be
stopped and run again (``runtime.stragglers: requeue``): ``stragglers_to_drop`` names the fewest
groups, oldest first, whose removal lets ``select_batch`` return a batch now.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import Protocol, TypeVar


class ReadyEpisode(Protocol):
    """A completed episode waiting for training."""

    @property
    def oldest_version(self) -> int: ...

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
        max_staleness: the bound on (trained version - oldest version).
        batch_size: B, episodes per update.
        waiting_versions: oldest versions of episodes not ready yet (still running, or done but
            waiting for the rest of their group).
        exhausted: nothing more will be admitted or is waiting, so a short last batch is fine.

    Returns:
        ``(batch, rest)`` with ``len(batch) <= batch_size``, or None.

    Example:
        >>> from types import SimpleNamespace as Episode
        >>> ready = [Episode(oldest_version=v, group_id=g) for v, g in [(3, 0), (2, 1), (3, 2)]]
        >>> batch, rest = select_batch(ready, version=3, max_staleness=4, batch_size=2,
        ...                            waiting_versions=[], exhausted=False)
        >>> [e.group_id for e in batch], [e.group_id for e in rest]
        ([1, 0], [2])
    """
    due_version = version - max_staleness
    if any(oldest <= due_version for oldest in waiting_versions):
        return None
    if len(ready) < batch_size and not (exhausted and ready):
        return None
    oldest_in_group: dict[int, int] = {}
    for item in ready:
        previous = oldest_in_group.get(item.group_id, item.oldest_version)
        oldest_in_group[item.group_id] = min(previous, item.oldest_version)
    # Stable sort: oldest first, completion order otherwise (groups stay contiguous).
    ordered = sorted(ready, key=lambda item: oldest_in_group[item.group_id])
    batch, rest = ordered[:batch_size], ordered[batch_size:]
    untrained = [item.oldest_version for item in rest] + list(waiting_versions)
    for k in range(1, max_staleness + 1):
        if sum(oldest <= due_version + k for oldest in untrained) > k * batch_size:
            return None
    return batch, rest


Key = TypeVar("Key", bound=Hashable)


def stragglers_to_drop(
    ready: Sequence[Item],
    *,
    version: int,
    max_staleness: int,
    batch_size: int,
    waiting: Sequence[tuple[Key, int]],
    pinned: Collection[Key] = (),
) -> list[Key]:
    """The groups of waiting episodes to stop and run again so that the learner can train now.

    Only when B episodes are ready and ``select_batch`` still refuses (the staleness rules wait
    for stragglers): groups are dropped oldest first until it accepts. A group is dropped whole
    (its finished members too: they are as stale as it is); ``pinned`` groups are never dropped.
    When fewer than B are ready the learner waits for episodes, not for the bound, and nothing
    is dropped; nor is anything when dropping every unpinned group would not be enough.

    Args:
        ready: completed episodes (whole groups), as for ``select_batch``.
        version, max_staleness, batch_size: as for ``select_batch``.
        waiting: ``(group key, oldest version)`` of every episode not ready yet.
        pinned: groups that must be waited for (already run again too often).

    Returns:
        The group keys to drop, oldest first; empty when the learner should not drop anything.

    Example:
        >>> from types import SimpleNamespace as Episode
        >>> ready = [Episode(oldest_version=2, group_id=g) for g in (5, 6)]
        >>> stragglers_to_drop(ready, version=4, max_staleness=2, batch_size=2,
        ...                    waiting=[("a", 1), ("b", 2), ("c", 4)])
        ['a', 'b']
    """
    if len(ready) < batch_size:
        return []

    def selectable(dropped: set[Key]) -> bool:
        remaining = [oldest for key, oldest in waiting if key not in dropped]
        return (
            select_batch(
                ready,
                version=version,
                max_staleness=max_staleness,
                batch_size=batch_size,
                waiting_versions=remaining,
                exhausted=False,
            )
            is not None
        )

    if selectable(set()):
        return []
    oldest_of: dict[Key, int] = {}
    for key, oldest in waiting:
        oldest_of[key] = min(oldest, oldest_of.get(key, oldest))
    # Only groups at or before the current version count against any horizon k <= bound.
    candidates = sorted(
        (key for key, oldest in oldest_of.items() if key not in pinned and oldest <= version),
        key=oldest_of.__getitem__,
    )
    dropped: set[Key] = set()
    order: list[Key] = []
    for key in candidates:
        dropped.add(key)
        order.append(key)
        if selectable(dropped):
            return order
    return []
