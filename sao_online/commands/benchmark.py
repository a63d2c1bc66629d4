"""The ``sao-online benchmark`` command line: run a suite, ``merge`` result folders, regenerate
``tables`` in Markdown files (see ``sao_online.benchmark``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _task_folders(option: str, values: list[str]) -> dict[str, str]:
    """Repeated ``OPTION TASK=FOLDER`` values as task -> folder."""
    from sao_online.config import ConfigError

    chosen: dict[str, str] = {}
    for value in values:
        task, sep, folder = value.partition("=")
        if not sep or not task or not folder:
            raise ConfigError(f"{option}: expected TASK=FOLDER, got {value!r}")
        if task in chosen:
            raise ConfigError(f"{option}: {task} given twice ({chosen[task]}, {folder})")
        chosen[task] = folder
    return chosen


def benchmark_command(args: argparse.Namespace) -> int:
    from sao_online.analysis.plot_common import figure_output

    with figure_output(getattr(args, "dpi", None)):
        return _benchmark_command(args)


def _benchmark_command(args: argparse.Namespace) -> int:
    if args.benchmark_command == "merge":
        from sao_online.benchmark import merge_results
        from sao_online.benchmark.sweep import merge_sweeps
        from sao_online.benchmark.sweep_folder import is_sweep

        sweeps = any(is_sweep(folder) for folder in args.folders)  # then every one must be
        if sweeps and (args.task_from or args.force):
            from sao_online.config import ConfigError

            option = "--task-from" if args.task_from else "--force"
            raise ConfigError(f"{option}: applies to benchmarks, not to sweeps")
        if sweeps:
            path = merge_sweeps(
                args.folders, args.out, reps=args.reps, allow_dirty=args.allow_dirty
            )
        else:
            path = merge_results(
                args.folders,
                args.out,
                reps=args.reps,
                task_from=_task_folders("--task-from", args.task_from),
                force=args.force,
                allow_dirty=args.allow_dirty,
            )
        print(f"scorecard: {path}")
        return 0
    if args.benchmark_command == "warm-starts":
        from sao_online.benchmark import plan_tier
        from sao_online.benchmark.warm_starts import export_tier_warm_starts

        plan = plan_tier(args.suite, args.tier)
        exported = export_tier_warm_starts(plan, args.export, args.set)
        for task, weights in exported.items():
            print(f"{task}: weights {weights} -> {args.export}/{task}")
        print(f"use them elsewhere with: sao-online benchmark --warm-starts {args.export} ...")
        return 0
    if args.benchmark_command == "tune":
        from sao_online.benchmark.tune import run_tune  # starts the worker server once checked

        path = run_tune(
            out=args.out,
            suite=args.suite,
            tier=args.tier,
            methods=args.methods.split(",") if args.methods else None,
            grid=args.grid or None,
            rule=args.rule,
            seeds=args.seeds,
            first_seed=args.first_seed,
            eval_seeds=args.eval_seeds,
            overrides=args.set,
            resume=args.resume,
            backend=args.backend,
            address=args.address,
            parallel=args.parallel,
            reps=args.reps,
            warm_starts=args.warm_starts,
            allow_dirty=args.allow_dirty,
        )
        print(
            f"tuned suite: {path} (run it: sao-online benchmark --suite {path} --tier {args.tier})"
        )
        return 0
    if args.benchmark_command == "tables":
        from sao_online.benchmark.tables import update_tables

        stale = update_tables(args.files, check=args.check)
        if args.check and stale:
            print(
                "benchmark tables: out of date with their data (regenerate with "
                f"`sao-online benchmark tables {' '.join(args.files)}`): " + ", ".join(stale),
                file=sys.stderr,
            )
            return 1
        for name in stale:
            print(f"updated {name}")
        return 0
    if args.out is None and not args.dry_run:
        print("sao-online benchmark: error: --out is required", file=sys.stderr)
        return 2
    settings = {
        "out": args.out or ".",
        "suite": args.suite,
        "tier": args.tier,
        "methods": args.methods.split(",") if args.methods else None,
        "seeds": args.seeds,
        "first_seed": args.first_seed,
        "overrides": args.set,
        "backend": args.backend,
        "address": args.address,
        "parallel": args.parallel,
        "reps": args.reps,
        "warm_starts": args.warm_starts,
        "controls": True if args.controls else None,
    }
    if args.dry_run:
        from sao_online.benchmark.prepare import prepare_benchmark

        if args.sweep is None:
            print(prepare_benchmark(**settings).describe())
            return 0
        from sao_online.benchmark.sweep import parse_sweep

        sweep = parse_sweep(args.sweep)
        for value in sweep.values:  # each value's benchmark, as the sweep would run it
            given = {**settings, "overrides": [*(args.set or []), sweep.override(value)]}
            print(f"{sweep.override(value)}:\n{prepare_benchmark(**given).describe()}")
        return 0
    from sao_online.benchmark import run_benchmark  # starts the worker server once checked
    from sao_online.benchmark.sweep import run_sweep

    options = {
        **settings,
        "resume": args.resume,
        "allow_dirty": args.allow_dirty,
    }
    if args.sweep is not None:
        if args.force:
            from sao_online.config import ConfigError

            raise ConfigError("--force: replaces a benchmark's results, not a sweep's")
        path = run_sweep(sweep=args.sweep, **options)
    else:
        path = run_benchmark(**options, force=args.force)
    print(f"scorecard: {path}")
    return 0


def _allow_dirty_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="keep results in the repository's benchmarks/ folder from a tree with uncommitted "
        "changes (refused otherwise); the scorecard's first lines say so",
    )


def add_benchmark_parser(commands: Any) -> None:
    """Add ``benchmark`` (with its ``merge`` and ``tables`` subcommands) to ``commands``."""
    benchmark = commands.add_parser(
        "benchmark",
        help="run a suite of drifting tasks under one protocol and write a scorecard "
        "(subcommands: merge, tables)",
        description="Run every task x method x seed of a suite's tier (the method frozen, the "
        "floor of the normalized score, is always added) and write OUT/scorecard.md/.html/"
        ".csv/.json, OUT/figures and OUT/results (the data). `benchmark merge` pools result "
        "folders; `benchmark tables` regenerates the tables of Markdown files from their data.",
    )
    benchmark.add_argument(
        "--suite", default="core", help="a built-in suite name or a suite YAML (default core)"
    )
    benchmark.add_argument(
        "--tier",
        default="smoke",
        help="smoke, lite, async or full; smoke: minutes, a pipeline check; lite: about two "
        "hours on 2 cores, sync; async: the lite tier's tasks on the simulated runtime, scored "
        "on episodes and virtual seconds; full: the per-family configs (default smoke)",
    )
    benchmark.add_argument(
        "--methods",
        default=None,
        help="comma-separated built-in names or MODULE:FACTORY (default: the tier's); frozen "
        "is always added",
    )
    benchmark.add_argument(
        "--seeds", type=int, default=None, help="seeds per run (default: tier's)"
    )
    benchmark.add_argument(
        "--first-seed", type=int, default=None, help="seeds run from here: K..K+N-1"
    )
    benchmark.add_argument("--out", default=None, help="output folder")
    benchmark.add_argument(
        "--resume",
        action="store_true",
        help="continue the benchmark in --out: finished runs are kept and skipped",
    )
    benchmark.add_argument(
        "--force",
        action="store_true",
        help="replace the results (and runs) a benchmark left in --out, starting again",
    )
    benchmark.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything and print the plan (runs, time and memory by estimate); run "
        "nothing, write nothing",
    )
    benchmark.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="local: child processes here; ray: Ray tasks on a cluster (default local)",
    )
    benchmark.add_argument(
        "--address", default=None, help="Ray cluster address (ray only; default: start one here)"
    )
    benchmark.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="cores the local backend's runs and warm starts share (default: every usable core)",
    )
    benchmark.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of every task's config, e.g. --set env.kwargs.sandbox=docker",
    )
    benchmark.add_argument(
        "--sweep",
        default=None,
        metavar="FIELD=V1,V2,...",
        help="run the tier at each value of one config field (as --set takes it), e.g. "
        "runtime.max_staleness=0,2,4,8: a benchmark folder per value in --out, and a scorecard "
        "of the score against the value; every value is checked before any run starts",
    )
    benchmark.add_argument(
        "--reps", type=int, default=2000, help="bootstrap replications (default 2000)"
    )
    benchmark.add_argument(
        "--dpi",
        type=int,
        default=None,
        help="resolution of the figures' PNGs (default 150); a PDF of each is written beside",
    )
    benchmark.add_argument(
        "--warm-starts",
        metavar="FOLDER",
        default=None,
        help="start each task FOLDER holds from the warm start exported there (`benchmark "
        "warm-starts --export FOLDER` on another machine) instead of one fitted here",
    )
    benchmark.add_argument(
        "--controls",
        action="store_true",
        help="also run a re-adaptation control per learning run and shift: the method started "
        "from the warm start at the shift (default: the tier's controls setting)",
    )
    _allow_dirty_option(benchmark)
    benchmark.set_defaults(func=benchmark_command, benchmark_command=None)
    benchmark_commands = benchmark.add_subparsers(dest="benchmark_command", metavar="SUBCOMMAND")
    merge = benchmark_commands.add_parser(
        "merge",
        help="pool benchmark folders of one protocol (seed sets, machines) into one scorecard; "
        "sweeps of one field, value by value",
    )
    merge.add_argument(
        "folders", nargs="+", help="benchmark output or results folders, or sweep folders"
    )
    merge.add_argument("--out", required=True, help="output folder of the pooled scorecard")
    merge.add_argument(
        "--force", action="store_true", help="replace the results a folder --out holds already"
    )
    merge.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    merge.add_argument(
        "--dpi", type=int, default=None, help="resolution of the figures' PNGs (default 150)"
    )
    merge.add_argument(
        "--task-from",
        action="append",
        default=[],
        metavar="TASK=FOLDER",
        help="take TASK's runs from FOLDER instead of the folders pooled (a task measured "
        "again or on its own; same methods and seeds); repeatable",
    )
    _allow_dirty_option(merge)
    _add_tune_parser(benchmark_commands)
    tables = benchmark_commands.add_parser(
        "tables",
        help="regenerate the benchmark tables of Markdown files from the data they name",
    )
    tables.add_argument("files", nargs="+", help="Markdown files with benchmark-table blocks")
    tables.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a table is out of date"
    )
    warm = benchmark_commands.add_parser(
        "warm-starts",
        help="export a suite tier's warm starts to a folder, for runs on other machines",
        description="Fit (or reuse) the warm start of every task of the tier and copy each to "
        "FOLDER/<task>, with its weights id and the settings it was fitted for. `sao-online "
        "benchmark --warm-starts FOLDER` on another machine starts from the same weights.",
    )
    warm.add_argument(
        "--suite", default="core", help="a built-in suite name or a suite YAML (default core)"
    )
    warm.add_argument("--tier", default="smoke", help="smoke, lite, async or full (default smoke)")
    warm.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the same overrides the benchmark runs with",
    )
    warm.add_argument("--export", required=True, metavar="FOLDER", help="a new folder")


def _add_tune_parser(benchmark_commands: Any) -> None:
    from sao_online.benchmark.tuning_plan import RULES

    tune = benchmark_commands.add_parser(
        "tune",
        help="tune every method on the same grid, on tuning seeds, by a declared rule; write the "
        "chosen settings as a suite",
        description="Run every point of the same grid (--grid, or the tier's tuning section) for "
        "every method on tuning seeds disjoint from the evaluation seeds, pick each method's "
        "point per task by the rule declared before the runs, and write OUT/suite.yaml (run it "
        "with `sao-online benchmark --suite OUT/suite.yaml`) and OUT/tuning.md.",
    )
    tune.add_argument("--out", required=True, help="output folder")
    tune.add_argument(
        "--suite", default="core", help="a built-in suite name or a suite YAML (default core)"
    )
    tune.add_argument("--tier", default="smoke", help="smoke, lite, async or full (default smoke)")
    tune.add_argument(
        "--methods",
        default=None,
        help="comma-separated built-in names or MODULE:FACTORY (default: the tier's); frozen "
        "is always added",
    )
    tune.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="a field of algorithm, optim or regularizers and its values; repeat for more "
        "fields (the grid is their product; default: the tier's tuning grid)",
    )
    tune.add_argument(
        "--rule",
        choices=list(RULES),
        default=None,
        help="how a point is judged: mean-normalized-score (every scored phase) or "
        "mean-post-shift-score (the phases after a shift); default: the tier's, else the first",
    )
    tune.add_argument(
        "--seeds", type=int, default=None, help="tuning seeds (default: the tier's, else 2)"
    )
    tune.add_argument(
        "--first-seed",
        type=int,
        default=None,
        help="the first tuning seed (default: the tier's, else 1000)",
    )
    tune.add_argument(
        "--eval-seeds",
        default=None,
        metavar="N-M,...",
        help="evaluation seeds the tuning seeds must avoid, beside the tier's (e.g. 0-5)",
    )
    tune.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of every task's config",
    )
    tune.add_argument("--resume", action="store_true", help="continue the tune in --out")
    tune.add_argument(
        "--backend", choices=["local", "ray"], default="local", help="(default local)"
    )
    tune.add_argument("--address", default=None, help="Ray cluster address (ray only)")
    tune.add_argument("--parallel", type=int, default=None, help="cores the runs share")
    tune.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    tune.add_argument(
        "--warm-starts",
        metavar="FOLDER",
        default=None,
        help="start the tasks FOLDER holds from the warm starts exported there",
    )
    _allow_dirty_option(tune)
