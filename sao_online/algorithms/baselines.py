"""Running-mean reward baselines: the state behind the critic-free estimators.

:class:`RunningMeanBaseline` (one window over every reward) backs
:class:`~sao_online.algorithms.estimators.RunningMeanAdvantage`; :class:`KeyedRunningMeanBaseline`
(one window per prompt class) backs
:class:`~sao_online.algorithms.estimators.KeyedRunningMeanAdvantage`. Both keep rewards across
learner steps and checkpoint them through ``state_dict``; the pure advantage functions stay in
:mod:`sao_online.learning.advantages`.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch

from sao_online.learning.advantages import check_episode_rewards, compute_dtype

__all__ = ["KeyedRunningMeanBaseline", "RunningMeanBaseline"]


class RunningMeanBaseline:
    """Baseline = mean of the last ``window`` rewards seen before the current batch.

    The critic-free SAO ablation (and the paper's online-learning comparison, window 128).
    Calling it computes advantages against the rewards seen *before* the batch, then adds the
    batch to the window, so an episode never serves as its own baseline. Before any reward has
    been seen the baseline is 0.

    Args:
        window: number of most recent rewards averaged (positive).

    Example:
        >>> baseline = RunningMeanBaseline(window=2)
        >>> baseline(torch.tensor([1.0, 3.0])).tolist()
        [1.0, 3.0]
        >>> baseline(torch.tensor([5.0])).tolist()
        [3.0]
    """

    def __init__(self, window: int = 128) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}")
        self.window = window
        self._recent: deque[float] = deque(maxlen=window)

    @property
    def baseline(self) -> float:
        """Mean of the rewards currently in the window (0 when empty)."""
        return sum(self._recent) / len(self._recent) if self._recent else 0.0

    def __len__(self) -> int:
        return len(self._recent)

    @torch.no_grad()
    def __call__(self, rewards: torch.Tensor) -> torch.Tensor:
        """Returns ``rewards - baseline`` (per-episode ``[batch]``), then updates the window.

        Rewards enter the window in batch order, so with a batch larger than the window only
        its last ``window`` rewards are kept.
        """
        check_episode_rewards(rewards)
        rewards = rewards.detach().to(compute_dtype(rewards))
        advantages = rewards - self.baseline
        self._recent.extend(rewards.tolist())
        return advantages

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot for checkpoints."""
        return {"window": self.window, "rewards": list(self._recent)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`state_dict` snapshot; ValueError if its window differs."""
        if set(state) != {"window", "rewards"}:
            raise ValueError(f"state must have keys 'window' and 'rewards', got {sorted(state)}")
        if state["window"] != self.window:
            raise ValueError(f"state window {state['window']} != this baseline's {self.window}")
        self._recent = deque((float(reward) for reward in state["rewards"]), maxlen=self.window)


class KeyedRunningMeanBaseline:
    """One :class:`RunningMeanBaseline` per key: a per-prompt (per task, per level) baseline.

    The paper's per-prompt running-mean ablation, where "prompt" is whatever key the caller
    groups episodes by (here, entries of the environment's ``info`` such as ``difficulty``).
    Each episode's advantage is its reward minus the mean of the last ``window`` rewards of its
    own key seen before the batch; a key not seen before has baseline 0, as an empty
    :class:`RunningMeanBaseline` does.

    Args:
        window: rewards kept per key (positive).

    Example:
        >>> baseline = KeyedRunningMeanBaseline(window=2)
        >>> baseline(torch.tensor([1.0, 0.0]), ["easy", "hard"]).tolist()
        [1.0, 0.0]
        >>> baseline(torch.tensor([0.0, 1.0]), ["easy", "hard"]).tolist()
        [-1.0, 1.0]
    """

    def __init__(self, window: int = 32) -> None:
        RunningMeanBaseline(window)  # validates window
        self.window = window
        self._per_key: dict[str, RunningMeanBaseline] = {}

    def baseline(self, key: str) -> float:
        """Mean of the rewards in ``key``'s window (0 when the key is unseen)."""
        tracker = self._per_key.get(key)
        return tracker.baseline if tracker is not None else 0.0

    @torch.no_grad()
    def __call__(self, rewards: torch.Tensor, keys: list[str] | tuple[str, ...]) -> torch.Tensor:
        """Returns ``rewards - baseline of each episode's key``, then adds the batch to the windows.

        Raises:
            ValueError: ``keys`` is not one string per reward.
        """
        check_episode_rewards(rewards)
        if len(keys) != len(rewards) or not all(isinstance(key, str) for key in keys):
            raise ValueError(f"keys must be {len(rewards)} strings, one per reward")
        rewards = rewards.detach().to(compute_dtype(rewards))
        advantages = torch.empty_like(rewards)
        for key in dict.fromkeys(keys):  # each key once, in first-seen order
            rows = torch.tensor([row for row, row_key in enumerate(keys) if row_key == key])
            tracker = self._per_key.setdefault(key, RunningMeanBaseline(self.window))
            advantages[rows] = tracker(rewards[rows])
        return advantages

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot for checkpoints."""
        return {
            "window": self.window,
            "rewards": {
                key: tracker.state_dict()["rewards"] for key, tracker in self._per_key.items()
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`state_dict` snapshot; ValueError if its window differs."""
        if set(state) != {"window", "rewards"}:
            raise ValueError(f"state must have keys 'window' and 'rewards', got {sorted(state)}")
        if state["window"] != self.window:
            raise ValueError(f"state window {state['window']} != this baseline's {self.window}")
        self._per_key = {}
        for key, rewards in state["rewards"].items():
            tracker = RunningMeanBaseline(self.window)
            tracker.load_state_dict({"window": self.window, "rewards": rewards})
            self._per_key[key] = tracker
