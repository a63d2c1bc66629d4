"""How the asynchronous runtime counts an unfinished episode's staleness, and which stragglers it
stops (``runtime.staleness_from`` and ``runtime.stragglers``).

An episode's staleness at training is the learner's version minus its oldest token's version.
Before it is done the learner knows only a lower bound for that token's version: the version
it was admitted at (no episode starts on older weights) or, counting from tokens, the version
its worker started it with (the worker's ``started`` report). Once done, its oldest token is
known. ``batch_selection`` decides with these versions whether the learner must wait.

With ``stragglers: requeue`` the learner does not wait with B episodes ready: the groups it would
wait for (``stragglers_to_drop``) are stopped and run again, except a group with a member
already run ``MAX_REQUEUES`` times before (``EpisodePlan.attempt``: requeued, or lost with a
worker), which is waited for (an environment that is always slow for some prompt would otherwise
have it stopped forever).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sao_online.learning.types import Trajectory
from sao_online.runtime.scheduling.batch_selection import stragglers_to_drop
from sao_online.runtime.scheduling.planner import EpisodePlan

#: An episode is requeued at most this many times (its attempt); its next run is waited for.
MAX_REQUEUES = 2


@dataclass
class HeldEpisode:
    """An admitted episode a worker holds (queued or running)."""

    plan: EpisodePlan
    admitted_version: int
    started_version: int | None = None  # the worker's weights when it started it, once known


@dataclass
class FinishedEpisode:
    """A completed trajectory waiting for training (or for the rest of its group)."""

    trajectory: Trajectory
    plan: EpisodePlan
    admitted_version: int
    oldest_version: int  # what its staleness counts from

    @property
    def group_id(self) -> int:
        return self.plan.group_id


class StragglerRules:
    """The run's ``runtime.staleness_from`` and ``runtime.stragglers`` as decisions.

    Args:
        runtime: the config's runtime section.
    """

    def __init__(self, runtime: Any) -> None:
        self.count_from_tokens = runtime.staleness_from == "tokens"
        self.requeue = runtime.stragglers == "requeue"

    def held_version(self, episode: HeldEpisode) -> int:
        """The oldest version an unfinished episode's tokens may have, as far as is known."""
        if self.count_from_tokens and episode.started_version is not None:
            return max(episode.admitted_version, episode.started_version)
        return episode.admitted_version

    def finished(self, episode: HeldEpisode, trajectory: Trajectory) -> FinishedEpisode:
        """``episode`` done as ``trajectory``, its staleness counted as the rules say."""
        oldest = episode.admitted_version
        if self.count_from_tokens and trajectory.oldest_version >= 0:
            oldest = max(oldest, trajectory.oldest_version)
        return FinishedEpisode(trajectory, episode.plan, episode.admitted_version, oldest)

    def waiting(
        self, held: Iterable[HeldEpisode], buffered: Mapping[int, list[FinishedEpisode]]
    ) -> list[tuple[int, int]]:
        """(group id, oldest version) of every admitted episode not ready for training: those
        the workers hold and the finished members of incomplete groups."""
        waiting = [(episode.plan.group_id, self.held_version(episode)) for episode in held]
        waiting += [
            (group_id, member.oldest_version)
            for group_id, members in buffered.items()
            for member in members
        ]
        return waiting

    def groups_to_requeue(
        self,
        ready: Sequence[FinishedEpisode],
        held: Sequence[HeldEpisode],
        buffered: Mapping[int, list[FinishedEpisode]],
        *,
        version: int,
        max_staleness: int,
        batch_size: int,
    ) -> set[int]:
        """The groups to stop and run again so that the learner can train now (empty: wait,
        or train; always empty unless stragglers are requeued)."""
        if not self.requeue:
            return set()
        plans = [episode.plan for episode in held]
        plans += [member.plan for members in buffered.values() for member in members]
        pinned = {plan.group_id for plan in plans if plan.attempt >= MAX_REQUEUES}
        return set(
            stragglers_to_drop(
                ready,
                version=version,
                max_staleness=max_staleness,
                batch_size=batch_size,
                waiting=self.waiting(held, buffered),
                pinned=pinned,
            )
        )
