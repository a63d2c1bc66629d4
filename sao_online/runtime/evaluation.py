"""Evaluation on pinned policy versions, in a background thread, so the learner keeps going.

Every ``eval.every_updates`` updates the runtime snapshots the policy (a frozen copy at version
v) and evaluates it on the current phase and on every phase seen so far (forgetting), M
episodes each, with the run's sampling settings. Rows go to ``evals.parquet``: ``policy_version``,
``world_time`` (clock when the snapshot was taken), ``current_phase``, ``eval_phase``,
``mean_reward``, ``num_episodes`` and the oracle ceiling of the evaluated phase.
"""

from __future__ import annotations

import copy
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from sao_online.rundir.episode_rows import oracle_reward
from sao_online.runtime.context import RunContext
from sao_online.runtime.envs import plan_to_request
from sao_online.runtime.scheduling.planner import EpisodePlan

EVAL_SEED_OFFSET = 1_000_003  # evaluation episodes never reuse a training episode's seed


def phase_starts(ctx: RunContext, until: float) -> list[float]:
    """Clock readings at which the phases started by ``until`` begin."""
    return [0.0, *ctx.schedule.change_points(until=until)]


def evaluate_snapshot(
    ctx: RunContext, policy: Any, version: int, world_time: float
) -> list[dict[str, Any]]:
    """Evaluate ``policy`` (a frozen snapshot) on every phase started by ``world_time``."""
    config = ctx.config
    starts = phase_starts(ctx, until=world_time)
    current_phase = len(starts) - 1
    per_phase = config.eval.episodes_per_phase
    plans = []
    for phase, start in enumerate(starts):
        state = ctx.schedule.at(start)
        for k in range(per_phase):
            seed = int(
                np.random.default_rng([config.seed, EVAL_SEED_OFFSET, version, phase, k]).integers(
                    2**31 - 1
                )
            )
            plans.append(
                EpisodePlan(
                    prompt_id=-1,
                    group_id=phase,
                    seed=seed,
                    world_time=start,
                    state=state,
                    evaluation=True,
                )
            )
    requests = iter([plan_to_request(config, plan) for plan in plans])
    rewards: dict[int, list[float]] = {phase: [] for phase in range(len(starts))}
    with ctx.make_engine(
        model=policy,
        seed=config.seed + EVAL_SEED_OFFSET + version,
        num_slots=min(config.rollout.num_slots, len(plans)),
    ) as engine:
        for trajectory in engine.run(lambda: next(requests, None)):
            rewards[trajectory.group_id].append(trajectory.total_reward)
    return [
        {
            "policy_version": version,
            "world_time": float(world_time),
            "current_phase": current_phase,
            "eval_phase": phase,
            "mean_reward": float(np.mean(values)),
            "num_episodes": len(values),
            "oracle_reward": oracle_reward(config, ctx.schedule.at(starts[phase]).theta),
        }
        for phase, values in rewards.items()
    ]


class BackgroundEvaluator:
    """Runs evaluations of pinned snapshots in one background thread; rows are logged on collect.

    While one evaluation runs the next due one is skipped (snapshots are whole model copies), so
    which versions are evaluated depends on the machine's speed. ``inline`` evaluates every due
    version at once in the caller's thread instead (the simulated runtime, whose runs must not
    depend on the machine).
    """

    def __init__(self, ctx: RunContext, inline: bool = False) -> None:
        self.ctx = ctx
        self.every = ctx.config.eval.every_updates
        self.inline = inline
        self._executor = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="evaluation")
            if self.every and not inline
            else None
        )
        self._futures: list[Future] = []

    def maybe_submit(self, version: int, world_time: float) -> None:
        """Snapshot and evaluate at every ``every``-th version (version 0 is the warm start)."""
        if not self.every or version % self.every:
            return
        if self.inline:
            done: Future = Future()
            done.set_result(evaluate_snapshot(self.ctx, self._snapshot(), version, world_time))
            self._futures.append(done)
            return
        if any(not future.done() for future in self._futures):
            return  # at most one evaluation queued: snapshots are whole model copies
        self._futures.append(
            self._executor.submit(
                evaluate_snapshot, self.ctx, self._snapshot(), version, world_time
            )
        )

    def _snapshot(self) -> Any:
        """A frozen copy of the policy. A deep copy has its own config, so the engine's
        temporary attention switch during an evaluation never touches the policy being
        trained."""
        snapshot = copy.deepcopy(self.ctx.policy).eval()
        snapshot.requires_grad_(False)
        snapshot.zero_grad(set_to_none=True)
        return snapshot

    def collect(self, log: Any, wait: bool = False) -> None:
        """Log the rows of finished evaluations (all of them when ``wait``)."""
        remaining = []
        for future in self._futures:
            if wait or future.done():
                log.log("evals", future.result())
            else:
                remaining.append(future)
        self._futures = remaining

    def close(self, log: Any) -> None:
        self.collect(log, wait=True)
        if self._executor is not None:
            self._executor.shutdown()
