"""Policy weights published on the virtual clock: each version becomes readable at a moment.

The learner publishes version v at virtual time t (the end of its update plus
``publish_seconds``); a rollout worker that starts a decoding step at time s reads the newest
version published at or before s. Versions nobody can read any more (a newer one was readable
before the present) are freed, so at most a few copies are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class _Published:
    version: int
    readable_at: float
    tensors: dict[str, torch.Tensor]


class VirtualWeights:
    """The versions of the policy's weights and when each became readable.

    Args:
        model: the learner's policy (its current weights are version ``version``, readable at
            ``readable_at``).
        version: their version.
        readable_at: virtual time from which they are readable.
    """

    def __init__(self, model: torch.nn.Module, version: int, readable_at: float) -> None:
        self._published: list[_Published] = []
        self.publish(model, version, readable_at)

    def publish(self, model: torch.nn.Module, version: int, readable_at: float) -> None:
        """Keep a copy of ``model``'s weights as ``version``, readable from ``readable_at``.

        Raises:
            ValueError: the version or the time goes back.
        """
        if self._published:
            last = self._published[-1]
            if version <= last.version or readable_at < last.readable_at:
                raise ValueError(
                    f"VirtualWeights.publish: version {version} at {readable_at:g} s after "
                    f"version {last.version} at {last.readable_at:g} s"
                )
        state = model.state_dict()
        tensors = {name: tensor.detach().to("cpu", copy=True) for name, tensor in state.items()}
        self._published.append(_Published(version, readable_at, tensors))

    def newest(self, at: float) -> _Published:
        """The newest version readable at virtual time ``at``."""
        readable = [entry for entry in self._published if entry.readable_at <= at]
        if not readable:
            raise ValueError(f"VirtualWeights: no version is readable at {at:g} s")
        return readable[-1]

    def readable_at(self, version: int) -> float | None:
        """When ``version`` becomes readable (None: not published yet)."""
        for entry in self._published:
            if entry.version >= version:
                return entry.readable_at
        return None

    def load_into(self, model: torch.nn.Module, at: float) -> int:
        """Copy the newest version readable at ``at`` into ``model``; return its version."""
        entry = self.newest(at)
        model.load_state_dict(entry.tensors, strict=True)
        return entry.version

    def forget_before(self, now: float) -> None:
        """Free every version older than the newest one readable at ``now`` (no step that starts
        at or after ``now`` can read them)."""
        keep = self.newest(now).version
        self._published = [entry for entry in self._published if entry.version >= keep]

    @property
    def kept(self) -> int:
        """How many versions are held."""
        return len(self._published)
