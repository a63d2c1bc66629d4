"""``sao-online bench throughput``: GRPO completions per second end to end, sync and local.

The workload is the one issue 4 sets a target for: GRPO with groups of 8, 64 completions per
update, completions capped at 32 tokens, the default model (random initialisation: the warm
start would add minutes of SFT and does not change the cost of a token), no simulated latency,
no KL term. Each backend runs the same config and budget in one process:

- ``sync`` generates a batch, trains on it, repeats, with ``threads`` torch threads;
- ``local`` runs one rollout-worker process (one torch thread) beside the learner (``threads``
  less the worker's, at least one), so generation and training overlap.

With ``peer="trl"`` the same workload also runs through Hugging Face TRL's ``GRPOTrainer`` in
the same process (see ``trl_peer``), with ``threads`` torch threads as the sync side. The
sides take turns: ``runs`` rounds, each running every side once, the order rotated from round
to round so that no side always runs first; each round gives one ratio per backend (ours over
TRL's completions per second), reported as the median and range over the rounds.

Where the time goes is split the same way on every side (:mod:`sao_online.perf.phases`):
generation, environment, the learner's forward, backward and optimizer phases, and the rest,
per update. For ``sync`` generation is the rollout engine's ``run`` less the environment calls
it made (the engine times each one), and environment also holds building each episode's
environment; for ``local`` generation and the environment run in the worker process, so the
learner process's split has only the learner's phases and the rest (waiting for the worker
included). ``ratio_to_peer_by_part`` is TRL's seconds per update over ours for each part.

``completions_per_second`` is the budget over the seconds ``run_experiment`` reports (from the
first rollout to the last update, worker start-up included, model construction excluded); the
steady-state rate from the first update to the last is reported beside it.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from sao_online.config import load_config
from sao_online.learning.learner import Learner
from sao_online.perf import THROUGHPUT_RUNS
from sao_online.perf.phases import (
    LEARNER_PHASES,
    PhaseClock,
    learner_hooks,
    patched,
    timed_call,
    timed_generator,
)
from sao_online.rollout import RolloutEngine
from sao_online.rundir.runlog import RunLog
from sao_online.runtime import envs
from sao_online.runtime.host.threads import usable_cores

TARGET_COMPLETIONS_PER_SECOND = 130.0
"""Issue 4's target for this workload on two cores (a widely used CPU trainer does ~65)."""
TARGET_RATIO_TO_PEER = 2.0
"""GRPO's target against TRL's ``GRPOTrainer`` on this workload: twice its completions/s."""

WORKLOAD = [
    "algorithm.name=grpo",
    "algorithm.group_size=8",
    "rollout.batch_size=64",
    "rollout.num_slots=64",
    "rollout.max_action_tokens=32",
    "model.warm_start=false",
    "env.latency_mean=0.0",
    "regularizers.kl_coef=0.0",
    "logging.checkpoint_every=0",
    "eval.every_updates=0",
]
BACKENDS = {
    "sync": ["runtime.backend=sync"],
    "local": ["runtime.backend=local", "runtime.num_workers=1"],
}


def _attaching(step: Callable[..., Any], attach: Callable[[torch.nn.Module], None]):
    """``Learner.step`` that first hooks the learner's policy (once per policy)."""

    @functools.wraps(step)
    def attached_step(learner: Learner, trajectories: Any) -> Any:
        attach(learner.policy)
        return step(learner, trajectories)

    return attached_step


@contextlib.contextmanager
def instrumented(clock: PhaseClock) -> Iterator[None]:
    """The suite's phases marked on ``clock``: the learner's passes on the learner's policy,
    the rollout engine's ``run`` as generation, building an episode's environment as
    environment."""
    with (
        learner_hooks(clock) as attach,
        patched(Learner, "step", lambda step: _attaching(step, attach)),
        patched(RolloutEngine, "run", lambda run: timed_generator(clock, "generation", run)),
        patched(envs, "make_env", lambda make: timed_call(clock, "environment", make)),
    ):
        yield


