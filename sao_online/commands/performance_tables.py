"""The renderers of ``docs/performance.md`` and its appendix: a kept result in, Markdown out.

Each takes one kept result (the JSON file's content: ``command``, ``load`` and ``result``, or
``runs`` of several) and returns the text between a block's markers: the table and the lines
under it. ``sao_online.commands.performance_page`` names which block each renders.
"""

from __future__ import annotations

import statistics
from typing import Any


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _provenance(kept: dict[str, Any]) -> str:
    return f"\nCommand: `{kept['command']}`; {kept['load']}.\n"


def _x(value: float) -> str:
    return f"{value:.2f}x"


def learner_table(kept: dict[str, Any]) -> str:
    result = kept["result"]
    wall, cpu = result["ratio_to_running_mean"], result["cpu_ratio_to_running_mean"]
    rows = []
    for name, row in result["per_method"].items():
        lanes = (
            f"{row['critic_lane_cpu_seconds']:.3f} / {row['policy_lane_cpu_seconds']:.3f}"
            if "critic_lane_cpu_seconds" in row
            else ""
        )
        rows.append(
            [
                f"`{name}`",
                f"{row['seconds_per_update']:.3f}",
                _x(wall[name]),
                f"{row['cpu_seconds_per_update']:.3f}",
                _x(cpu[name]),
                lanes,
            ]
        )
    table = _table(
        [
            "method",
            "seconds per update",
            "/ running mean",
            "CPU seconds per update",
            "/ running mean (CPU)",
            "critic / policy lane, CPU s",
        ],
        rows,
    )
    sao = result["sao"]
    summary = (
        f"\nSAO over `sao_running_mean`: {_x(sao['ratio_to_running_mean'])} in wall time "
        f"({_x(sao['in_line_ratio_to_running_mean'])} with the critic in line); its critical "
        f"path, the longer of its two threads' CPU time, is "
        f"{_x(sao['critical_path_cpu_over_running_mean'])} the running mean's CPU time "
        f"(target {_x(sao['target_ratio_to_running_mean'])}).\n"
    )
    return table + summary + _provenance(kept)


def rollout_table(kept: dict[str, Any]) -> str:
    result = kept["result"]
    workloads = [("varied lengths", result)]
    if "fixed_length" in result:
        workloads.append(("fixed length", result["fixed_length"]))
    rows = []
    for label, side in workloads:
        roofline = side["roofline"]
        banded, single = roofline["engine"], roofline["engine_single_buffer"]
        rows.append(
            [
                label,
                f"{side['engine']['tokens_per_second']:,.0f}",
                f"{side['generate']['tokens_per_second']:,.0f}",
                _x(side["speedup"]),
                _x(side["speedup_cpu_time"]),
                _x(side["banded_cache_speedup_cpu_time"]),
                f"{banded['kv_bytes_per_forward'] / 1e6:.1f} / "
                f"{single['kv_bytes_per_forward'] / 1e6:.1f}",
                f"{banded['kv_floor_share_of_model_seconds']:.0%}",
                f"{banded['weight_floor_share_of_model_seconds']:.0%}",
            ]
        )
    table = _table(
        [
            "workload",
            "engine tokens/s",
            "generate() tokens/s",
            "engine / generate()",
            "same, CPU time",
            "banded / one buffer, CPU time",
            "cache MB read per forward, banded / one buffer",
            "cache read at full bandwidth / engine's model time",
            "weights read at full bandwidth / engine's model time",
        ],
        rows,
    )
    roofline = result["roofline"]
    summary = (
        f"\nMeasured read bandwidth: {roofline['read_bandwidth_bytes_per_second'] / 1e9:.1f} GB/s "
        f"(one thread); weights read per forward: "
        f"{roofline['weight_bytes_per_forward'] / 1e6:.1f} MB.\n"
    )
    if "model_load" in result:
        load = result["model_load"]
        first = "converting the GGUF file" if not load["converted_before_first_load"] else "cached"
        summary += (
            f"\nLoading the model: {load['first_load_seconds']:.1f} s the first time ({first}), "
            f"{load['second_load_seconds']:.1f} s the second (the converted copy).\n"
        )
    return table + summary + _provenance(kept)


