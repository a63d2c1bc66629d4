"""The Python API: run one experiment, compare methods across seeds, write a report, run the
benchmark.

The same steps as the command line (``sao-online run`` / ``compare`` / ``report`` /
``benchmark``), from a YAML path, the same dict, or an
:class:`~sao_online.config.ExperimentConfig`::

    from sao_online.api import benchmark, compare, report, run

    if __name__ == "__main__":  # compare and the local backend spawn processes
        summary = run({"experiment": "try", "budget": {"episodes": 64}}, out="runs/try/sao")
        runs = compare("configs/smoke.yaml", methods=["sao", "grpo"], seeds=2, out="runs")
        report(runs, out="runs/report")
        scorecard = benchmark(tier="smoke", methods=["sao", "grpo"], out="bench")
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sao_online.config import ExperimentConfig, load_config
from sao_online.config.bundled import resolve_config
from sao_online.util.defaults import DEFAULT_ORACLE_FRACTION

ConfigSource = str | Path | dict[str, Any] | ExperimentConfig


def as_config(config: ConfigSource, overrides: list[str] | None = None) -> ExperimentConfig:
    """A validated :class:`ExperimentConfig` from a YAML path, a bundled config's name
    (``"demo"``, see ``sao-online configs list``), a dict or a config object.

    ``overrides`` are ``"section.field=value"`` strings, as ``--set`` takes them.

    Raises:
        ConfigError: naming the field at fault.
        FileNotFoundError: neither a file nor a bundled config's name.
    """
    if isinstance(config, ExperimentConfig):
        if not overrides:
            return config.validate()
        config = config.to_dict()
    if isinstance(config, str | Path):
        config = resolve_config(config)
    return load_config(config, overrides)


def run(
    config: ConfigSource,
    *,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    threads: int | None = None,
) -> dict[str, Any]:
    """Run one method with one seed to its episode budget (``sao-online run``).

    Args:
        config: a YAML path, a dict in the same form, or an ``ExperimentConfig``.
        out: the run directory (default ``<logging.out>/<experiment>/<method>/seed-<seed>``).
        overrides: ``"section.field=value"`` strings applied to ``config``.
        resume: continue a killed run from its last checkpoint.
        overwrite: replace an existing run directory.
        progress: show a progress bar.
        threads: torch threads of the learner (see ``sao-online run --threads``).

    Returns:
        ``run_dir``, ``method``, ``episodes``, ``updates``, ``seconds``,
        ``episodes_per_second`` and ``reward_mean_last_10pct``.

    Raises:
        ConfigError: a bad field (named).
        MissingMainGuardError: the local backend called at the top level of a script that has
            no ``if __name__ == "__main__":`` guard.
    """
    from sao_online.runtime.launch import run_experiment

    return run_experiment(
        as_config(config, overrides),
        out=out,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        threads=threads,
    )


def compare(
    config: ConfigSource,
    *,
    methods: list[str] | str,
    seeds: int = 3,
    out: str | Path,
    overrides: list[str] | None = None,
    parallel: int | None = None,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
) -> Path:
    """Run ``methods`` x seeds 0..seeds-1 at matched budgets (``sao-online compare``).

    Runs go in child processes (a preloaded forkserver's, which import your script again as
    spawn would), ``parallel`` at a time (default: one per core); call this under
    ``if __name__ == "__main__":`` in a script.

    Args:
        config: a YAML path, a dict in the same form, or an ``ExperimentConfig``.
        methods: method names (a list, or one comma-separated string).
        seeds: how many seeds, 0..seeds-1.
        out: root folder; runs land in ``<out>/<experiment>/<method>/seed-<k>/``.

    Returns:
        ``<out>/<experiment>``, the folder to pass to :func:`report`.
    """
    from sao_online.commands.compare import compare as compare_runs

    if isinstance(methods, str):
        methods = methods.split(",")
    if isinstance(config, str | Path):  # the runs read the file (its schedule path resolves)
        return compare_runs(
            resolve_config(config),
            methods=list(methods),
            seeds=seeds,
            out=out,
            overrides=overrides,
            parallel=parallel,
            overwrite=overwrite,
            resume=resume,
            progress=progress,
        )
    return compare_runs(
        as_config(config, overrides),
        methods=list(methods),
        seeds=seeds,
        out=out,
        parallel=parallel,
        overwrite=overwrite,
        resume=resume,
        progress=progress,
    )


def report(
    runs: str | Path | list[str | Path],
    out: str | Path | None = None,
    *,
    title: str | None = None,
    oracle_fraction: float = DEFAULT_ORACLE_FRACTION,
    dpi: int | None = None,
) -> Path:
    """Recovery metrics, figures and ``report.md`` / ``report.html`` / ``metrics.csv``.

    Args:
        runs: one folder or several, at any level of ``runs/<experiment>/<method>/seed-<k>``.
        out: the report folder (default ``<first of runs>/report``, as ``sao-online report``).
        title: the report's title (default from the experiment names).
        oracle_fraction: the absolute recovery level, a fraction of the oracle's reward (the
            report's verdict ranks methods by the time to reach it).
        dpi: the resolution of the figures' PNGs (a PDF of each is written beside).

    Returns:
        The path of ``report.md``.
    """
    from sao_online.analysis import write_report

    folders = [runs] if isinstance(runs, str | Path) else list(runs)
    if out is None:
        out = default_report_folder(folders)
    return Path(
        write_report(
            [Path(p) for p in folders],
            out,
            title=title,
            oracle_fraction=oracle_fraction,
            dpi=dpi,
        )
    )


def default_report_folder(runs: list[str | Path]) -> Path:
    """Where a report goes when no folder is given: ``<first run folder>/report``."""
    return Path(runs[0]) / "report"


def benchmark(
    *,
    out: str | Path,
    suite: str | Path = "core",
    tier: str = "smoke",
    methods: list[str] | str | None = None,
    seeds: int | None = None,
    first_seed: int | None = None,
    overrides: list[str] | None = None,
    resume: bool = False,
    force: bool = False,
    backend: str = "local",
    address: str | None = None,
    parallel: int | None = None,
    progress: bool = True,
    sweep: str | None = None,
) -> Path:
    """Run a suite's tier and write its scorecard (``sao-online benchmark``).

    Every task x method x seed runs (the method ``frozen``, the floor of the normalized score,
    is always added); runs go in child processes (call this under
    ``if __name__ == "__main__":``) or, with ``backend="ray"``, as Ray tasks on the cluster at
    ``address``.

    Args:
        out: output folder (runs, ``results/`` data, scorecard, figures).
        suite: a built-in suite name (``core``) or a suite YAML file.
        tier: ``smoke``, ``lite``, ``async`` or ``full``.
        methods: built-in names or ``MODULE:FACTORY`` (a list or one comma-separated string;
            default the tier's).
        seeds: how many seeds (default the tier's); they run first_seed..first_seed+seeds-1.
        first_seed: the first seed (default the tier's).
        overrides: ``"section.field=value"`` applied to every task's config.
        resume: continue the benchmark in ``out`` (finished runs are kept and skipped).
        force: replace the results a benchmark left in ``out`` (refused otherwise).
        parallel: cores the local backend's runs and warm starts share (default: every
            usable core), scheduled by their estimated costs.
        sweep: ``"FIELD=V1,V2,..."``: run the tier at each value of one config field, a
            benchmark folder per value in ``out`` and a scorecard across them
            (``--sweep``).

    Returns:
        The path of ``scorecard.md``.
    """
    from sao_online.benchmark import run_benchmark
    from sao_online.benchmark.sweep import run_sweep

    if isinstance(methods, str):
        methods = methods.split(",")
    run = run_benchmark if sweep is None else functools.partial(run_sweep, sweep=sweep)
    return run(
        out=out,
        suite=suite,
        tier=tier,
        methods=methods,
        seeds=seeds,
        first_seed=first_seed,
        overrides=overrides,
        resume=resume,
        force=force,
        backend=backend,
        address=address,
        parallel=parallel,
        progress=progress,
    )
