"""The synchronous runtime: generate a batch, train, repeat. Deterministic for a seed."""

from __future__ import annotations

from typing import Any

from sao_online.rollout import RolloutEngine
from sao_online.runtime.envs import plan_to_request
from sao_online.runtime.loop import RunInterrupted, TrainingLoop


def run_sync(loop: TrainingLoop, engine_state: dict[str, Any] | None = None) -> None:
    """Generate B trajectories with the current weights and train on them, until the budget is
    spent."""
    ctx = loop.ctx
    config = ctx.config
    with ctx.make_engine(
        num_slots=min(config.rollout.num_slots, config.rollout.batch_size)
    ) as engine:
        if engine_state is not None:
            engine.generator.set_state(engine_state["generator"])
        _train_until_budget(loop, engine)


def _train_until_budget(loop: TrainingLoop, engine: RolloutEngine) -> None:
    ctx = loop.ctx
    config = ctx.config
    budget = config.budget.episodes
    planner = ctx.planner
    try:
        while planner.can_start_group(budget):
            plans = []
            while len(plans) < config.rollout.batch_size and planner.can_start_group(budget):
                plans.extend(planner.next_group())
            requests = iter([plan_to_request(config, plan) for plan in plans])
            engine.policy_version = ctx.learner.version
            trajectories = list(engine.run(lambda pending=requests: next(pending, None)))
            loop.train_on(trajectories, loop.straddles(plans))
            if loop.checkpoint_due():
                loop.checkpoint({"engine": {"generator": engine.generator.get_state()}})
    except RunInterrupted:
        # Raised right after an update: everything logged was trained on, nothing is in flight.
        loop.checkpoint({"engine": {"generator": engine.generator.get_state()}})
        raise
    loop.checkpoint({"engine": {"generator": engine.generator.get_state()}})
