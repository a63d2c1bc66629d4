"""The tables of ``docs/performance.md``, generated from the benchmark results kept beside it.

Each file ``docs/performance/<name>.json`` holds one benchmark run: the ``command`` that produced
it, the machine's ``load`` at the time (the load average while it ran, in words), and the
benchmark's own JSON output under ``result``. Each table of the page sits between the markers
``<!-- table: NAME -->`` and ``<!-- end table -->``; this module renders them from the files and
rewrites them in place, so a number on the page always comes from a kept file:

    python -m sao_online.commands.performance_page            # rewrite the page's tables
    python -m sao_online.commands.performance_page --check    # exit 1 if a table is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "performance.md"
DATA = DOCS / "performance"
_BLOCK = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)


def _load(name: str, data: Path) -> dict[str, Any]:
    path = data / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"performance page: no kept result {path}")
    return json.loads(path.read_text())


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


def throughput_table(kept: dict[str, Any]) -> str:
    """Runs of ``bench throughput --peer trl`` (``kept["runs"]``: each run's ``load`` and
    ``result``): a row per run and trainer, then how many runs reach the 2x target per backend."""
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


TABLES: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "learner": ("bench_learner", learner_table),
    "rollout": ("bench_rollout", rollout_table),
    "rollout-smollm2": ("bench_rollout_smollm2", rollout_table),
    "throughput": ("bench_throughput_trl", throughput_table),
    "async": ("bench_async", async_table),
}


def render(page: str, data: Path = DATA) -> str:
    """``page`` with every table block rendered from its kept result.

    Raises:
        ValueError: a block names an unknown table, or its result file is missing.
    """

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in TABLES:
            raise ValueError(f"performance page: unknown table {name!r}; known: {sorted(TABLES)}")
        file_name, renderer = TABLES[name]
        return match.group(1) + renderer(_load(file_name, data)) + match.group(4)

    return _BLOCK.sub(fill, page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    args = parser.parse_args(argv)
    current = PAGE.read_text()
    rendered = render(current)
    if args.check:
        if rendered != current:
            print(f"{PAGE}: tables differ from the kept results; regenerate them", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(rendered)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
