"""``sao-online bench learner``: seconds per learner update of each method, side by side.

The workload is the demo's (``configs/demo.yaml``: the 4 x 128 byte-level Llama from its warm
start, built first when it is not cached yet, StyleShift, 32 episodes per update of at most 48
action tokens, KL 0.3 to the warm start) and its four methods. For each method the bench
samples ``batches`` batches with the method's own rollout (groups of 8 for the group methods,
one rollout per prompt for the others), then times
``Learner.step`` on them, the methods taking turns batch by batch so that a change of load on
the machine hits every method alike. Every learner starts past SAO's critic warm-up, so each
update trains the policy; the updates keep training the models, as in a run.

SAO runs twice: with its critic in a thread beside the policy (what runs use) and with the
critic's work in line before the policy's (``sao_critic_in_line``). For each SAO row the bench
also reports the seconds of each lane (``critic``: value pass and K updates; ``policy``:
reference and policy forward passes, loss, step). Overlapped, an update cannot take less than
the critic lane, so ``critic_lane_over_running_mean`` is the floor of SAO's ratio to
``sao_running_mean`` on this machine: a miss of the target can be read off against it.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from sao_online.config import load_config
from sao_online.learning.types import Trajectory
from sao_online.runtime.context import RunContext
from sao_online.runtime.envs import plan_to_request

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
METHODS = ("sao", "sao_running_mean", "grpo_dis", "grpo")
IN_LINE = "sao_critic_in_line"
TARGET_RATIO = 1.3
"""SAO's seconds per update over ``sao_running_mean``'s that the benchmark aims at."""


def _sample_batches(ctx: RunContext, count: int) -> list[list[Trajectory]]:
    config = ctx.config
    batches = []
    with ctx.make_engine(num_slots=config.rollout.batch_size) as engine:
        for _ in range(count):
            plans = []
            while len(plans) < config.rollout.batch_size:
                plans.extend(ctx.planner.next_group())
            requests = iter([plan_to_request(config, plan) for plan in plans])
            batches.append(list(engine.run(lambda pending=requests: next(pending, None))))
    return batches


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def run_learner_benchmark(
    config_path: str | Path | None = None,
    *,
    methods: tuple[str, ...] = METHODS,
    batches: int = 4,
    rounds: int = 3,
    overrides: list[str] | None = None,
    num_threads: int | None = 1,
    quick: bool = False,
) -> dict[str, Any]:
    """Times ``Learner.step`` of each method on the same config, turn by turn in one run.

    Args:
        config_path: the experiment config; the demo's when None.
        methods: the methods to time; ``sao`` also adds ``sao_critic_in_line``.
        batches: batches sampled per method (each timed once per round).
        rounds: passes over the batches; every update is one sample.
        overrides: ``KEY=VALUE`` config overrides applied last.
        num_threads: torch threads (restored afterwards; None leaves them). SAO's two lanes
            each get half of them (at least one) while both run.
        quick: a smoke-sized run (no warm start, 2 batches, 1 round); its numbers mean nothing.

    Returns:
        A JSON-able dict: ``workload``, ``per_method`` (``seconds_per_update`` median wall
        time, ``cpu_seconds_per_update`` median CPU time of every thread the step used, the
        mean, the samples, ``batch_tokens``; for the SAO rows each lane's wall and CPU seconds
        and ``critical_path_cpu_seconds``, the longer of the two threads' CPU time),
        ``ratio_to_running_mean`` and ``cpu_ratio_to_running_mean`` (each method over
        ``sao_running_mean``), ``sao`` (the target, SAO's ratios overlapped and in line, the
        overlap's gain, the critic lane's floor, and the critical path's CPU ratio: what a
        machine with a free core for the critic would show), ``load_average`` before and
        after, and ``machine``.

    Raises:
        ValueError: an unknown method, or ``batches`` / ``rounds`` below 1.
    """
    if batches < 1 or rounds < 1:
        raise ValueError(f"bench learner: batches and rounds must be >= 1, got {batches}, {rounds}")
    unknown = [name for name in methods if name not in METHODS]
    if unknown:
        raise ValueError(f"bench learner: unknown method(s) {unknown}; known: {list(METHODS)}")
    extra = list(overrides or [])
    if quick:
        batches, rounds = min(batches, 2), 1
        extra = ["model.warm_start=false", *extra]
    load_before = os.getloadavg()
    threads_before = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        learners, samples = _prepare(config_path, methods, batches, extra)
        timings = {name: _Timings() for name in learners}
        for _ in range(rounds):
            for index in range(batches):
                for name, (learner, method_batches) in learners.items():
                    timings[name].time_step(learner, method_batches[index])
        for learner, _ in learners.values():
            learner.close()
    finally:
        torch.set_num_threads(threads_before)
    per_method = {name: timing.summary(samples[name]) for name, timing in timings.items()}
    result: dict[str, Any] = {
        "workload": {
            "config": str(config_path or "configs/demo.yaml"),
            "overrides": extra,
            "methods": list(per_method),
            "batches": batches,
            "rounds": rounds,
            "quick": quick,
        },
        "per_method": per_method,
    }
    if "sao_running_mean" in per_method:
        base = per_method["sao_running_mean"]
        result["ratio_to_running_mean"] = {
            name: round(row["seconds_per_update"] / base["seconds_per_update"], 3)
            for name, row in per_method.items()
        }
        result["cpu_ratio_to_running_mean"] = {
            name: round(row["cpu_seconds_per_update"] / base["cpu_seconds_per_update"], 3)
            for name, row in per_method.items()
        }
        if "sao" in per_method:
            result["sao"] = _sao_summary(per_method, result, base)
    result["load_average"] = {
        "before": [round(value, 2) for value in load_before],
        "after": [round(value, 2) for value in os.getloadavg()],
    }
    result["machine"] = {
        "cores": os.cpu_count(),
        "torch_threads": num_threads if num_threads is not None else threads_before,
        "torch": torch.__version__,
        "processor": platform.processor() or platform.machine(),
    }
    result["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return result


class _Timings:
    """Wall and CPU seconds of one learner's steps (CPU: the calling thread's plus, for an
    overlapped critic, its lane's thread's)."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.lanes: dict[str, list[float]] = {
            f"{lane}_lane_{kind}": []
            for lane in ("critic", "policy")
            for kind in ("seconds", "cpu_seconds")
        }
        self.critical_path_cpu: list[float] = []

    def time_step(self, learner: Any, batch: list[Trajectory]) -> None:
        started, cpu_started = time.perf_counter(), time.thread_time()
        learner.step(batch)
        self.wall.append(time.perf_counter() - started)
        caller_cpu = time.thread_time() - cpu_started
        if not learner.method.uses_critic:
            self.cpu.append(caller_cpu)
            return
        for lane in ("critic", "policy"):
            self.lanes[f"{lane}_lane_seconds"].append(learner.lane_seconds[lane])
            self.lanes[f"{lane}_lane_cpu_seconds"].append(learner.lane_cpu_seconds[lane])
        critic_cpu = learner.lane_cpu_seconds["critic"]
        if learner.overlap_critic:
            # Everything else ran on the calling thread: with a core each, the step would take
            # the longer of the two threads' CPU time.
            self.cpu.append(caller_cpu + critic_cpu)
            self.critical_path_cpu.append(max(caller_cpu, critic_cpu))
        else:
            self.cpu.append(caller_cpu)
            self.critical_path_cpu.append(caller_cpu)

    def summary(self, batch_tokens: list[int]) -> dict[str, Any]:
        row: dict[str, Any] = {
            "seconds_per_update": _median(self.wall),
            "cpu_seconds_per_update": _median(self.cpu),
            "mean_seconds_per_update": round(statistics.fmean(self.wall), 4),
            "samples": [round(value, 4) for value in self.wall],
            "batch_tokens": batch_tokens,
        }
        if self.critical_path_cpu:
            row.update({name: _median(values) for name, values in self.lanes.items()})
            row["critical_path_cpu_seconds"] = _median(self.critical_path_cpu)
        return row