def throughput_runs_table(kept: dict[str, Any]) -> str:
    """Runs of ``bench throughput --peer trl`` as it was before the peer's CPU settings and the
    time split (``kept["runs"]``: each run's ``load`` and ``result``, one TRL run beside each
    backend's): a row per run and trainer, then how many runs reach the 2x target per
    backend."""
    rows = []
    for number, run in enumerate(kept["runs"], start=1):
        result = run["result"]
        peer = result["peer"]
        for name in ("sync", "local"):
            side = result[name]
            rows.append(
                [
                    number,
                    name,
                    f"{side['completions_per_second']:.1f}",
                    _x(result["ratio_to_peer"][name]),
                    f"{side['learner_seconds_per_update']:.3f}",
                    side["threads"],
                ]
            )
        rows.append(
            [
                number,
                peer["trainer"],
                f"{peer['completions_per_second']:.1f}",
                "1.00x",
                "",
                peer["threads"],
            ]
        )
    table = _table(
        ["run", "trainer", "completions/s", "/ TRL", "learner seconds per update", "threads"],
        rows,
    )
    total = len(kept["runs"])
    reached = "; ".join(
        f"{name} in {sum(run['result']['ratio_to_peer'][name] >= 2 for run in kept['runs'])} "
        f"of {total} runs"
        for name in ("sync", "local")
    )
    loads = "; ".join(
        f"run {number}: {run['load']}" for number, run in enumerate(kept["runs"], start=1)
    )
    return (
        table
        + f"\nAt least 2x TRL's completions per second: {reached}.\n"
        + f"\nCommand: `{kept['command']}`; {loads}.\n"
    )


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _per_update(run: dict[str, Any]) -> float:
    """A ``bench async`` run's learner seconds per update after the first."""
    return run["learner_seconds"] / max(run["updates"] - 1, 1)


def async_table(kept: dict[str, Any]) -> str:
    """Several runs of ``bench async`` (its figures move with the machine's load): one row per
    run and way with stragglers; ``kept["runs"]`` holds each run's ``load`` and ``result``."""
    rows, sweeps = [], []
    for number, run in enumerate(kept["runs"], start=1):
        result = run["result"]
        for option in result["by_straggler_option"]:
            rows.append(
                [
                    number,
                    result["workload"]["max_staleness"],
                    f"`{option['stragglers']}`, `{option['staleness_from']}`",
                    _x(option["speedup"]),
                    _share(option["learner_busy_fraction"]),
                    _share(option["learner_wait_bound_fraction"]),
                    _share(option["learner_wait_episodes_fraction"]),
                    option["requeued_stale"],
                    f"{option['wasted_action_tokens']:,} "
                    f"({option['wasted_action_token_share']:.1%})",
                    f"{option['wasted_env_seconds']:.1f}",
                    option["max_token_staleness"],
                ]
            )
        sweeps += [
            f"run {number}, max_staleness {row['max_staleness']}: learner busy "
            f"{_share(row['learner_busy_fraction'])}, held back by the bound "
            f"{_share(row['learner_wait_bound_fraction'])}"
            for row in result["local_by_max_staleness"][1:]
        ]
    table = _table(
        [
            "run",
            "max_staleness",
            "stragglers, staleness_from",
            "local / sync, steady",
            "learner busy",
            "held back by the bound",
            "waiting for episodes",
            "episodes requeued",
            "action tokens wasted (share)",
            "env seconds wasted",
            "max token staleness",
        ],
        rows,
    )
    workload = kept["runs"][0]["result"]["workload"]
    summary = (
        f"\nWorkload: {workload['episodes']} episodes, B = {workload['batch_size']}, "
        f"{workload['workers']} rollout worker, lognormal env latency (mean "
        f"{workload['latency_mean']} s, sigma {workload['latency_sigma']}).\n"
    )
    if sweeps:
        summary += "\nThe default (`wait`) at another bound, same runs: " + "; ".join(sweeps)
        summary += ".\n"
    summary += (
        "\nLearner seconds per steady-state update, the default way (the sync run's in "
        "brackets): "
        + "; ".join(
            f"run {number}: {_per_update(run['result']['async']):.2f} "
            f"({_per_update(run['result']['sync']):.2f})"
            for number, run in enumerate(kept["runs"], start=1)
        )
        + ".\n"
    )
    # Counting from tokens can only help an episode that started after its admission.
    summary += (
        "\nEpisodes started on newer weights than admitted them (the only ones counting from "
        "tokens can help), by way: "
        + "; ".join(
            f"run {number}: "
            + ", ".join(
                f"`{option['stragglers']}`/`{option['staleness_from']}` "
                f"{option['episodes_started_after_admission']}"
                for option in run["result"]["by_straggler_option"]
            )
            for number, run in enumerate(kept["runs"], start=1)
        )
        + ".\n"
    )
    loads = "; ".join(
        f"run {number}: {run['load']}" for number, run in enumerate(kept["runs"], start=1)
    )
    return table + summary + f"\nCommand: `{kept['command']}`; {loads}.\n"


