"""The training loop every backend shares: log episodes, update, evaluate, checkpoint, progress.

Time: the loop owns the run's clock of seconds (``wall_time``; the ``wall_time`` columns of
episodes and updates). It is the machine's time, except for the ``simulated`` backend, where it
is a ``VirtualClock`` that the simulation moves: there the loop also evaluates inline (a
background evaluation would be skipped or not depending on the machine's speed), lets the
simulation charge each update's virtual cost (``after_learner_step``), and logs the real
seconds beside the virtual ones (``sim/real_seconds``, ``sim/learner_real_seconds``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from sao_online.drift_schedules import StepClock, VersionClock, WallClock
from sao_online.learning.types import Trajectory
from sao_online.rollout import TRUNCATED_BY_KEY
from sao_online.rollout.env_results import STEP_TIMEOUT
from sao_online.rundir.episode_rows import episode_record
from sao_online.rundir.layout import write_text_atomically
from sao_online.rundir.runlog import RunLog
from sao_online.rundir.tracking import TensorBoardLog, TranscriptLog, WandbLog
from sao_online.runtime.context import RunContext
from sao_online.runtime.evaluation import BackgroundEvaluator
from sao_online.runtime.scheduling.planner import EpisodePlan
from sao_online.runtime.simulation.clock import MachineClock, VirtualClock

STALENESS_HISTOGRAM_FILE = "staleness_histogram.csv"
DECODE_ROUNDS_FILE = "decode_rounds.csv"
"""Per decoding round of the rollout workers (asynchronous backends): slots, fed_tokens,
cached_tokens, seconds (``RolloutEngine.round_timings``); ``sao-online sim fit`` reads it."""
DECODE_ROUND_COLUMNS = ("slots", "fed_tokens", "cached_tokens", "seconds")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C, taken at a consistent point: after an update, with every logged record trained on."""


def batch_metrics(
    trajectories: Sequence[Trajectory], trained_version: int, max_staleness: int = 0
) -> dict[str, float]:
    """Behaviour shares, env step timeouts and staleness of one training batch (namespaced).

    ``charts/env_step_timeouts`` counts the batch's episodes ended by an env step past
    ``env.step_timeout`` (``env.on_step_timeout: end``). ``staleness/count_k`` counts the
    batch's trajectories k versions stale, for every k from 0 to ``max_staleness`` (zeros
    included, so each run's columns are fixed) and beyond if seen.
    """
    metrics: dict[str, float] = {
        "charts/env_step_timeouts": float(
            sum(t.info.get(TRUNCATED_BY_KEY) == STEP_TIMEOUT for t in trajectories)
        )
    }
    for label, count in Counter(t.behavior for t in trajectories).items():
        metrics[f"charts/behavior_share/{label or 'none'}"] = count / len(trajectories)
    staleness = [trained_version - t.oldest_version for t in trajectories if t.oldest_version >= 0]
    if staleness:
        metrics["staleness/mean"] = sum(staleness) / len(staleness)
        metrics["staleness/max"] = float(max(staleness))
        counts = Counter(staleness)
        for k in range(max(max_staleness, max(staleness)) + 1):
            metrics[f"staleness/count_{k}"] = float(counts.get(k, 0))
    return metrics


def staleness_histogram(episodes: pd.DataFrame) -> pd.DataFrame:
    """Trained episodes per staleness value: columns ``staleness``, ``episodes``, ``share``.

    Dropped episodes and episodes never trained on (staleness -1) are left out.
    """
    trained = episodes.loc[episodes["staleness"] >= 0, "staleness"].astype(int)
    if "dropped" in episodes:
        trained = trained[~episodes.loc[trained.index, "dropped"].astype(bool)]
    values = range(int(trained.max()) + 1) if len(trained) else range(0)
    counts = trained.value_counts().reindex(values, fill_value=0)
    return pd.DataFrame(
        {
            "staleness": list(values),
            "episodes": counts.to_numpy(dtype=int),
            "share": (counts / max(len(trained), 1)).to_numpy(dtype=float),
        }
    )


