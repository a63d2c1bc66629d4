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

Under a tight staleness bound the learner waits for the latency tail: an episode admitted
``max_staleness`` updates ago must be trained before the next step. The bench runs the local
backend once per way of handling such stragglers (``runtime.stragglers`` and
``runtime.staleness_from``) at the workload's bound, side by side against the same sync run, and
reports for each how busy the learner was, why it waited, what the requeued stragglers cost
(episodes run again, the action tokens and env seconds they had spent) and the largest token
staleness trained on.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sao_online.config import RuntimeConfig, load_config
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


#: (runtime.stragglers, runtime.staleness_from) pairs the bench compares at the workload's
#: bound: the learner waits for stragglers counted from their admission, or from the weights
#: their tokens were sampled with, or it requeues them.
STRAGGLER_OPTIONS: tuple[tuple[str, str], ...] = (
    ("wait", "admission"),
    ("wait", "tokens"),
    ("requeue", "tokens"),
)
_DEFAULT_OPTION = (
    RuntimeConfig.model_fields["stragglers"].default,
    RuntimeConfig.model_fields["staleness_from"].default,
)


def _measure(overrides: list[str], run_dir: Path) -> dict[str, Any]:
    from sao_online.runtime.launch import run_experiment

    load_before = os.getloadavg()[0]
    began = time.time()
    summary = run_experiment(load_config(None, overrides), run_dir, threads=1)
    seconds = time.time() - began
    load_after = os.getloadavg()[0]
    log = RunLog(run_dir)
    updates, episodes = log.read("updates"), log.read("episodes")
    first, last = updates.iloc[0], updates.iloc[-1]
    trained, dropped = episodes[~episodes["dropped"]], episodes[episodes["dropped"]]
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
    # What stragglers stopped and run again (runtime.stragglers: requeue) had spent.
    wasted_tokens = int(dropped["num_action_tokens"].sum())
    spent_tokens = wasted_tokens + int(trained["num_action_tokens"].sum())
    started_late = "charts/episodes_started_after_admission"
    return {
        "episodes": int((~episodes["dropped"]).sum()),
        "updates": int(summary["updates"]),
        "load_average_1min": [round(load_before, 2), round(load_after, 2)],
        "seconds": round(seconds, 2),
        "first_update_seconds": round(float(first["wall_time"]), 2),
        "steady_seconds": round(window, 3),
        "episodes_per_second": round(steady_episodes / max(window, 1e-9), 3),
        "episodes_per_second_end_to_end": round(len(episodes) / max(seconds, 1e-9), 3),
        "learner_seconds": round(learner_seconds, 3),
        "learner_busy_fraction": round(learner_seconds / max(window, 1e-9), 3),
        # Against the env latency tail, what decides whether the bound holds the learner back.
        "learner_seconds_per_update": round(learner_seconds / max(len(updates) - 1, 1), 3),
        # A trained episode's staleness is the trained version minus its oldest token's.
        "max_token_staleness": int(trained["staleness"].max()),
        "mean_staleness": round(float(trained["staleness"].mean()), 3),
        "mean_env_seconds_per_episode": round(float(trained["env_seconds"].mean()), 3),
        **waits,
        "dropped_episodes": len(dropped),
        "requeued_stale": int((dropped["dropped_reason"] == "stale").sum()),
        "wasted_action_tokens": wasted_tokens,
        "wasted_action_token_share": round(wasted_tokens / max(spent_tokens, 1), 4),
        "wasted_env_seconds": round(float(dropped["env_seconds"].sum()), 3),
        "episodes_started_after_admission": (
            int(updates[started_late].sum()) if started_late in updates else 0
        ),
    }


