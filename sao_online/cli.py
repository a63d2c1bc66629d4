"""The ``sao-online`` command line: environments, schedules, warm start, runs, reports,
benchmarks."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from sao_online.util.defaults import DEFAULT_ORACLE_FRACTION

if TYPE_CHECKING:
    from sao_online.config import ExperimentConfig


def _cmd_schedules_show(args: argparse.Namespace) -> int:
    from sao_online.config.bundled import resolve_config
    from sao_online.drift_schedules import format_timeline, load_schedule, plot_timeline

    schedule = load_schedule(resolve_config(args.file, what="schedule"))
    print(format_timeline(schedule, until=args.until))
    if args.png:
        plot_timeline(schedule, args.png, until=args.until)
        print(f"wrote {args.png}")
    return 0


def _config_path(args: argparse.Namespace) -> str | None:
    """The config file ``args.config`` names: a path, or a bundled config's name."""
    from sao_online.config.bundled import resolve_config

    return None if args.config is None else str(resolve_config(args.config))


def _cmd_pretrain(args: argparse.Namespace) -> int:
    if args.list or args.clear:
        from sao_online.commands.warm_start_cache import clear_cache, format_cache

        print(clear_cache() if args.clear else format_cache())
        return 0
    from sao_online.config import load_config
    from sao_online.learning.warm_start import export_warm_start, import_warm_start, warm_start

    config = load_config(_config_path(args), args.set)
    if args.import_from and args.force:
        from sao_online.config import ConfigError

        raise ConfigError("--import and --force: import a warm start or fit one, not both")
    if args.import_from:
        path = import_warm_start(config, args.import_from)
        print(f"warm start imported from {args.import_from}: {path}")
    else:
        path = warm_start(config, force=args.force, progress=True)
        print(f"warm start ready: {path}")
    if args.export:
        print(f"warm start exported to {export_warm_start(config, args.export)}")
    if args.summary:
        from sao_online.commands.policy_summary import warm_start_summary

        print(json.dumps(warm_start_summary(config, path), indent=2))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from sao_online.config import load_config

    threads = [] if args.threads is None else [f"runtime.torch_threads={args.threads}"]
    config = load_config(_config_path(args), args.set + threads)
    from sao_online.runtime.host.plugin_probe import check_plugins_load, env_loads, method_loads

    # The user's modules first in a child, under a deadline: one that hangs or exits is named.
    data = config.to_dict()
    check_plugins_load(
        env_loads([config.env.id], "env.id")
        + method_loads(data, [config.algorithm.name], "algorithm.name")
    )
    if args.dry_run:
        from sao_online.runtime.dry_run import check_run

        print(check_run(config))
        return 0
    from sao_online.runtime.host.machine_fit import check_then_start_workers

    # Before the heavy imports below, so the server's overlap them (run_experiment repeats it,
    # a no-op then, and warns about workers sharing cores).
    check_then_start_workers(config, warn=False)
    from sao_online.runtime.launch import run_experiment

    started = time.time()
    try:
        summary = run_experiment(
            config, out=args.out, resume=args.resume, overwrite=args.overwrite, progress=True
        )
    except Exception:
        from sao_online.rundir.failure import ERROR_FILE

        kept = _run_folder(args.out, config) / ERROR_FILE
        if kept.is_file() and kept.stat().st_mtime >= started:  # this run's, not an old one
            print(
                f"sao-online run: its traceback and last records: {kept} (the same command "
                "again continues the run or starts it again)",
                file=sys.stderr,
            )
        raise
    print(json.dumps(summary, indent=2))
    return 0


def _run_folder(out: str | None, config: ExperimentConfig) -> Path:
    """The folder a run of ``config`` writes: ``out``, or the one its logging settings name."""
    if out:
        return Path(out)
    from sao_online.algorithms import build_method
    from sao_online.rundir.layout import run_directory

    method = build_method(config).name
    return run_directory(config.logging.out, config.experiment, method, config.seed)