class TrainingLoop:
    """Shared bookkeeping of every backend: log episodes, update, checkpoint, progress."""

    def __init__(
        self, ctx: RunContext, log: RunLog, progress: Callable[[int], None] | None = None
    ) -> None:
        self.ctx = ctx
        self.log = log
        self.progress = progress
        self.episodes_logged = 0
        self.simulated = ctx.config.runtime.backend == "simulated"
        self.clock: MachineClock | VirtualClock = (
            VirtualClock() if self.simulated else MachineClock()
        )
        if self.simulated and isinstance(ctx.clock, WallClock):
            ctx.clock.use_timer(self.clock.now)  # a schedule on seconds reads virtual seconds
        self.started = self.clock.now()
        self.real_started = time.time()
        self.elapsed_before = 0.0  # wall time of earlier sessions of a resumed run
        self.real_elapsed_before = 0.0
        self.tokens = 0
        self.evaluator = BackgroundEvaluator(ctx, inline=self.simulated)
        #: Called with the batch and the update's metrics right after each learner step (the
        #: simulated runtime moves its clock there by the update's cost).
        self.after_learner_step: Callable[[Sequence[Trajectory], dict[str, float]], None] | None
        self.after_learner_step = None
        #: Decoding rounds the workers reported since the last checkpoint (``DECODE_ROUNDS_FILE``).
        self.decode_rounds: list[tuple[int, int, int, float]] = []
        self.stop_requested = threading.Event()  # set by the first Ctrl-C (see launch.py)
        self.transcripts: TranscriptLog | None = None
        self.trackers: list[TensorBoardLog | WandbLog] = []

    def wall_time(self) -> float:
        """Seconds since the run started (earlier sessions included), on the run's clock."""
        return self.elapsed_before + self.clock.now() - self.started

    def real_time(self) -> float:
        """Seconds of the machine's time the run took so far (earlier sessions included)."""
        return self.real_elapsed_before + time.time() - self.real_started

    def start(self) -> None:
        """Called by every backend before its first update: starts the run clock (seconds) and
        evaluates the starting policy."""
        if self.ctx.learner.version == 0:
            if isinstance(self.ctx.clock, WallClock):
                self.ctx.clock.start()
            self.evaluator.maybe_submit(0, 0.0)
        logging = self.ctx.config.logging
        resumed = self.episodes_logged > 0
        self.transcripts = TranscriptLog(
            self.log.path,
            self.ctx.tokenizer,
            logging.transcripts_every,
            keep_before=self.episodes_logged if resumed else None,
        )
        if logging.tensorboard:
            self.trackers.append(TensorBoardLog(self.log.path, first_step=self.ctx.learner.version))
        if logging.wandb:
            self.trackers.append(WandbLog(self.log.path, self.log.config()))

    def straddles(self, plans: Sequence[EpisodePlan]) -> dict[int, bool]:
        """Per group of ``plans`` (reaching the learner now): does it straddle a change point?"""
        return {plan.group_id: self.ctx.planner.straddles(plan) for plan in plans}

    def train_on(
        self,
        trajectories: Sequence[Trajectory],
        straddles: dict[int, bool],
        extra: dict[str, float] | None = None,
    ) -> dict[str, float]:
        learner = self.ctx.learner
        trained_version = learner.version
        now = self.wall_time()
        first_episode = self.episodes_logged
        rows = []
        for trajectory in trajectories:
            rows.append(
                episode_record(
                    self.ctx.config,
                    trajectory,
                    self.episodes_logged,
                    trained_version=trained_version,
                    straddles_change=straddles.get(trajectory.group_id, False),
                    wall_time=now,
                    finished_time=self.elapsed_before + trajectory.finished_at - self.started,
                )
            )
            self.episodes_logged += 1
        self.log.log("episodes", rows)
        step_started, real_step_started = self.clock.now(), time.time()
        metrics = learner.step(trajectories)
        real_learner_seconds = time.time() - real_step_started
        # What a cost model of the learner is fitted from (sao-online sim fit).
        metrics["charts/batch_tokens"] = float(sum(len(t.tokens) for t in trajectories))
        metrics["charts/learner_policy_seconds"] = learner.lane_seconds["policy"]
        metrics["charts/learner_critic_seconds"] = learner.lane_seconds["critic"]
        if self.after_learner_step is not None:
            self.after_learner_step(trajectories, metrics)
        # The counting clocks move with training, so a checkpoint's clock counts exactly what it
        # trained on (episodes finished but not trained yet are run again by a resumed session).
        if isinstance(self.ctx.clock, VersionClock):
            self.ctx.clock.set(learner.version)
        elif isinstance(self.ctx.clock, StepClock):
            self.ctx.clock.advance(sum(t.env_steps for t in trajectories))
        metrics.update(
            batch_metrics(trajectories, trained_version, self.ctx.config.runtime.max_staleness)
        )
        self.tokens += sum(t.num_action_tokens for t in trajectories)
        metrics.update(
            {
                "version": learner.version,
                "episodes_seen": self.episodes_logged,
                "wall_time": self.wall_time(),
                "charts/learner_seconds": self.clock.now() - step_started,
                "charts/action_tokens_total": float(self.tokens),
                **(extra or {}),
            }
        )
        if self.simulated:
            metrics["sim/learner_real_seconds"] = real_learner_seconds
            metrics["sim/real_seconds"] = self.real_time()
        self.log.log("updates", metrics)
        if self.transcripts is not None:
            self.transcripts.add(trajectories, first_episode)
        for tracker in self.trackers:
            tracker.log_update(metrics, trajectories, step=learner.version)
        self.evaluator.collect(self.log)
        self.evaluator.maybe_submit(learner.version, self.ctx.planner.now())
        if self.progress:
            self.progress(len(trajectories))
        if self.stop_requested.is_set():
            raise RunInterrupted
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {
            "learner": self.ctx.learner.state_dict(),
            "planner": self.ctx.planner.state_dict(),
            "episodes_logged": self.episodes_logged,
            "wall_time": self.wall_time(),
            "real_time": self.real_time(),
            "tokens": self.tokens,
            "clock": self.ctx.clock.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ctx.learner.load_state_dict(state["learner"])
        self.ctx.planner.load_state_dict(state["planner"])
        self.episodes_logged = state["episodes_logged"]
        if self.simulated:  # virtual seconds go on from the checkpoint's reading, exactly
            self.clock.advance_to(state["wall_time"])
            self.elapsed_before, self.started = 0.0, 0.0
        else:
            self.elapsed_before = state["wall_time"]
            self.started = self.clock.now()
        self.real_elapsed_before = state.get("real_time", state["wall_time"])
        self.real_started = time.time()
        self.tokens = state["tokens"]
        if "clock" in state:
            self.ctx.clock.load_state_dict(state["clock"])

    def checkpoint(self, extra: dict[str, Any] | None = None) -> None:
        self.evaluator.collect(self.log, wait=True)  # evals up to here belong to this checkpoint
        self._write_decode_rounds()
        self.log.save_checkpoint(self.ctx.learner.version, {**self.state_dict(), **(extra or {})})

    def finish(self) -> None:
        """Wait for running evaluations, write every buffered record and the staleness histogram
        of the whole run (``staleness_histogram.csv``; per update: ``staleness/count_k``)."""
        self.evaluator.close(self.log)
        self.log.flush()
        for tracker in self.trackers:
            tracker.close()
        self._write_decode_rounds()
        histogram = staleness_histogram(self.log.read("episodes"))
        write_text_atomically(
            self.log.path / STALENESS_HISTOGRAM_FILE, histogram.to_csv(index=False)
        )

    def _write_decode_rounds(self) -> None:
        """Append the decoding rounds reported since the last write to ``DECODE_ROUNDS_FILE``."""
        if not self.decode_rounds:
            return
        path = self.log.path / DECODE_ROUNDS_FILE
        rows = pd.DataFrame(self.decode_rounds, columns=list(DECODE_ROUND_COLUMNS))
        rows.to_csv(path, mode="a", header=not path.exists(), index=False)
        self.decode_rounds = []

    def checkpoint_due(self) -> bool:
        every = self.ctx.config.logging.checkpoint_every
        return bool(every) and self.ctx.learner.version % every == 0