PARTS = {
    "generation": "generation",
    "environment": "environment",
    "forward": "learner: forward",
    "backward": "learner: backward",
    "optimizer": "learner: optimizer (clip, step)",
}
LEARNER_PARTS = ("forward", "backward", "optimizer")


def _range(spread: dict[str, float], unit: str = "", digits: int = 2) -> str:
    return (
        f"{spread['median']:.{digits}f}{unit} "
        f"({spread['min']:.{digits}f}{unit}-{spread['max']:.{digits}f}{unit})"
    )


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _learner(split: dict[str, float]) -> float:
    return sum(split[part] for part in LEARNER_PARTS)


def _per_update_seconds(runs: list[dict[str, Any]]) -> float:
    """Median over the runs of a side's seconds per update, the first update included."""
    return statistics.median(run["seconds"] / run["updates"] for run in runs)


def _split_table(result: dict[str, Any]) -> str:
    splits, by_part = result["split_per_update"], result["ratio_to_peer_by_part"]
    sync, local, peer = splits["sync"], splits["local"], splits["peer"]

    def ratio(part: str) -> str:
        return "" if by_part.get(part) is None else _x(by_part[part])

    rows = [
        [label, _seconds(sync[part]), _seconds(local.get(part)), _seconds(peer[part]), ratio(part)]
        for part, label in PARTS.items()
    ]
    rows.append(
        [
            "learner, all three",
            _seconds(_learner(sync)),
            _seconds(_learner(local)),
            _seconds(_learner(peer)),
            ratio("learner"),
        ]
    )
    rows.append(
        [
            "other",
            _seconds(sync["other"]),
            _seconds(local["other"]),
            _seconds(peer["other"]),
            ratio("other"),
        ]
    )
    runs = result["runs"]
    rows.append(
        [
            "**an update, all of it**",
            _seconds(_per_update_seconds(runs["sync"])),
            _seconds(_per_update_seconds(runs["local"])),
            _seconds(_per_update_seconds(runs["peer"])),
            _x(result["ratio_to_peer"]["sync"]["median"]),
        ]
    )
    return _table(["part", "sync", "local, learner process", "TRL", "TRL / sync"], rows)


