"""The learner of a method that never updates (``Method.updates_policy=False``, e.g. ``frozen``).

It takes every batch the runtime hands it, exactly as a learning method's learner does, so the
episodes are sampled, logged and counted on the same schedule, seeds and clock; it only leaves
the weights alone: no critic values, no advantages, no optimiser step.
"""

from __future__ import annotations

from collections.abc import Sequence

from sao_online.learning.learner import Learner
from sao_online.learning.types import Trajectory


class FrozenLearner(Learner):
    """A :class:`~sao_online.learning.learner.Learner` whose ``step`` counts a version and
    trains nothing."""

    def step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        rewards = [trajectory.total_reward for trajectory in trajectories]
        metrics = {
            "charts/reward_mean": sum(rewards) / max(len(rewards), 1),
            "charts/action_tokens": float(sum(t.num_action_tokens for t in trajectories)),
            "charts/critic_only_step": 0.0,
        }
        self.version += 1
        return metrics
