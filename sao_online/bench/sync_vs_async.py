"""``sao-online bench async``: synchronous vs asynchronous training under long-tail latency.

Both runs use the same tiny model, config, engine settings and episode budget; the environment
sleeps a lognormal time per step (``LatencyWrapper``), the regime where asynchrony pays off.
Both engines come from ``build_engine``, which steps environments in a thread per slot under
simulated latency, so a slow step stalls only its own episode on either side. What is left for
asynchrony to win: the synchronous run still waits for the slowest episode of every batch and
leaves the rollouts idle while the learner steps; the local backend overlaps the two and trains
on the first B episodes to complete.

When Ray is installed the same workload also runs on the ``ray`` backend (a private local Ray,
started and stopped inside its measurement: Ray's start-up shows in its end-to-end numbers).

Throughput is measured in steady state, from the first update to the last; worker start-up (a
few seconds of imports per process) shows in ``first_update_seconds`` and the end-to-end numbers.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sao_online.config import load_config
from sao_online.rundir.runlog import RunLog

# Long action caps: an untrained policy rarely emits its stop token, and an action cut at the
# cap ends the episode without an env step, so short caps would never pay the step latency.
_COMMON = [
    "model.warm_start=false",
    "model.num_layers=2",
    "model.hidden_size=64",
    "rollout.max_turns=1",
    "rollout.max_action_tokens=160",
    "rollout.max_episode_tokens=384",
    "algorithm.critic_warmup_steps=0",
    "logging.checkpoint_every=0",
]


def _measure(overrides: list[str], run_dir: Path) -> dict[str, Any]:
    from sao_online.runtime.launch import run_experiment

    began = time.time()
    summary = run_experiment(load_config(None, overrides), run_dir, threads=1)
    seconds = time.time() - began
    log = RunLog(run_dir)
    updates, episodes = log.read("updates"), log.read("episodes")
    first, last = updates.iloc[0], updates.iloc[-1]
    trained = episodes[~episodes["dropped"]]
    window = float(last["wall_time"] - first["wall_time"])
    steady_episodes = float(last["episodes_seen"] - first["episodes_seen"])
    learner_seconds = float(updates["charts/learner_seconds"].iloc[1:].sum())
    # The asynchronous runtime logs why its learner waited before each update (see
    # async_runtime): held back by the staleness bound with B episodes ready, or short of B.
    waits = {
        f"learner_wait_{cause}_fraction": round(
            float(updates[column].iloc[1:].sum()) / max(window, 1e-9), 3
        )
        for cause in ("bound", "episodes")
        if (column := f"charts/learner_wait_{cause}_seconds") in updates
    }
    return {
        "episodes": int((~episodes["dropped"]).sum()),
        "updates": int(summary["updates"]),
        "seconds": round(seconds, 2),
        "first_update_seconds": round(float(first["wall_time"]), 2),
        "steady_seconds": round(window, 2),
        "episodes_per_second": round(steady_episodes / max(window, 1e-9), 3),
        "episodes_per_second_end_to_end": round(len(episodes) / max(seconds, 1e-9), 3),
        "learner_seconds": round(learner_seconds, 3),
        "learner_busy_fraction": round(learner_seconds / max(window, 1e-9), 3),
        "max_staleness_observed": int(trained["staleness"].max()),
        "mean_staleness": round(float(trained["staleness"].mean()), 3),
        "mean_env_seconds_per_episode": round(float(trained["env_seconds"].mean()), 3),
        **waits,
    }


def run_async_benchmark(
    quick: bool = False,
    *,
    episodes: int | None = None,
    ray: bool = True,
    max_staleness: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Run the workload synchronously, with the local backend and (when installed) on Ray.

    Args:
        quick: a short run (under a minute on two cores) instead of the full one.
        episodes: override the workload's episode budget (tests use a tiny one).
        ray: also run the ``ray`` backend when the ray package is installed.
        max_staleness: staleness bounds to run the local backend at; the first is the
            workload's bound (all backends), each further one adds a local run. None: the
            workload's own (4). The learner waits whenever an episode admitted
            ``max_staleness`` updates ago is still running (or the bound refuses the step
            otherwise), so under a long latency tail the bound, not the hardware, can cap how
            busy it is: the sweep shows by how much.

    Returns:
        ``speedup`` (async over sync steady-state episodes per second),
        ``learner_busy_fraction`` (async learner compute seconds over async wall seconds in
        steady state), ``max_staleness``, ``max_staleness_observed`` (over every asynchronous
        run) and the raw numbers of each run under ``sync`` and ``async``; with Ray also
        ``speedup_ray``, ``learner_busy_fraction_ray`` and ``ray``; ``local_by_max_staleness``:
        per bound, the local run's ratios to the same sync run, busy fraction, the share of the
        time its learner was held back by the bound, and staleness. Asynchronous runs also
        report ``learner_wait_bound_fraction`` and ``learner_wait_episodes_fraction``: the
        shares of the steady-state time the learner waited because of the bound, or for
        episodes.

    Raises:
        ValueError: an empty or negative ``max_staleness``.
    """
    bounds = list(max_staleness) if max_staleness is not None else [4]
    if not bounds or any(not isinstance(bound, int) or bound < 0 for bound in bounds):
        raise ValueError(
            f"bench async: max_staleness must be one or more ints >= 0, got {max_staleness!r}"
        )
    # One worker: with environments stepped in threads a worker hides the latency of all its
    # slots, and on two cores a second worker only takes CPU from the learner (measured on the
    # full workload with 16 slots per worker: 1 worker 18.0 episodes/s, 2 workers 15.0, 4
    # workers 15.9; the worker's slots now cover the gate's (max_staleness + 1) * B: 30 / s).
    # Quick: worker start-up (about 4 s of imports) dominated 48 episodes (a 1.8 s steady
    # window, end-to-end speedup 1.0x); 128 keep the run well under a minute with a window that
    # says something.
    if quick:
        workload = {
            "episodes": 128,
            "batch_size": 8,
            "workers": 1,
            "max_staleness": bounds[0],
            "latency_mean": 0.3,
            "latency_sigma": 1.0,
        }
    else:
        workload = {
            "episodes": 384,
            "batch_size": 16,
            "workers": 1,
            "max_staleness": bounds[0],
            "latency_mean": 0.5,
            "latency_sigma": 1.0,
        }
    if episodes is not None:
        workload["episodes"] = episodes
    overrides = _COMMON + [
        f"budget.episodes={workload['episodes']}",
        f"rollout.batch_size={workload['batch_size']}",
        f"runtime.num_workers={workload['workers']}",
        f"env.latency_mean={workload['latency_mean']}",
        f"env.latency_sigma={workload['latency_sigma']}",
    ]
    with_ray = ray and importlib.util.find_spec("ray") is not None
    bounded = overrides + [f"runtime.max_staleness={bounds[0]}"]
    with tempfile.TemporaryDirectory(prefix="sao-bench-async-") as folder:
        sync = _measure(bounded + ["runtime.backend=sync"], Path(folder) / "sync")
        asynchronous = _measure(bounded + ["runtime.backend=local"], Path(folder) / "async")
        on_ray = None
        if with_ray:
            on_ray = _measure(bounded + ["runtime.backend=ray"], Path(folder) / "ray")
        local_runs = {bounds[0]: asynchronous}
        for bound in bounds[1:]:
            if bound not in local_runs:
                local_runs[bound] = _measure(
                    overrides + [f"runtime.max_staleness={bound}", "runtime.backend=local"],
                    Path(folder) / f"async-{bound}",
                )
    result = {
        "workload": workload,
        "speedup": _ratio(asynchronous["episodes_per_second"], sync["episodes_per_second"]),
        "speedup_end_to_end": _ratio(
            asynchronous["episodes_per_second_end_to_end"], sync["episodes_per_second_end_to_end"]
        ),
        "learner_busy_fraction": asynchronous["learner_busy_fraction"],
        "max_staleness": workload["max_staleness"],
        "max_staleness_observed": asynchronous["max_staleness_observed"],
        "sync": sync,
        "async": asynchronous,
        "local_by_max_staleness": [
            {
                "max_staleness": bound,
                "speedup": _ratio(run["episodes_per_second"], sync["episodes_per_second"]),
                "speedup_end_to_end": _ratio(
                    run["episodes_per_second_end_to_end"], sync["episodes_per_second_end_to_end"]
                ),
                "learner_busy_fraction": run["learner_busy_fraction"],
                "learner_wait_bound_fraction": run.get("learner_wait_bound_fraction"),
                "max_staleness_observed": run["max_staleness_observed"],
                "mean_staleness": run["mean_staleness"],
            }
            for bound, run in local_runs.items()
        ],
    }
    if on_ray is not None:
        result.update(
            {
                "speedup_ray": _ratio(on_ray["episodes_per_second"], sync["episodes_per_second"]),
                "speedup_ray_end_to_end": _ratio(
                    on_ray["episodes_per_second_end_to_end"], sync["episodes_per_second_end_to_end"]
                ),
                "learner_busy_fraction_ray": on_ray["learner_busy_fraction"],
                "max_staleness_observed": max(
                    asynchronous["max_staleness_observed"], on_ray["max_staleness_observed"]
                ),
                "ray": on_ray,
            }
        )
    return result


def _ratio(numerator: float, denominator: float) -> float:
    return round(numerator / max(denominator, 1e-9), 3)