def _where_line(result: dict[str, Any]) -> str:
    """The part of an update where TRL and the sync backend differ most, in seconds."""
    sync, peer = result["split_per_update"]["sync"], result["split_per_update"]["peer"]
    part = max(sync, key=lambda name: abs(peer[name] - sync[name]))
    learner = result["ratio_to_peer_by_part"]["learner"]
    return (
        f"The parts of an update differ most in {PARTS.get(part, part)}: {peer[part]:.3f} s "
        f"per update in TRL against {sync[part]:.3f} s in the sync backend; the learner's "
        f"three passes, over the same model, take {_x(learner)} as long in TRL."
    )


def _target_line(result: dict[str, Any]) -> str:
    """Whether each backend's median ratio reaches the target; where sync misses it, the limit
    its learner sets."""
    target = result["target_ratio_to_peer"]
    ratios = {side: result["ratio_to_peer"][side]["median"] for side in ("sync", "local")}
    reached = [side for side, ratio in ratios.items() if ratio >= target]
    missed = [side for side in ratios if side not in reached]
    line = f"Target {target:g}x TRL: " + (
        "reached by both backends."
        if not missed
        else f"reached by {' and '.join(reached)}, missed by {' and '.join(missed)}."
        if reached
        else "missed by both backends."
    )
    if "sync" not in missed:
        return line
    trl_update = _per_update_seconds(result["runs"]["peer"])
    learner = _learner(result["split_per_update"]["sync"])
    rest = _per_update_seconds(result["runs"]["sync"]) - learner
    allowed = trl_update / target
    if allowed > learner:
        room = (
            f"its learner's passes take {learner:.3f} s of that, which leaves "
            f"{allowed - learner:.3f} s for generation, the environment and the rest, against "
            f"{rest:.3f} s now"
        )
    else:
        room = (
            f"its learner's passes alone take {learner:.3f} s, so no speed elsewhere reaches "
            "the target"
        )
    return (
        f"{line} At {target:g}x a sync update would take {allowed:.3f} s (TRL's "
        f"{trl_update:.3f} s over {target:g}); {room}. With nothing but its learner's passes "
        f"the sync backend would reach {_x(result['ratio_limit_learner_only'])} "
        "(`ratio_limit_learner_only`)."
    )


