"""``runtime.backend: simulated``: the asynchronous runtime over simulated workers.

The run is the asynchronous runtime's (``AsyncRuntime``: admission, the staleness gate, batch
selection, stragglers, checkpoints), with the real policy, environments and learner; only time
is simulated. The workers are ``SimulatedWorkerPool``'s, the clock is the training loop's
``VirtualClock``, and each update costs what the cost model says (``CostModel.learner_update``,
charged right after the learner's step through ``TrainingLoop.after_learner_step``). The same
config and seed give the same run on any load.

Checkpoints: a checkpoint of an asynchronous run records the episodes admitted but not trained
on as plans; a resumed session starts fresh workers and issues those plans again. A simulated
run does the same right after every checkpoint it writes (``SimulatedRuntime._restart``): the
episodes in flight are set aside and issued again, on fresh workers seeded as a resumed session
seeds them, at the same virtual moment. So a run stopped at any point (``kill -9`` or Ctrl-C,
which writes no checkpoint of its own here) and resumed from its last checkpoint goes on exactly
as the run that was never stopped, at the cost of re-running the episodes in flight at each
checkpoint (``logging.checkpoint_every``; 0 writes one only at the end, and nothing is re-run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sao_online.learning.types import Trajectory
from sao_online.runtime.loop import TrainingLoop
from sao_online.runtime.scheduling.async_runtime import AsyncRuntime, pending_plans
from sao_online.runtime.scheduling.planner import EpisodePlan
from sao_online.runtime.simulation.costs import batch_tokens, resolve_costs
from sao_online.runtime.simulation.pool import SimulatedWorkerPool


class SimulationStalled(RuntimeError):
    """Nothing runs, nothing can start and the budget is not trained on: the run cannot go on."""


class SimulatedRuntime(AsyncRuntime):
    """``AsyncRuntime`` on a virtual clock: workers never fall silent, and a round in which
    nothing can happen is an error instead of a wait that would never end."""

    pool: SimulatedWorkerPool

    def __init__(
        self,
        loop: TrainingLoop,
        pool: SimulatedWorkerPool,
        pending: list[EpisodePlan] | None = None,
    ) -> None:
        super().__init__(loop, pool, pending, clock=loop.clock.now)
        self.silence_limit = math.inf

    def _train(self, batch: list) -> None:
        super()._train(batch)
        if self.loop.checkpoint_due():
            self._restart()

    def _restart(self) -> None:
        """Go on as a session resumed from the checkpoint just written would (see the module
        docstring): the same plans issued again, first, to fresh workers, same counters."""
        pending = pending_plans(self.checkpoint_extra())
        self.pool.reset(self.loop.ctx.policy, self.loop.ctx.learner.version)
        self.__init__(self.loop, self.pool, pending)  # counters, gate and queues as new
        self.start()

    def _checkpoint_on_interrupt(self) -> None:
        """No checkpoint of its own: a resumed run goes on from the last periodic one, which
        the run that was never stopped wrote too (and restarted its rollouts at), so both are
        one run. A checkpoint here would restart the rollouts at a version where the
        uninterrupted run did not. What was logged since is set aside on resume and logged again,
        the same."""

    def step(self, timeout: float) -> None:
        before = (self.loop.ctx.learner.version, self.next_ticket, self.loop.clock.now())
        super().step(timeout)
        after = (self.loop.ctx.learner.version, self.next_ticket, self.loop.clock.now())
        if after == before and self.pool.idle and not self.finished:
            raise SimulationStalled(
                f"simulated runtime: at {after[2]:.3f} virtual s nothing runs and nothing can "
                f"start ({len(self.ready)} episode(s) ready, version {after[0]}); this is a bug "
                "in the runtime, please report it with the config"
            )


def run_simulated(loop: TrainingLoop, state: dict[str, Any] | None = None) -> None:
    """Run ``loop`` to its budget on simulated workers (see the module docstring).

    Args:
        loop: the run's training loop, on a ``VirtualClock`` (``backend: simulated``).
        state: the checkpoint it was restored from; its plans admitted but not trained on are
            issued again first.
    """
    ctx = loop.ctx
    config = ctx.config
    costs = resolve_costs(config.runtime.sim)
    critic_updates = config.algorithm.critic_updates if ctx.method.uses_critic else 0

    def charge_update(trajectories: Sequence[Trajectory], metrics: dict[str, float]) -> None:
        """The update takes its virtual cost; its lanes' seconds become virtual too (the
        machine's are kept under ``sim/``)."""
        trains_policy = ctx.method.updates_policy and not metrics.get("charts/critic_only_step")
        lanes = costs.learner_lanes(
            batch_tokens(trajectories),
            critic_updates=critic_updates,
            trains_policy=bool(trains_policy),
        )
        for lane, seconds in zip(("policy", "critic"), lanes, strict=True):
            metrics[f"sim/learner_{lane}_real_seconds"] = metrics[f"charts/learner_{lane}_seconds"]
            metrics[f"charts/learner_{lane}_seconds"] = seconds
        pool.learner_busy(costs.learner_update(lanes))

    pool = SimulatedWorkerPool(
        config, ctx.policy, ctx.tokenizer, ctx.learner.version, loop.clock, costs
    )
    loop.after_learner_step = charge_update
    try:
        runtime = SimulatedRuntime(loop, pool, pending_plans(state))
    except BaseException:
        pool.close()
        raise
    runtime.run()