def run_async_benchmark(
    quick: bool = False,
    *,
    episodes: int | None = None,
    ray: bool = True,
    max_staleness: Sequence[int] | None = None,
    straggler_options: Sequence[tuple[str, str]] | None = None,
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
        straggler_options: ``(runtime.stragglers, runtime.staleness_from)`` pairs to run the
            local backend with at the workload's bound (None: ``STRAGGLER_OPTIONS``). The
            config's defaults are always run (that run is ``async``); each other pair adds one.

    Returns:
        ``speedup`` (async over sync steady-state episodes per second),
        ``learner_busy_fraction`` (async learner compute seconds over async wall seconds in
        steady state), ``max_staleness``, ``max_token_staleness`` (the largest trained version
        minus token version over every asynchronous run) and the raw numbers of each run under
        ``sync`` and ``async``; with Ray also ``speedup_ray``, ``learner_busy_fraction_ray`` and
        ``ray``; ``local_by_max_staleness``: per bound, the local run's ratios to the same sync
        run, busy fraction, the share of the time its learner was held back by the bound, and
        staleness; ``by_straggler_option``: per straggler option, the same plus what requeued
        stragglers cost (``requeued_stale`` episodes run again, ``wasted_action_tokens`` and its
        share of all action tokens sampled, ``wasted_env_seconds``) and
        ``episodes_started_after_admission`` (trained episodes whose tokens are all newer than
        their admission: the only ones counting by tokens can help). Asynchronous runs also
        report ``learner_wait_bound_fraction`` and ``learner_wait_episodes_fraction``: the
        shares of the steady-state time the learner waited because of the bound, or for
        episodes; every run reports its learner's seconds per steady-state update and the
        1-minute load average before and after it.

    Raises:
        ValueError: an empty or negative ``max_staleness``, or an unknown straggler option.
    """
    bounds = list(max_staleness) if max_staleness is not None else [4]
    if not bounds or any(not isinstance(bound, int) or bound < 0 for bound in bounds):
        raise ValueError(
            f"bench async: max_staleness must be one or more ints >= 0, got {max_staleness!r}"
        )
    options = list(straggler_options) if straggler_options is not None else STRAGGLER_OPTIONS
    for option in options:
        if tuple(option) not in _KNOWN_OPTIONS:
            raise ValueError(
                f"bench async: straggler option {option!r} is not one of "
                f"{sorted(_KNOWN_OPTIONS)} (runtime.stragglers, runtime.staleness_from)"
            )
    options = [_DEFAULT_OPTION] + [
        tuple(option) for option in dict.fromkeys(map(tuple, options)) if option != _DEFAULT_OPTION
    ]
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
        by_option = {_DEFAULT_OPTION: asynchronous}
        for stragglers, staleness_from in options[1:]:
            by_option[stragglers, staleness_from] = _measure(
                bounded
                + [
                    "runtime.backend=local",
                    f"runtime.stragglers={stragglers}",
                    f"runtime.staleness_from={staleness_from}",
                ],
                Path(folder) / f"async-{stragglers}-{staleness_from}",
            )
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
        "max_token_staleness": max(run["max_token_staleness"] for run in by_option.values()),
        "sync": sync,
        "async": asynchronous,
        "by_straggler_option": [
            {
                "stragglers": stragglers,
                "staleness_from": staleness_from,
                "speedup": _ratio(run["episodes_per_second"], sync["episodes_per_second"]),
                "speedup_end_to_end": _ratio(
                    run["episodes_per_second_end_to_end"], sync["episodes_per_second_end_to_end"]
                ),
                **{key: run[key] for key in _OPTION_FIELDS},
            }
            for (stragglers, staleness_from), run in by_option.items()
        ],
        "local_by_max_staleness": [
            {
                "max_staleness": bound,
                "speedup": _ratio(run["episodes_per_second"], sync["episodes_per_second"]),
                "speedup_end_to_end": _ratio(
                    run["episodes_per_second_end_to_end"], sync["episodes_per_second_end_to_end"]
                ),
                "learner_busy_fraction": run["learner_busy_fraction"],
                "learner_wait_bound_fraction": run.get("learner_wait_bound_fraction"),
                "max_token_staleness": run["max_token_staleness"],
                "mean_staleness": run["mean_staleness"],
                "learner_seconds_per_update": run["learner_seconds_per_update"],
                "load_average_1min": run["load_average_1min"],
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
                "max_token_staleness": max(
                    result["max_token_staleness"], on_ray["max_token_staleness"]
                ),
                "ray": on_ray,
            }
        )
    return result


_KNOWN_OPTIONS = {
    (stragglers, staleness_from)
    for stragglers in ("wait", "requeue")
    for staleness_from in ("admission", "tokens")
}
_OPTION_FIELDS = (
    "learner_busy_fraction",
    "learner_seconds_per_update",
    "learner_wait_bound_fraction",
    "learner_wait_episodes_fraction",
    "requeued_stale",
    "dropped_episodes",
    "wasted_action_tokens",
    "wasted_action_token_share",
    "wasted_env_seconds",
    "episodes_started_after_admission",
    "max_token_staleness",
    "mean_staleness",
    "load_average_1min",
)


def _ratio(numerator: float, denominator: float) -> float:
    return round(numerator / max(denominator, 1e-9), 3)
