"""The simulated runtime's cost model: how long each thing takes on the virtual clock.

A ``CostModel`` is ``runtime.sim`` resolved: every field of its preset, overridden by the fields
the config sets. It prices the four things that take time in an asynchronous run:

- a rollout worker's decoding step, linear in what it computes::

      decode_step_seconds + decode_slot_seconds * slots
        + decode_cached_token_seconds * cached_tokens
        + prefill_token_seconds * (fed_tokens - slots)

  (``slots`` fed this step, ``cached_tokens`` their keys and values attention reads,
  ``fed_tokens`` the tokens fed: one per decoding slot, a whole prompt or observation segment
  per prefilling one);
- an environment call: ``env_call_seconds`` plus the env's simulated latency (the run's
  ``env.latency_mean`` and ``env.latency_sigma``, drawn by ``LatencyWrapper`` from the
  episode's seed: never slept, only counted);
- a learner update: ``learner_update_seconds`` plus the longer of its two lanes (the learner
  runs the critic beside the policy): the policy's ``learner_policy_token_seconds`` per token of
  the batch (none on a critic-only warm-up step), the critic's ``learner_critic_token_seconds``
  per token per critic update;
- publishing the new weights to the workers: ``publish_seconds``.

The presets are ``PRESETS``; each names where its numbers come from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

from sao_online.config import SimCostConfig
from sao_online.learning.types import Trajectory


@dataclass(frozen=True)
class CostModel:
    """Every cost of the simulated runtime, in seconds (see the module docstring)."""

    decode_step_seconds: float
    decode_slot_seconds: float
    decode_cached_token_seconds: float
    prefill_token_seconds: float
    env_call_seconds: float
    learner_update_seconds: float
    learner_policy_token_seconds: float
    learner_critic_token_seconds: float
    publish_seconds: float

    def decode_step(self, slots: int, fed_tokens: int, cached_tokens: int) -> float:
        """Seconds of one decoding step that feeds ``slots`` slots.

        Example:
            >>> costs = PRESETS["gpu-fleet"].costs
            >>> costs.decode_step(4, 4, 100) < costs.decode_step(4, 40, 100)
            True
        """
        return (
            self.decode_step_seconds
            + self.decode_slot_seconds * slots
            + self.decode_cached_token_seconds * cached_tokens
            + self.prefill_token_seconds * max(fed_tokens - slots, 0)
        )

    def env_call(self, latency: float) -> float:
        """Seconds of one env reset or step whose simulated latency is ``latency``."""
        return self.env_call_seconds + latency

    def learner_lanes(
        self, tokens: int, *, critic_updates: int, trains_policy: bool
    ) -> tuple[float, float]:
        """Seconds of the policy's and the critic's lanes of one update on ``tokens`` tokens.

        Args:
            tokens: tokens of the batch (prompts, actions and observations: every forward pass
                reads them all).
            critic_updates: critic updates in this step (0 without a critic).
            trains_policy: False on a critic-only warm-up step and for a learner that never
                updates.
        """
        policy = self.learner_policy_token_seconds * tokens if trains_policy else 0.0
        return policy, self.learner_critic_token_seconds * tokens * critic_updates

    def learner_update(self, lanes: tuple[float, float]) -> float:
        """Seconds of one update whose lanes take ``lanes`` (they run side by side)."""
        return self.learner_update_seconds + max(lanes)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class Preset:
    """A named cost model and where its numbers come from."""

    costs: CostModel
    source: str


#: The named cost models ``runtime.sim.preset`` chooses from.
PRESETS: dict[str, Preset] = {
    "gpu-fleet": Preset(
        CostModel(
            decode_step_seconds=0.012,
            decode_slot_seconds=2e-5,
            decode_cached_token_seconds=1.8e-8,
            prefill_token_seconds=1.25e-5,
            env_call_seconds=0.05,
            learner_update_seconds=3.0,
            learner_policy_token_seconds=1.5e-5,
            learner_critic_token_seconds=1.1e-5,
            publish_seconds=3.0,
        ),
        "Qwen3-30B-A3B (bf16) on H100s: each rollout worker a 2xH100 vLLM/SGLang replica, the "
        "learner 16 H100s, weights broadcast over NCCL; every figure cited in "
        "docs/guides/simulated-runtime.md#the-gpu-fleet-preset",
    ),
    "cpu-tiny": Preset(
        CostModel(
            decode_step_seconds=0.0057,
            decode_slot_seconds=0.000159,
            decode_cached_token_seconds=0.0,
            prefill_token_seconds=7.82e-05,
            env_call_seconds=0.000165,
            learner_update_seconds=0.218,
            learner_policy_token_seconds=0.000246,
            learner_critic_token_seconds=0.000151,
            publish_seconds=0.00104,
        ),
        "the tiny model (4 layers, hidden 128) on two cores of an AMD EPYC: `sao-online sim fit` "
        "of the demo's config on the local backend, to three significant figures "
        "(docs/data/sim_fit/fitted.yaml, compared with the real runs in "
        "docs/guides/simulated-runtime.md#the-fitted-cost-model-against-the-real-run)",
    ),
}


def resolve_costs(sim: SimCostConfig) -> CostModel:
    """``runtime.sim`` as a ``CostModel``: its preset, with the fields the config sets.

    Raises:
        ValueError: the preset is unknown (``runtime.sim.preset`` names the choices).
    """
    if sim.preset not in PRESETS:
        raise ValueError(
            f"runtime.sim.preset: unknown preset {sim.preset!r}; expected one of "
            f"{', '.join(sorted(PRESETS))}"
        )
    base = PRESETS[sim.preset].costs
    given = {
        item.name: getattr(sim, item.name)
        for item in fields(CostModel)
        if getattr(sim, item.name) is not None
    }
    return CostModel(**{**base.to_dict(), **given})


def batch_tokens(trajectories: Sequence[Trajectory]) -> int:
    """Tokens of a training batch (every forward pass of the learner reads them all)."""
    return sum(len(trajectory.tokens) for trajectory in trajectories)