def _cmd_compare(args: argparse.Namespace) -> int:
    from sao_online.commands.compare import compare  # starts the worker server once checked

    config_path = _config_path(args)
    out = compare(
        config_path,
        methods=args.methods.split(","),
        seeds=args.seeds,
        first_seed=args.first_seed,
        out=args.out if args.out is not None else _logging_out(config_path, args.set),
        overrides=args.set,
        parallel=args.parallel,
        overwrite=args.overwrite,
        resume=args.resume,
    )
    from sao_online.commands.compare_summary import compare_summary

    print(compare_summary(out))
    return 0


def _logging_out(config_path: str | None, overrides: list[str]) -> str:
    """``logging.out`` of a config: where ``compare`` puts its runs when no --out is given."""
    from sao_online.config import load_config

    return load_config(config_path, overrides).logging.out


def _cmd_report(args: argparse.Namespace) -> int:
    from sao_online.analysis import write_report
    from sao_online.api import default_report_folder

    path = write_report(
        [Path(p) for p in args.runs],
        args.out if args.out is not None else default_report_folder(args.runs),
        title=args.title,
        oracle_fraction=args.oracle_fraction,
        dpi=args.dpi,
    )
    print(f"wrote {path}")
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
    from sao_online.config.schema import schema_text

    text = schema_text()
    if args.out:
        Path(args.out).write_text(text)
        print(f"config schema: {args.out}")
    else:
        print(text, end="")
    return 0


class _MethodNames:
    """The built-in method names, looked up only when ``--help`` is printed (the registry
    imports torch, which would slow every command line down)."""

    def __str__(self) -> str:
        from sao_online.algorithms import METHODS

        return ", ".join(METHODS)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sao-online")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from sao_online import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sao-online",
        description="SAO (single-rollout asynchronous optimisation) for agentic RL on drifting "
        "environments: run, compare, analyse.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show other libraries' progress bars, log lines and warnings",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from sao_online.commands.envs import add_envs_parser

    add_envs_parser(commands)

    schedules = commands.add_parser("schedules", help="inspect drift schedules")
    schedule_commands = schedules.add_subparsers(dest="schedules_command", required=True)
    show = schedule_commands.add_parser("show", help="print a schedule's phase timeline")
    show.add_argument("file", help="schedule YAML (or an experiment config's schedule file)")
    show.add_argument("--png", help="also draw the timeline to this PNG file")
    show.add_argument("--until", type=float, default=None, help="horizon in clock units")
    show.set_defaults(func=_cmd_schedules_show)

    config_help = (
        "experiment YAML, or a bundled config's name such as demo or smoke "
        "(`sao-online configs list`)"
    )

    def add_config_arguments(sub: argparse.ArgumentParser, required: bool = True) -> None:
        if required:
            sub.add_argument("config", help=config_help)
        else:
            sub.add_argument("config", nargs="?", default=None, help=config_help)
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
    pretrain.add_argument(
        "--list",
        action="store_true",
        help="list the cached warm starts (environment, steps, size) and where they are",
    )
    pretrain.add_argument("--clear", action="store_true", help="delete every cached warm start")
    pretrain.add_argument(
        "--export",
        metavar="FOLDER",
        help="also copy the warm start to FOLDER (new), to run from the same weights elsewhere",
    )
    pretrain.add_argument(
        "--import",
        dest="import_from",
        metavar="FOLDER",
        help="make an exported warm start this config's cached one (checked: fitted for the "
        "same settings, weights intact) instead of fitting it here",
    )
    pretrain.set_defaults(func=_cmd_pretrain)

    run = commands.add_parser("run", help="run one experiment (one method, one seed)")
    add_config_arguments(run)
    run.add_argument("--out", default=None, help="run directory (default from logging.out)")
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue a run from its last checkpoint: a killed one, or a finished one given a "
        "larger budget (--set budget.episodes=N)",
    )
    run.add_argument("--overwrite", action="store_true", help="replace an existing run")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="check the config as a run would (environment, schedule, method, budget, time and "
        "memory by estimate) and say what it would run; start nothing, write nothing",
    )
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
    methods = compare.add_argument(
        "--methods",
        default="sao,grpo",
        help="comma-separated method names (default sao,grpo): %(method_names)s",
    )
    methods.method_names = _MethodNames()
    compare.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    compare.add_argument(
        "--first-seed", type=int, default=0, help="seeds run from here: K..K+N-1 (default 0)"
    )
    compare.add_argument(
        "--out",
        default=None,
        help="root folder of the runs, which land in OUT/<experiment>/<method>/seed-<k> "
        "(default: the config's logging.out, runs)",
    )
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
    report.add_argument(
        "--out", default=None, help="report folder (default: RUNS/report, of the first RUNS)"
    )
    report.add_argument("--title", default=None)
    report.add_argument(
        "--oracle-fraction",
        type=float,
        default=DEFAULT_ORACLE_FRACTION,
        help="absolute recovery level: time until the smoothed reward reaches this fraction "
        "of the oracle's; the verdict ranks methods by it (default %(default)s)",
    )
    report.add_argument(
        "--dpi",
        type=int,
        default=None,
        help="resolution of the figures' PNGs (default 150); a PDF of each is written beside",
    )
    report.set_defaults(func=_cmd_report)

    from sao_online.commands.show import add_show_parser

    add_show_parser(commands)

    from sao_online.perf.cli import add_bench_parser

    add_bench_parser(commands)

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

    from sao_online.commands.configs import add_configs_parser
    from sao_online.commands.init_task import add_init_parser
    from sao_online.commands.sim import add_sim_parser

    add_configs_parser(commands)
    add_init_parser(commands)
    add_sim_parser(commands)

    # --verbose after the command too (`sao-online run demo --verbose`), subcommands included.
    for sub in _all_subparsers(parser):
        sub.add_argument(
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help=("also show other libraries' progress bars, log lines and warnings"),
        )
    return parser


