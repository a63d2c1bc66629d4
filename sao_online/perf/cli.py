"""The ``sao-online bench`` subcommands: each declares its own flags and runs its benchmark.

The benchmark modules are imported when their subcommand runs, so building the parser (and
``--help``) does not import torch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from sao_online.perf import THROUGHPUT_RUNS


@contextlib.contextmanager
def _worker_server() -> Iterator[None]:
    """For benchmarks that start child processes: the server that forks them starts importing
    now, beside this process's own imports, instead of when the first child is asked for; it is
    stopped and waited for at the end, so the benchmark leaves no process behind and its
    children's CPU time counts as its own (``getrusage``)."""
    from sao_online.runtime.host.processes import start_server_early, stop_server

    start_server_early()
    try:
        yield
    finally:
        stop_server()


def _printing(run: Callable[[argparse.Namespace], dict[str, Any]]):
    """A subcommand handler that prints the benchmark's result as one JSON object."""

    def handler(args: argparse.Namespace) -> int:
        print(json.dumps(run(args)))
        return 0

    return handler


def _staleness_bounds(text: str) -> list[int]:
    try:
        bounds = [int(part) for part in text.split(",")]
    except ValueError:
        bounds = []
    if not bounds or min(bounds) < 0:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated ints >= 0 such as 4,8,16, got {text!r}"
        )
    return bounds


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return value


def _rollout(args: argparse.Namespace) -> dict[str, Any]:
    from sao_online.perf.rollout import run_rollout_benchmark

    return run_rollout_benchmark(quick=args.quick, model=args.model)


def _sync_vs_async(args: argparse.Namespace) -> dict[str, Any]:
    with _worker_server():
        from sao_online.perf.sync_vs_async import run_async_benchmark

        return run_async_benchmark(quick=args.quick, max_staleness=args.max_staleness)


def _throughput(args: argparse.Namespace) -> dict[str, Any]:
    with _worker_server():  # for its local-backend runs
        from sao_online.perf.throughput import run_throughput_benchmark

        return run_throughput_benchmark(
            quick=args.quick, peer=args.peer, runs=args.runs, threads=args.threads
        )


def _contention(args: argparse.Namespace) -> dict[str, Any]:
    from sao_online.perf.contention import run_contention_benchmark

    return run_contention_benchmark(quick=args.quick)


def _sandbox(args: argparse.Namespace) -> dict[str, Any]:
    from sao_online.perf.sandbox import run_sandbox_benchmark

    return run_sandbox_benchmark(quick=args.quick)


def _learner(args: argparse.Namespace) -> dict[str, Any]:
    from sao_online.perf.learner import run_learner_benchmark

    return run_learner_benchmark(quick=args.quick)


def _simulated(args: argparse.Namespace) -> dict[str, Any]:
    from sao_online.perf.simulated import run_simulated_benchmark

    return run_simulated_benchmark(quick=args.quick, repeats=args.repeats)


def add_bench_parser(commands: argparse._SubParsersAction) -> None:
    """``sao-online bench NAME [flags]``, one subcommand per benchmark."""
    bench = commands.add_parser("bench", help="benchmarks; print one JSON object")
    benches = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")

    def add(name: str, help_text: str, run: Callable[[argparse.Namespace], dict[str, Any]]):
        sub = benches.add_parser(name, help=help_text)
        sub.add_argument("--quick", action="store_true", help="a shorter run")
        sub.set_defaults(func=_printing(run))
        return sub

    rollout = add(
        "rollout", "the rollout engine against model.generate() on one workload", _rollout
    )
    rollout.add_argument(
        "--model",
        default="tiny",
        help="the policy (tiny, the default random-init model, or a name load_policy takes "
        "such as smollm2-135m)",
    )

    sync_vs_async = add(
        "async", "synchronous vs asynchronous training under long-tail latency", _sync_vs_async
    )
    sync_vs_async.add_argument(
        "--max-staleness",
        type=_staleness_bounds,
        default=None,
        metavar="N[,N...]",
        help="staleness bounds for the local backend (default 4); the first is used for every "
        "backend, each further one adds a local run",
    )

    throughput = add("throughput", "GRPO completions per second end to end", _throughput)
    throughput.add_argument(
        "--peer",
        choices=["trl"],
        default=None,
        help="also run TRL's GRPOTrainer on the same workload and report the ratio (needs "
        "make trl, or pip install 'sao-online[trl]')",
    )
    throughput.add_argument(
        "--runs",
        type=_positive_int,
        default=THROUGHPUT_RUNS,
        metavar="N",
        help="rounds, each running every side once in a rotated order",
    )
    throughput.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="torch threads of the sync side and of TRL; the local learner gets one less beside "
        "its one-thread worker (default: the usable cores)",
    )

    add("contention", "the throughput workload with and without a busy core", _contention)
    add("sandbox", "program executions per second of each sandbox backend", _sandbox)
    add("learner", "seconds per learner update of each of the demo's methods", _learner)
    simulated = add(
        "simulated", "the simulated runtime's real seconds per episode against sync", _simulated
    )
    simulated.add_argument(
        "--repeats",
        type=_positive_int,
        default=3,
        help="runs per backend, alternating (default 3)",
    )
