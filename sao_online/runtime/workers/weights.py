"""Policy weights published by the learner to rollout workers through shared memory.

The learner owns one copy of every ``state_dict`` tensor in shared memory plus a version
counter. ``publish`` copies the learner's weights in and bumps the version; a worker's
``load_into`` copies them into its own model. One lock covers both so a worker never reads half
of one version and half of the next.
"""

from __future__ import annotations

from typing import Any

import torch


class SharedWeights:
    """A versioned ``state_dict`` in shared memory (picklable to spawned processes).

    Args:
        model: the model whose ``state_dict`` layout (names, shapes, dtypes) is shared.
        context: a multiprocessing context (spawn or forkserver) that makes the version counter
            and lock.
        version: the version of ``model``'s current weights.

    Example:
        >>> weights = SharedWeights(policy, torch.multiprocessing.get_context("spawn"))
        >>> weights.publish(policy, version=3)      # learner, after a step
        >>> engine.policy_version = weights.load_into(worker_policy)   # worker
    """

    def __init__(self, model: torch.nn.Module, context: Any, version: int = 0) -> None:
        # Always host memory: CUDA tensors cannot be shared this way, and a worker copies the
        # weights to its own device in load_into.
        self.tensors = {
            name: tensor.detach().to("cpu", copy=True).share_memory_()
            for name, tensor in model.state_dict().items()
        }
        self._version = context.Value("q", version, lock=False)
        self._lock = context.Lock()

    @property
    def version(self) -> int:
        """The last published version (a single aligned int64 read; no lock needed)."""
        return int(self._version.value)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        """Copy ``model``'s weights in and announce them as ``version``.

        Raises:
            ValueError: ``model`` has a tensor the shared layout lacks, or ``version`` goes back.
        """
        if version < self.version:
            raise ValueError(
                f"SharedWeights.publish: version went back from {self.version} to {version}"
            )
        state = model.state_dict()
        unknown = sorted(set(state) - set(self.tensors))
        if unknown:
            raise ValueError(
                f"SharedWeights.publish: tensors not in the shared layout: {unknown[:3]}"
            )
        with self._lock, torch.no_grad():
            for name, tensor in state.items():
                self.tensors[name].copy_(tensor)
            self._version.value = version

    def load_into(self, model: torch.nn.Module) -> int:
        """Copy the published weights into ``model`` (strict); return their version."""
        with self._lock:
            model.load_state_dict(self.tensors, strict=True)
            return int(self._version.value)