def measure(
    overrides: list[str], run_dir: Path, threads: int | None, *, split: bool = False
) -> dict[str, Any]:
    """One run of the workload; its throughput numbers (``threads`` None: the config's choice).

    With ``split`` the run is timed by phase (:func:`instrumented`) and ``split`` holds the
    seconds per update of each phase.
    """
    from sao_online.runtime.launch import run_experiment

    config = load_config(None, overrides)
    clock = PhaseClock()
    with instrumented(clock) if split else contextlib.nullcontext():
        clock.start()
        summary = run_experiment(config, run_dir, threads=threads)
        clock.stop()
    threads = summary["threads"]
    log = RunLog(run_dir)
    updates, episodes = log.read("updates"), log.read("episodes")
    completions = int((~episodes["dropped"]).sum())
    seconds = float(summary["seconds"])
    learner_seconds = updates["charts/learner_seconds"]
    # Steady state: the updates after the first, over the wall time between the first and last.
    steady_seconds = float(updates["wall_time"].iloc[-1] - updates["wall_time"].iloc[0])
    steady_updates = len(updates) - 1
    steady_completions = float(updates["episodes_seen"].iloc[-1] - updates["episodes_seen"].iloc[0])
    per_update = steady_seconds / steady_updates if steady_updates else float("nan")
    learner_per_update = float(learner_seconds.iloc[1:].mean()) if steady_updates else float("nan")
    result = {
        "completions": completions,
        "updates": int(summary["updates"]),
        "threads": threads,
        "seconds": round(seconds, 3),
        "completions_per_second": round(completions / max(seconds, 1e-9), 2),
        "steady_completions_per_second": round(steady_completions / max(steady_seconds, 1e-9), 2),
        "first_update_seconds": round(float(updates["wall_time"].iloc[0]), 3),
        "seconds_per_update": round(per_update, 4),
        "learner_seconds_per_update": round(learner_per_update, 4),
        "prompt_tokens": round(
            float((episodes["num_tokens"] - episodes["num_action_tokens"]).mean()), 2
        ),
        "mean_completion_tokens": round(float(episodes["num_action_tokens"].mean()), 2),
        "mean_episode_tokens": round(float(episodes["num_tokens"].mean()), 2),
    }
    if split:
        if config.runtime.backend == "sync":
            # The engine waited for these environment calls inside its run (it timed each).
            clock.move(float(episodes["env_seconds"].sum()), "generation", "environment")
            result["split"] = clock.split(seconds, result["updates"])
        else:  # generation and the environment ran in the worker process
            parts = clock.split(seconds, result["updates"])
            result["split"] = {name: parts[name] for name in (*LEARNER_PHASES, "other")}
    return result


def spread(values: list[float], digits: int = 3) -> dict[str, float]:
    """Median, least and greatest of ``values``.

    Example:
        >>> spread([2.0, 1.0, 4.0, 3.0])
        {'median': 2.5, 'min': 1.0, 'max': 4.0}
    """
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def _median_split(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        part: round(statistics.median(run["split"][part] for run in runs), 5)
        for part in runs[0]["split"]
    }


def _learner_seconds(split: dict[str, float]) -> float:
    return sum(split[part] for part in LEARNER_PHASES)


def _by_part(ours: list[dict[str, Any]], peers: list[dict[str, Any]]) -> dict[str, float | None]:
    """Median over the rounds of TRL's seconds per update over ours, per part (None where ours
    is zero)."""
    parts = list(ours[0]["split"]) + ["learner"]
    ratios: dict[str, float | None] = {}
    for part in parts:
        values = []
        for side, peer in zip(ours, peers):
            mine, theirs = (
                (_learner_seconds(side["split"]), _learner_seconds(peer["split"]))
                if part == "learner"
                else (side["split"][part], peer["split"][part])
            )
            if mine > 0:
                values.append(theirs / mine)
        ratios[part] = round(statistics.median(values), 3) if len(values) == len(ours) else None
    return ratios


