"""``sao-online bench simulated``: what the simulated runtime costs in real time, against sync.

The simulated runtime samples and trains on the same kind of tokens as the synchronous one, with
the same model, environments and learner, in one process; on top it keeps a virtual clock, an
event queue, one copy of the policy per simulated worker and the weights of the versions still
readable. This bench runs one config both ways, alternating, several times, each on one torch
thread, and reports the real seconds per episode and per thousand action tokens of each, their
ratio (target: at most ``TARGET_RATIO``), and how the seconds split between the learner and the
rest (rollouts and everything around them). Environments are free (no simulated latency): the
synchronous run would sleep through it, the simulated one only counts it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sao_online.config import load_config

#: The simulated runtime's real cost per episode may be at most this many times sync's.
TARGET_RATIO = 1.3

_COMMON = [
    "env.id=sao_online/StyleShift-v0",
    "env.latency_mean=0",
    "model.warm_start=false",
    "rollout.batch_size=16",
    "rollout.num_slots=16",
    "rollout.max_turns=1",
    "rollout.max_action_tokens=32",
    "rollout.max_episode_tokens=192",
    "algorithm.critic_warmup_steps=0",
    "runtime.torch_threads=1",
    "runtime.num_workers=2",
    "runtime.max_staleness=4",
    "eval.every_updates=0",
    "logging.checkpoint_every=0",
    "logging.transcripts_every=0",
]


def _one_run(backend: str, episodes: int, folder: Path) -> dict[str, Any]:
    from sao_online.rundir.runlog import RunLog
    from sao_online.runtime.launch import run_experiment

    config = load_config(
        None, [*_COMMON, f"runtime.backend={backend}", f"budget.episodes={episodes}"]
    )
    started = time.perf_counter()
    run_experiment(config, folder / backend, overwrite=True)
    seconds = time.perf_counter() - started
    log = RunLog(folder / backend)
    updates, trained = log.read("updates"), log.read("episodes")
    learner = "sim/learner_real_seconds" if backend == "simulated" else "charts/learner_seconds"
    tokens = int(trained["num_action_tokens"].sum())
    return {
        "backend": backend,
        "seconds": seconds,
        "episodes": len(trained),
        "action_tokens": tokens,
        "seconds_per_episode": seconds / len(trained),
        "seconds_per_1k_tokens": 1000 * seconds / tokens,
        "learner_seconds": float(updates[learner].sum()),
        "other_seconds": seconds - float(updates[learner].sum()),
    }


def run_simulated_benchmark(quick: bool = False, repeats: int = 3) -> dict[str, Any]:
    """Sync and simulated runs of one config, alternating ``repeats`` times each.

    Returns:
        ``runs`` (each run's seconds, episodes, action tokens and learner / other seconds),
        the medians per backend, ``ratio_per_episode`` and ``ratio_per_1k_tokens`` (simulated
        over sync, of the medians; ``range_per_episode``: over the pairs), ``target`` and
        ``meets_target``.
    """
    if repeats < 1:
        raise ValueError(f"bench simulated: repeats must be >= 1, got {repeats}")
    episodes = 64 if quick else 320
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sao-bench-sim-") as folder:
        for _ in range(repeats):
            for backend in ("sync", "simulated"):
                runs.append(_one_run(backend, episodes, Path(folder)))

    def median(backend: str, key: str) -> float:
        return statistics.median(run[key] for run in runs if run["backend"] == backend)

    pairs = [
        simulated["seconds_per_episode"] / sync["seconds_per_episode"]
        for sync, simulated in zip(runs[::2], runs[1::2], strict=True)
    ]
    per_episode = median("simulated", "seconds_per_episode") / median("sync", "seconds_per_episode")
    return {
        "bench": "simulated",
        "workload": {"episodes": episodes, "repeats": repeats, "overrides": _COMMON},
        "runs": runs,
        "median": {
            backend: {
                key: median(backend, key)
                for key in ("seconds_per_episode", "seconds_per_1k_tokens", "learner_seconds")
            }
            for backend in ("sync", "simulated")
        },
        "ratio_per_episode": per_episode,
        "ratio_per_1k_tokens": median("simulated", "seconds_per_1k_tokens")
        / median("sync", "seconds_per_1k_tokens"),
        "range_per_episode": [min(pairs), max(pairs)],
        "target": TARGET_RATIO,
        "meets_target": per_episode <= TARGET_RATIO,
    }
