"""The ``sao-online`` command line: environments, schedules, warm start, runs, reports,
benchmarks."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path


def _start_worker_server() -> None:
    """For commands that start child processes: the server that forks them starts importing
    now, beside this process's own imports, instead of when the first child is asked for."""
    from sao_online.runtime.processes import start_server_early

    start_server_early()


def _cmd_envs(args: argparse.Namespace) -> int:
    import gymnasium

    from sao_online.environments import import_env_module, list_envs

    before = set(gymnasium.registry)
    for module in args.imports:
        import_env_module(module)
    added = set(gymnasium.registry) - before
    if args.imports and not list_envs(ids=added):
        raise ValueError(
            f"envs --import: {', '.join(args.imports)} registered no drifting task "
            "(an env class with a drift_space, registered with gymnasium.register)"
        )
    for env_id, description, drift_space in list_envs() + list_envs(ids=added):
        print(f"{env_id}\n    {description}")
        for name, spec in drift_space.items():
            print(f"    drift {name}: {spec.describe()}" + (f" — {spec.help}" if spec.help else ""))
    return 0


def _cmd_schedules_show(args: argparse.Namespace) -> int:
    from sao_online.drift_schedules import format_timeline, load_schedule, plot_timeline

    schedule = load_schedule(args.file)
    print(format_timeline(schedule, until=args.until))
    if args.png:
        plot_timeline(schedule, args.png, until=args.until)
        print(f"wrote {args.png}")
    return 0


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from sao_online.config import load_config
    from sao_online.pretrain import warm_start

    config = load_config(args.config, args.set)
    path = warm_start(config, force=args.force, progress=True)
    print(f"warm start ready: {path}")
    if args.summary:
        from sao_online.commands.policy_summary import behavior_summary
        from sao_online.models import load_policy
        from sao_online.runtime.envs import resolve_schedule

        policy, tokenizer = load_policy(str(path))
        summary = json.loads((path / "warm_start.json").read_text())
        summary.pop("loss_curve", None)
        summary["behavior"] = behavior_summary(
            config, policy, tokenizer, theta=resolve_schedule(config).at(0).theta
        )
        print(json.dumps(summary, indent=2))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from sao_online.config import load_config

    threads = [] if args.threads is None else [f"runtime.torch_threads={args.threads}"]
    config = load_config(args.config, args.set + threads)
    from sao_online.runtime.machine_fit import check_then_start_workers

    # Before the heavy imports below, so the server's overlap them (run_experiment repeats it,
    # a no-op then, and warns about workers sharing cores).
    check_then_start_workers(config, warn=False)
    from sao_online.runtime.launch import run_experiment

    summary = run_experiment(
        config, out=args.out, resume=args.resume, overwrite=args.overwrite, progress=True
    )
    print(json.dumps(summary, indent=2))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from sao_online.commands.compare import compare  # starts the worker server once checked

    out = compare(
        args.config,
        methods=args.methods.split(","),
        seeds=args.seeds,
        first_seed=args.first_seed,
        out=args.out,
        overrides=args.set,
        parallel=args.parallel,
        overwrite=args.overwrite,
        resume=args.resume,
    )
    print(f"runs in {out}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from sao_online.analysis import write_report

    path = write_report(
        [Path(p) for p in args.runs],
        args.out,
        title=args.title,
        oracle_fraction=args.oracle_fraction,
    )
    print(f"wrote {path}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from sao_online.tracking import TRANSCRIPTS_FILE, format_transcript, read_transcripts

    root = Path(args.run)
    if not root.is_dir():
        raise FileNotFoundError(f"show: no run directory {root}")
    files = (
        [root / TRANSCRIPTS_FILE]
        if (root / TRANSCRIPTS_FILE).exists()
        else sorted(root.rglob(TRANSCRIPTS_FILE))
    )
    if not files:
        raise FileNotFoundError(
            f"show: no {TRANSCRIPTS_FILE} under {root} (runs keep one when "
            "logging.transcripts_every > 0)"
        )
    for path in files:
        records = [
            r for r in read_transcripts(path) if args.phase is None or r["phase"] == args.phase
        ]
        if not records:
            print(
                f"== {path.parent}: no transcript"
                + (f" in phase {args.phase}" if args.phase is not None else "")
            )
            continue
        # Spread over the run (first, last and evenly between) so drift shows.
        count = min(args.count, len(records))
        picks = sorted({round(k * (len(records) - 1) / max(count - 1, 1)) for k in range(count)})
        print(f"== {path.parent} ({len(records)} transcripts, showing {len(picks)})")
        for index in picks:
            print(format_transcript(records[index]))
            print()
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.peer and args.what != "throughput":
        print(f"bench {args.what}: --peer applies to bench throughput only", file=sys.stderr)
        return 2
    if args.max_staleness is not None and args.what != "async":
        print(f"bench {args.what}: --max-staleness applies to bench async only", file=sys.stderr)
        return 2
    if args.what == "rollout":
        from sao_online.commands.bench_rollout import run_rollout_benchmark

        result = run_rollout_benchmark(quick=args.quick)
    elif args.what == "sandbox":
        from sao_online.commands.bench_sandbox import run_sandbox_benchmark

        result = run_sandbox_benchmark(quick=args.quick)
    elif args.what == "throughput":
        _start_worker_server()  # for its local-backend run
        from sao_online.commands.bench_throughput import run_throughput_benchmark

        result = run_throughput_benchmark(quick=args.quick, peer=args.peer)
    elif args.what == "contention":
        from sao_online.commands.bench_contention import run_contention_benchmark

        result = run_contention_benchmark(quick=args.quick)
    else:
        _start_worker_server()
        from sao_online.commands.bench_async import run_async_benchmark

        result = run_async_benchmark(quick=args.quick, max_staleness=args.max_staleness)
    print(json.dumps(result))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from sao_online.commands.demo import run_demo  # through compare, which starts the server

    report = run_demo(
        out=args.out,
        seeds=args.seeds,
        first_seed=args.first_seed,
        quick=args.quick,
        fresh=args.fresh,
    )
    print(f"demo report: {report}")
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from sao_online.config_schema import schema_text

    text = schema_text()
    if args.out:
        Path(args.out).write_text(text)
        print(f"config schema: {args.out}")
    else:
        print(text, end="")
    return 0


def _bounds(text: str) -> list[int]:
    try:
        bounds = [int(part) for part in text.split(",")]
    except ValueError:
        bounds = []
    if not bounds or min(bounds) < 0:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated ints >= 0 such as 4,8,16, got {text!r}"
        )
    return bounds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sao-online",
        description="SAO (single-rollout asynchronous optimisation) for agentic RL on drifting "
        "environments: run, compare, analyse.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    envs = commands.add_parser("envs", help="list environments and their drift parameters")
    envs.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (a module that calls gymnasium.register) and list "
        "its drifting tasks too; an experiment names it as env.id: "
        "MODULE:namespace/Name-v0",
    )
    envs.set_defaults(func=_cmd_envs)

    schedules = commands.add_parser("schedules", help="inspect drift schedules")
    schedule_commands = schedules.add_subparsers(dest="schedules_command", required=True)
    show = schedule_commands.add_parser("show", help="print a schedule's phase timeline")
    show.add_argument("file", help="schedule YAML (or an experiment config's schedule file)")
    show.add_argument("--png", help="also draw the timeline to this PNG file")
    show.add_argument("--until", type=float, default=None, help="horizon in clock units")
    show.set_defaults(func=_cmd_schedules_show)

    def add_config_arguments(sub: argparse.ArgumentParser, required: bool = True) -> None:
        if required:
            sub.add_argument("config", help="experiment YAML (see configs/)")
        else:
            sub.add_argument(
                "config", nargs="?", default=None, help="experiment YAML (see configs/)"
            )
        sub.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config field, e.g. --set algorithm.name=grpo",
        )

    pretrain = commands.add_parser("pretrain", help="build (or reuse) the SFT warm start")
    add_config_arguments(pretrain, required=False)
    pretrain.add_argument("--force", action="store_true", help="rebuild even if cached")
    pretrain.add_argument(
        "--summary",
        action="store_true",
        help="also sample the warm start in the schedule's first regime and print "
        "reward, quality and behaviour shares",
    )
    pretrain.set_defaults(func=_cmd_pretrain)

    run = commands.add_parser("run", help="run one experiment (one method, one seed)")
    add_config_arguments(run)
    run.add_argument("--out", default=None, help="run directory (default from logging.out)")
    run.add_argument("--resume", action="store_true", help="continue a killed run")
    run.add_argument("--overwrite", action="store_true", help="replace an existing run")
    run.add_argument(
        "--threads",
        default=None,
        metavar="N|auto",
        help="torch threads of the learner process (sets runtime.torch_threads; "
        "default auto: the free cores this process may use, less one per "
        "rollout worker for local and ray)",
    )
    run.set_defaults(func=_cmd_run)

    compare = commands.add_parser("compare", help="methods x seeds at matched budgets")
    add_config_arguments(compare)
    compare.add_argument("--methods", default="sao,grpo", help="comma-separated method names")
    compare.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    compare.add_argument(
        "--first-seed", type=int, default=0, help="seeds run from here: K..K+N-1 (default 0)"
    )
    compare.add_argument("--out", required=True, help="root folder of the runs")
    compare.add_argument("--parallel", type=int, default=None, help="runs at once (default: cores)")
    compare.add_argument("--overwrite", action="store_true", help="replace existing runs")
    compare.add_argument(
        "--resume",
        action="store_true",
        help="continue existing runs from their checkpoints, start missing ones",
    )
    compare.set_defaults(func=_cmd_compare)

    report = commands.add_parser("report", help="recovery metrics, plots and a report for runs")
    report.add_argument(
        "runs", nargs="+", help="run folders (any level of runs/<exp>/<method>/seed-k)"
    )
    report.add_argument("--out", required=True, help="report folder")
    report.add_argument("--title", default=None)
    report.add_argument(
        "--oracle-fraction",
        type=float,
        default=0.8,
        help="absolute recovery level: time until the smoothed reward reaches this fraction "
        "of the oracle's (default 0.8)",
    )
    report.set_defaults(func=_cmd_report)

    show = commands.add_parser(
        "show",
        help="print episode transcripts a run kept (what the "
        "agent wrote, what the env answered, rewards)",
    )
    show.add_argument("run", help="a run directory (or a folder of runs)")
    show.add_argument(
        "-n", "--count", type=int, default=3, help="transcripts per run (spread over the run)"
    )
    show.add_argument("--phase", type=int, default=None, help="only episodes of this phase")
    show.set_defaults(func=_cmd_show)

    bench = commands.add_parser("bench", help="benchmarks; print one JSON object")
    bench.add_argument("what", choices=["rollout", "async", "throughput", "contention", "sandbox"])
    bench.add_argument("--quick", action="store_true", help="a shorter run")
    bench.add_argument(
        "--peer",
        choices=["trl"],
        default=None,
        help="throughput: also run TRL's GRPOTrainer on the same workload and "
        "report the ratio (needs pip install 'sao-online[trl]')",
    )
    bench.add_argument(
        "--max-staleness",
        type=_bounds,
        default=None,
        metavar="N[,N...]",
        help="async: staleness bounds for the local backend (default 4); the first is used "
        "for every backend, each further one adds a local run",
    )
    bench.set_defaults(func=_cmd_bench)

    from sao_online.commands.benchmark import add_benchmark_parser

    add_benchmark_parser(commands)

    schema = commands.add_parser(
        "schema",
        help="the JSON Schema of experiment configs (for editors that complete and check YAML)",
    )
    schema.add_argument("--out", default=None, help="write it to this file (default: stdout)")
    schema.set_defaults(func=_cmd_schema)

    demo = commands.add_parser("demo", help="the StyleShift paper protocol: SAO vs GRPO, report")
    demo.add_argument("--out", default="runs/demo", help="output folder")
    demo.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    demo.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds run from here: K..K+N-1 (default 0; the README's second seed set is 3)",
    )
    demo.add_argument("--quick", action="store_true", help="a much shorter protocol")
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="start every run again (default: continue runs already in --out)",
    )
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from sao_online.config import ConfigWarning

    parser = build_parser()
    args = parser.parse_args(argv)
    # Like `python -m`: a user's task module (env.id: my_tasks:my_tasks/Name-v0) next to the
    # config imports without PYTHONPATH; spawned workers inherit the path.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    default_show = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        # sao-online's own warnings (a setting adjusted on load, a budget with no shift in it)
        # are for the user of the command: one plain line, no source location.
        if issubclass(category, ConfigWarning) or category.__module__.startswith("sao_online"):
            print(f"sao-online {args.command}: warning: {message}", file=sys.stderr)
        else:
            default_show(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as error:
        # Configuration and input errors: one clear line, no traceback.
        print(f"sao-online {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sao-online {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = default_show


if __name__ == "__main__":
    sys.exit(main())