def _sao_summary(
    per_method: dict[str, Any], result: dict[str, Any], base: dict[str, Any]
) -> dict[str, Any]:
    sao, in_line = per_method["sao"], per_method[IN_LINE]
    base_cpu = base["cpu_seconds_per_update"]
    return {
        "target_ratio_to_running_mean": TARGET_RATIO,
        "ratio_to_running_mean": result["ratio_to_running_mean"]["sao"],
        "in_line_ratio_to_running_mean": result["ratio_to_running_mean"][IN_LINE],
        "overlap_speedup": round(in_line["seconds_per_update"] / sao["seconds_per_update"], 3),
        # Overlapped, an update takes at least its critic lane: the floor of the ratio.
        "critic_lane_over_running_mean": round(
            sao["critic_lane_seconds"] / base["seconds_per_update"], 3
        ),
        # The same from CPU time, which a busy machine disturbs far less than wall time: the
        # ratio where the critic's thread has a core of its own.
        "critical_path_cpu_over_running_mean": round(
            sao["critical_path_cpu_seconds"] / base_cpu, 3
        ),
        "critic_lane_cpu_over_running_mean": round(sao["critic_lane_cpu_seconds"] / base_cpu, 3),
        "in_line_cpu_over_running_mean": round(in_line["cpu_seconds_per_update"] / base_cpu, 3),
    }


def _prepare(
    config_path: str | Path | None, methods: tuple[str, ...], batches: int, overrides: list[str]
) -> tuple[dict[str, tuple[Any, list[list[Trajectory]]]], dict[str, list[int]]]:
    """Each timed variant's learner (past the critic's warm-up) and its batches."""
    path = DEMO_CONFIG if config_path is None else Path(config_path)
    learners: dict[str, tuple[Any, list[list[Trajectory]]]] = {}
    for name in methods:
        config = load_config(path, [f"algorithm.name={name}", *overrides])
        ctx = RunContext.build(config)
        method_batches = _sample_batches(ctx, batches)
        ctx.learner.version = config.algorithm.critic_warmup_steps
        learners[name] = (ctx.learner, method_batches)
        if name == "sao":
            in_line = RunContext.build(config).learner
            in_line.overlap_critic = False
            in_line.version = config.algorithm.critic_warmup_steps
            learners[IN_LINE] = (in_line, method_batches)
    tokens = {
        name: [sum(len(trajectory.tokens) for trajectory in batch) for batch in method_batches]
        for name, (_, method_batches) in learners.items()
    }
    return learners, tokens