def summarize(measured: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians and ranges over the rounds of ``measured`` (each side's runs, round by round)."""
    summary: dict[str, Any] = {
        "completions_per_second": {
            side: spread([run["completions_per_second"] for run in runs], digits=2)
            for side, runs in measured.items()
        },
        "split_per_update": {side: _median_split(runs) for side, runs in measured.items()},
    }
    medians = {side: rates["median"] for side, rates in summary["completions_per_second"].items()}
    summary["ratio_to_target"] = {
        side: round(medians[side] / TARGET_COMPLETIONS_PER_SECOND, 3) for side in ("sync", "local")
    }
    peers = measured.get("peer")
    if not peers:
        return summary
    summary["ratio_to_peer"] = {
        side: spread(
            [
                run["completions_per_second"] / peer["completions_per_second"]
                for run, peer in zip(measured[side], peers)
            ]
        )
        for side in ("sync", "local")
    }
    summary["ratio_to_peer_by_part"] = _by_part(measured["sync"], peers)
    # What the ratio could reach if everything but the learner's passes took no time.
    summary["ratio_limit_learner_only"] = round(
        statistics.median(
            peer["seconds"] / peer["updates"] / _learner_seconds(run["split"])
            for run, peer in zip(measured["sync"], peers)
        ),
        3,
    )
    return summary


def run_throughput_benchmark(
    quick: bool = False,
    *,
    episodes: int | None = None,
    overrides: list[str] | None = None,
    peer: str | None = None,
    runs: int = THROUGHPUT_RUNS,
    threads: int | None = None,
) -> dict[str, Any]:
    """Run the GRPO throughput workload with the sync and the local backend, ``runs`` times.

    Args:
        quick: 320 episodes (5 updates) per run instead of 1,280 (20 updates).
        episodes: override the episode budget (a multiple of 64 unless the batch is changed).
        overrides: extra ``KEY=VALUE`` config overrides applied last (tests shrink the model).
        peer: ``"trl"`` also runs TRL's ``GRPOTrainer`` on the same workload each round (needs
            the ``trl`` extra) and adds the ratios to it.
        runs: rounds; each runs every side once, in an order rotated from round to round.
        threads: torch threads of the sync side and of TRL; the local learner gets one less
            (at least one) beside its one-thread worker. None: the usable cores.

    Returns:
        The workload, the threads per side, ``runs`` (each side's runs in round order: its
        numbers and, per update, ``split``), and over the rounds: ``completions_per_second``
        (median, min, max per side), ``split_per_update`` (medians), ``ratio_to_target``;
        with the peer ``ratio_to_peer`` (median, min, max of the rounds' ratios per backend),
        ``ratio_to_peer_by_part`` (sync against TRL), ``ratio_limit_learner_only`` (TRL's
        seconds per update over the sync learner's phases: the ratio if nothing else took
        time) and ``target_ratio_to_peer``.
    """
    if peer not in (None, "trl"):
        raise ValueError(f"bench throughput: unknown peer {peer!r}; the only peer is 'trl'")
    if runs < 1:
        raise ValueError(f"bench throughput: runs must be >= 1, got {runs}")
    threads = threads or usable_cores()
    if threads < 1:
        raise ValueError(f"bench throughput: threads must be >= 1, got {threads}")
    budget = episodes if episodes is not None else (320 if quick else 1280)
    config_overrides = WORKLOAD + [f"budget.episodes={budget}"] + list(overrides or [])
    side_threads = {"sync": threads, "local": max(1, threads - 1)}
    sides = ["sync", "local"] + (["peer"] if peer else [])
    measured: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    orders = [sides[r % len(sides) :] + sides[: r % len(sides)] for r in range(runs)]
    if peer == "trl":
        from sao_online.perf.trl_peer import import_trl, run_trl_grpo

        import_trl()  # before any run: a missing extra fails at once
    threads_before = torch.get_num_threads()
    try:
        with tempfile.TemporaryDirectory(prefix="sao-bench-throughput-") as folder:
            for round_number, order in enumerate(orders):
                for side in order:
                    if side == "peer":
                        config = load_config(None, config_overrides)
                        measured[side].append(run_trl_grpo(config, budget, threads))
                        continue
                    measured[side].append(
                        measure(
                            config_overrides + BACKENDS[side],
                            Path(folder) / f"{side}-{round_number}",
                            threads=side_threads[side],
                            split=True,
                        )
                    )
    finally:
        torch.set_num_threads(threads_before)
    result: dict[str, Any] = {
        "workload": {
            "method": "grpo",
            "group_size": 8,
            "completions_per_update": 64,
            "max_completion_tokens": 32,
            "episodes": budget,
            "cores": usable_cores(),
            "model": "default tiny policy, random init (no warm start)",
            "overrides": list(overrides or []),
        },
        "threads": {
            "sync": threads,
            "local": {"learner": side_threads["local"], "rollout_worker": 1},
            **({"peer": threads} if peer else {}),
        },
        "rounds": runs,
        "order": orders,
        "target_completions_per_second": TARGET_COMPLETIONS_PER_SECOND,
        **({"target_ratio_to_peer": TARGET_RATIO_TO_PEER} if peer else {}),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **summarize(measured),
        "runs": measured,
    }
    return result