def throughput_table(kept: dict[str, Any] | None) -> str:
    """One run of ``bench throughput --peer trl`` (its rounds, the split, the spread): the
    finding in a sentence, the table per trainer, the split per part, the target line, the
    rounds one by one, then the peer's settings and the provenance. ``None`` (nothing kept
    yet) says so and how to keep one."""
    if kept is None:
        return (
            "No run of `sao-online bench throughput --peer trl` with the peer configured as "
            "under [Method](#grpo-against-trls-grpotrainer-the-workload-and-the-peer) is kept "
            "yet: `make measure-throughput` on a quiet machine keeps one and rewrites this page. "
            "The earlier runs, with TRL's GPU defaults, are in the "
            "[appendix](performance_history.md#grpo-against-trl-with-trls-gpu-defaults).\n"
        )
    result = kept["result"]
    runs, ratios = result["runs"], result["ratio_to_peer"]
    peer = runs["peer"][0]
    finding = (
        f"GRPO against TRL's `GRPOTrainer`, {result['rounds']} rounds taking turns: the sync "
        f"backend at {_range(ratios['sync'], 'x')} TRL's completions per second (median and "
        f"range over the rounds), the local backend at {_range(ratios['local'], 'x')}. "
        + _where_line(result)
        + " "
        + _target_line(result)
        + "\n\n"
    )
    threads = result["threads"]
    rates = result["completions_per_second"]

    def tokens(side: str) -> list[str]:
        return [
            f"{statistics.median(run['prompt_tokens'] for run in runs[side]):.1f}",
            f"{statistics.median(run['mean_completion_tokens'] for run in runs[side]):.1f}",
        ]

    rows = [
        ["sync", threads["sync"], _range(rates["sync"], digits=1), _range(ratios["sync"], "x")]
        + tokens("sync"),
        [
            "local",
            f"learner {threads['local']['learner']}, worker {threads['local']['rollout_worker']}",
            _range(rates["local"], digits=1),
            _range(ratios["local"], "x"),
        ]
        + tokens("local"),
        [peer["trainer"], threads["peer"], _range(rates["peer"], digits=1), "1.00x"]
        + tokens("peer"),
    ]
    table = _table(
        [
            "trainer",
            "torch threads",
            "completions/s, median (range)",
            "/ TRL, median (range)",
            "prompt tokens",
            "completion tokens",
        ],
        rows,
    )
    split = (
        "\nSeconds per update by part, medians over the rounds (the local backend's generation "
        "and environment run in its worker process, beside the learner; its learner's wait for "
        "them is in its other):\n\n" + _split_table(result)
    )
    rounds = _table(
        ["round", "order", "sync c/s", "local c/s", "TRL c/s", "sync / TRL", "local / TRL"],
        [
            [
                number,
                ", ".join("TRL" if side == "peer" else side for side in order),
                f"{runs['sync'][i]['completions_per_second']:.1f}",
                f"{runs['local'][i]['completions_per_second']:.1f}",
                f"{runs['peer'][i]['completions_per_second']:.1f}",
                _x(
                    runs["sync"][i]["completions_per_second"]
                    / runs["peer"][i]["completions_per_second"]
                ),
                _x(
                    runs["local"][i]["completions_per_second"]
                    / runs["peer"][i]["completions_per_second"]
                ),
            ]
            for i, (number, order) in enumerate(enumerate(result["order"], start=1))
        ],
    )
    settings = ", ".join(f"`{key}={value}`" for key, value in peer["settings"].items())
    versions = ", ".join(f"{name} {version}" for name, version in peer["versions"].items())
    return (
        finding
        + table
        + split
        + "\nThe rounds one by one:\n\n"
        + rounds
        + f"\nTRL's settings: {settings}; {versions}; the reward: {peer['reward']}. "
        + f"{result['workload']['episodes']:,} completions per run.\n"
        + f"\nCommand: `{kept['command']}`; {kept['load']}; "
        + f"{kept['provenance']['machine']['cpu_model']}; kept, with the commit and package "
        + "versions that produced it, in "
        + "[bench_throughput_trl.json](performance/bench_throughput_trl.json).\n"
    )


def simulated_table(kept: dict[str, Any] | None) -> str:
    """``bench simulated``: the simulated runtime's real seconds per episode against sync's on
    one config, runs alternating; ``None`` (nothing kept yet) says so and how to keep one."""
    if kept is None:
        return (
            "No run of `sao-online bench simulated` is kept yet: `python -m "
            "sao_online.commands.performance_page --measure simulated` on a quiet machine keeps "
            "one and rewrites this page.\n"
        )
    result = kept["result"]
    low, high = result["range_per_episode"]
    verdict = "meets" if result["meets_target"] else "misses"
    finding = (
        f"The simulated runtime costs {result['ratio_per_episode']:.2f}x sync's real seconds per "
        f"episode ({low:.2f}-{high:.2f}x over {result['workload']['repeats']} pairs of runs "
        f"taking turns) and {result['ratio_per_1k_tokens']:.2f}x per thousand action tokens: it "
        f"{verdict} the target of at most {result['target']:g}x.\n\n"
    )
    rows = [
        [
            run["backend"],
            run["episodes"],
            run["action_tokens"],
            f"{run['seconds']:.1f}",
            f"{run['seconds_per_episode'] * 1000:.1f}",
            f"{run['seconds_per_1k_tokens']:.2f}",
            f"{run['learner_seconds']:.1f}",
            f"{run['other_seconds']:.1f}",
        ]
        for run in result["runs"]
    ]
    header = [
        "backend",
        "episodes",
        "action tokens",
        "seconds",
        "ms per episode",
        "seconds per 1k tokens",
        "learner seconds",
        "other seconds",
    ]
    return finding + _table(header, rows) + _provenance(kept)
