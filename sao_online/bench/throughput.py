"""``sao-online bench throughput``: GRPO completions per second end to end, sync and local.

The workload is the one issue 4 sets a target for: GRPO with groups of 8, 64 completions per
update, completions capped at 32 tokens, the default model (random initialisation: the warm
start would add minutes of SFT and does not change the cost of a token), no simulated latency,
no KL term. Both backends run the same config and budget in one process, one after the other:

- ``sync`` generates a batch, trains on it, repeats, with one torch thread per free core;
- ``local`` runs one rollout-worker process (one torch thread) beside the learner (the free
  cores less the worker's), so generation and training overlap.

Threads follow ``runtime.torch_threads=auto`` (see ``sao_online.runtime.host.threads``); each side
reports the number it chose. With ``peer="trl"`` the same workload also runs through Hugging
Face TRL's ``GRPOTrainer`` in the same process (see ``trl_peer``) and the ratios are reported.

``completions_per_second`` is the budget over the seconds ``run_experiment`` reports (from the
first rollout to the last update, worker start-up included, model construction excluded); the
steady-state rate from the first update to the last is reported beside it. Per update the
learner's step time is measured directly; for ``sync`` the rest of an update's wall time is
rollout (plus logging), for ``local`` it is the time the learner waited for the worker.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from sao_online.config import load_config
from sao_online.rundir.runlog import RunLog

TARGET_COMPLETIONS_PER_SECOND = 130.0
"""Issue 4's target for this workload on two cores (a widely used CPU trainer does ~65)."""

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


def measure(overrides: list[str], run_dir: Path, threads: int | None) -> dict[str, Any]:
    """One run of the workload; its throughput numbers (``threads`` None: the config's choice)."""
    from sao_online.runtime.launch import run_experiment

    summary = run_experiment(load_config(None, overrides), run_dir, threads=threads)
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
    return {
        "completions": completions,
        "updates": int(summary["updates"]),
        "threads": threads,
        "seconds": round(seconds, 3),
        "completions_per_second": round(completions / max(seconds, 1e-9), 2),
        "steady_completions_per_second": round(steady_completions / max(steady_seconds, 1e-9), 2),
        "first_update_seconds": round(float(updates["wall_time"].iloc[0]), 3),
        "seconds_per_update": round(per_update, 4),
        "learner_seconds_per_update": round(learner_per_update, 4),
        "mean_completion_tokens": round(float(episodes["num_action_tokens"].mean()), 2),
        "mean_episode_tokens": round(float(episodes["num_tokens"].mean()), 2),
    }


def run_throughput_benchmark(
    quick: bool = False,
    *,
    episodes: int | None = None,
    overrides: list[str] | None = None,
    peer: str | None = None,
) -> dict[str, Any]:
    """Run the GRPO throughput workload with the sync and the local backend.

    Args:
        quick: 320 episodes (5 updates) instead of 1,280 (20 updates); under a minute on two
            cores.
        episodes: override the episode budget (a multiple of 64 unless the batch is changed).
        overrides: extra ``KEY=VALUE`` config overrides applied last (tests shrink the model).
        peer: ``"trl"`` also runs TRL's ``GRPOTrainer`` on the same workload (needs the ``trl``
            extra) and adds ``peer`` and ``ratio_to_peer`` (ours over TRL's completions/s).

    Returns:
        ``completions_per_second`` and ``ratio_to_target`` per backend at the top level, the
        target, the workload, and under ``sync`` / ``local`` each backend's numbers:
        ``completions`` (equals the budget), ``seconds``, ``completions_per_second``,
        ``steady_completions_per_second``, ``seconds_per_update``,
        ``learner_seconds_per_update`` and ``rollout_seconds_per_update`` (sync: wall time of
        an update outside the learner step) or ``learner_wait_seconds_per_update`` (local: the
        learner waiting for the worker's next batch).
    """
    if peer not in (None, "trl"):
        raise ValueError(f"bench throughput: unknown peer {peer!r}; the only peer is 'trl'")
    budget = episodes if episodes is not None else (320 if quick else 1280)
    config_overrides = WORKLOAD + [f"budget.episodes={budget}"] + list(overrides or [])
    cores = os.cpu_count() or 1
    threads_before = torch.get_num_threads()
    try:
        with tempfile.TemporaryDirectory(prefix="sao-bench-throughput-") as folder:
            sync = measure(
                config_overrides + ["runtime.backend=sync"], Path(folder) / "sync", threads=None
            )
            local = measure(
                config_overrides + ["runtime.backend=local", "runtime.num_workers=1"],
                Path(folder) / "local",
                threads=None,
            )
    finally:
        torch.set_num_threads(threads_before)
    sync["rollout_seconds_per_update"] = round(
        sync["seconds_per_update"] - sync["learner_seconds_per_update"], 4
    )
    local["learner_wait_seconds_per_update"] = round(
        local["seconds_per_update"] - local["learner_seconds_per_update"], 4
    )
    result = {
        "workload": {
            "method": "grpo",
            "group_size": 8,
            "completions_per_update": 64,
            "max_completion_tokens": 32,
            "episodes": budget,
            "cores": cores,
            "model": "default tiny policy, random init (no warm start)",
            "overrides": list(overrides or []),
        },
        "target_completions_per_second": TARGET_COMPLETIONS_PER_SECOND,
        "completions_per_second": {
            "sync": sync["completions_per_second"],
            "local": local["completions_per_second"],
        },
        "ratio_to_target": {
            name: round(side["completions_per_second"] / TARGET_COMPLETIONS_PER_SECOND, 3)
            for name, side in (("sync", sync), ("local", local))
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sync": sync,
        "local": local,
    }
    if peer == "trl":
        from sao_online.bench.trl_peer import run_trl_grpo

        config = load_config(None, config_overrides)
        torch.set_num_threads(sync["threads"])  # the threads our sync side chose
        try:
            result["peer"] = run_trl_grpo(config, episodes=budget)
        finally:
            torch.set_num_threads(threads_before)
        peer_rate = result["peer"]["completions_per_second"]
        result["ratio_to_peer"] = {
            name: round(side["completions_per_second"] / peer_rate, 3)
            for name, side in (("sync", sync), ("local", local))
        }
    return result