def _all_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser``: its commands, their subcommands, and so on."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += [sub, *_all_subparsers(sub)]
    return found


def main(argv: list[str] | None = None) -> int:
    from sao_online.config import ConfigWarning
    from sao_online.util.quiet import is_own_warning, quiet_other_libraries

    parser = build_parser()
    args = parser.parse_args(argv)
    # Like `python -m`: a user's task module (env.id: my_tasks:my_tasks/Name-v0) next to the
    # config imports without PYTHONPATH; spawned workers inherit the path.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    default_show = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        # sao-online's own warnings (a setting adjusted on load, a budget with no shift in it)
        # are for the user of the command: one plain line, no source location. Other
        # libraries' warnings only with --verbose.
        if issubclass(category, ConfigWarning) or is_own_warning(category):
            print(f"sao-online {args.command}: warning: {message}", file=sys.stderr)
        elif args.verbose:
            default_show(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        with quiet_other_libraries(verbose=args.verbose):
            return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        # Configuration and input errors: one clear line, no traceback.
        print(f"sao-online {args.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        from sao_online.rundir.disk_full import describe_disk_full, is_disk_full

        if not is_disk_full(error):
            raise
        # A full disk, named by the run's writers (DiskFullError) or by any other writer.
        print(f"sao-online {args.command}: error: {describe_disk_full(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        # Ctrl-C, or (compare) SIGINT/SIGTERM passed on to the runs, which were waited for.
        signum = getattr(stop, "signum", signal.SIGINT)
        name = signal.Signals(signum).name
        how = "interrupted" if signum == signal.SIGINT else f"stopped by {name}"
        print(f"sao-online {args.command}: {how}", file=sys.stderr)
        return 128 + signum
    finally:
        warnings.showwarning = default_show


if __name__ == "__main__":
    sys.exit(main())
