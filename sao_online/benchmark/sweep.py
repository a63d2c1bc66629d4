"""``sao-online benchmark --sweep FIELD=V1,V2,...``: a suite's tier run at each value of one
config field, one scorecard per value and one across them.

The output folder::

    OUT/sweep.json                  the field, its values and the folder of each
    OUT/<field>=<value>/            a benchmark folder per value (runs, results, scorecard), as
                                    ``sao-online benchmark`` writes one with --set FIELD=VALUE
    OUT/scorecard.{md,html,csv,json}   a leaderboard per value, the score against the value
    OUT/figures/sweep.png

The value is one more ``--set`` override of every task, after the tier's and the command's, so
each value's folder is a benchmark like any other (``merge`` pools two seed sets of one value;
``benchmark tables`` reads it). Every value is checked on every task with every method before
any run starts: a field no config has, a value outside the field's range, a value a method or
the config changes (a method that sets the field itself, a staleness bound the budget cannot
reach) or a method that cannot be built with it (an off-policy correction whose band is empty)
is refused in one line naming the value. ``--resume`` continues every value's benchmark, and may
add values; the field must be the one the folder was started with.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from sao_online.benchmark.clean_tree import check_clean_tree
from sao_online.benchmark.prepare import check_run_options, method_specs, prepare_benchmark
from sao_online.benchmark.protocol import FLOOR_METHOD, method_labels
from sao_online.benchmark.results import write_json_atomically
from sao_online.benchmark.results_files import read_sweep_file
from sao_online.benchmark.runner import SWEEP_FILE, run_benchmark
from sao_online.benchmark.suite import TierPlan, plan_tier
from sao_online.benchmark.sweep_folder import Sweep, read_sweep
from sao_online.benchmark.sweep_scorecard import write_sweep_scorecard
from sao_online.config import ConfigError, ConfigWarning, load_config, short_repr
from sao_online.config.loading import parse_override

SWEEP_FORMAT = 1


def parse_sweep(text: str) -> Sweep:
    """``FIELD=V1,V2,...`` as a :class:`Sweep`.

    Raises:
        ConfigError: no ``=``, no field, an empty value, a value given twice (as YAML reads
            it: ``4`` and ``4.0`` are one value) or two values that would share a folder.

    Example:
        >>> parse_sweep("runtime.max_staleness=0,4")
        Sweep(field='runtime.max_staleness', values=('0', '4'))
    """
    field, sep, rest = text.partition("=")
    field = field.strip()
    if not sep or not field:
        raise ConfigError(
            f"--sweep {short_repr(text)}: expected FIELD=V1,V2,..., e.g. "
            "runtime.max_staleness=0,2,4,8"
        )
    values = tuple(value.strip() for value in rest.split(","))
    if not all(values):
        raise ConfigError(f"--sweep {field}: an empty value in {short_repr(rest)}")
    sweep = Sweep(field, values)
    seen: dict[str, str] = {}
    folders: dict[str, str] = {}
    for value in values:
        _, parsed = parse_override(sweep.override(value))
        if isinstance(parsed, int | float) and not isinstance(parsed, bool):
            parsed = float(parsed)  # 4 and 4.0: one value
        key = json.dumps(parsed, sort_keys=True, default=str)
        if key in seen:
            raise ConfigError(f"--sweep {field}: {value} and {seen[key]} are the same value")
        seen[key] = value
        folder = sweep.folder(value)
        if folder in folders:
            raise ConfigError(
                f"--sweep {field}: {folders[folder]} and {value} would share the folder {folder}"
            )
        folders[folder] = value
    return sweep


def _lookup(data: Any, keys: list[str]) -> tuple[bool, Any]:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return False, None
        data = data[key]
    return True, data


def check_sweep(sweep: Sweep, plan: TierPlan, specs: list[str], overrides: list[str]) -> None:
    """Refuse, before anything runs, a value that does not load, build or take effect.

    Every value is loaded on every task with every method's overrides and the method built
    (``method_labels``); the field must then hold the value as given (the floor ``frozen`` is
    not asked: it never learns, so what it trains with does not change it).

    Raises:
        ConfigError: one line naming the field, the value, the task and (where it is one
            method's) the method.
    """
    from sao_online.jobs.methods import method_overrides

    for value in sweep.values:
        where = f"--sweep {sweep.override(value)}"
        extra = [*overrides, sweep.override(value)]
        for task in plan.tasks:
            # The task's own config first (None): a value it refuses or changes is the value's
            # fault, whatever the method.
            _check_value(sweep, value, task, extra, where, None)
            for spec in (spec for spec in specs if spec != FLOOR_METHOD):
                method = f"method {spec} sets {sweep.field} itself"
                _check_value(sweep, value, task, [*extra, *method_overrides(spec)], where, method)
                if task.method_overrides(spec):  # the suite's settings of that method alone
                    own = [*extra, *method_overrides(spec), *task.method_overrides(spec)]
                    _check_value(sweep, value, task, own, where, f"{method} in the suite")
        try:
            method_labels(plan, specs, extra)  # builds each method: its objective's band
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None


def _check_value(
    sweep: Sweep, value: str, task: Any, overrides: list[str], where: str, setter: str | None
) -> None:
    """One value on one task (with one method's overrides, or none): it loads, the config
    reads the field and holds the value. ``setter`` says who changed the value where the
    overrides after it are a method's (None: the task's config itself)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConfigWarning)
        try:
            config = load_config(task.config, [*task.overrides, *overrides])
        except ConfigError as error:
            raise ConfigError(f"{where}: task {task.name}: {error}") from None
    found, held = _lookup(config.to_dict(), sweep.field.split("."))
    if not found:
        raise ConfigError(
            f"{where}: task {task.name}: its config does not read {sweep.field} (backend "
            f"{config.runtime.backend})"
        )
    _, wanted = parse_override(sweep.override(value))
    if held == wanted:
        return
    if setter is not None:
        raise ConfigError(
            f"{where}: task {task.name}: {setter} ({held!r}); leave it out of --methods"
        )
    said = [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]
    raise ConfigError(
        f"{where}: task {task.name}: "
        + (said[0] if said else f"its config holds {held!r} instead (a rule of the config)")
    )


def _record(out: Path, sweep: Sweep, resume: bool) -> Sweep:
    """Write (or, resuming, extend) ``OUT/sweep.json``; the sweep with every value it holds."""
    path = out / SWEEP_FILE
    values = list(sweep.values)
    if path.exists():
        if not resume:
            raise ConfigError(
                f"--out: {out} holds a sweep already; --resume continues it, or choose another "
                "folder"
            )
        saved = read_sweep_file(path)
        if saved["field"] != sweep.field:
            raise ConfigError(
                f"--sweep: {out} is a sweep of {saved['field']}, not of {sweep.field}"
            )
        values = [*saved["values"], *(v for v in values if v not in saved["values"])]
    elif out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out: {out} is not empty and holds no sweep; choose another folder")
    recorded = Sweep(sweep.field, tuple(values))
    write_json_atomically(
        path,
        {
            "format": SWEEP_FORMAT,
            "field": recorded.field,
            "values": list(recorded.values),
            "folders": {value: recorded.folder(value) for value in recorded.values},
        },
    )
    return recorded


def _check_plans(
    sweep: Sweep,
    out: Path,
    suite: str | Path,
    tier: str,
    methods: list[str] | None,
    overrides: list[str],
    reps: int,
    benchmark: dict[str, Any],
) -> None:
    """Plan every value's benchmark as it will run (its size against the machine included)
    before the first one starts, so a value too large for the machine is refused before any
    run instead of after the values before it."""
    options = ("seeds", "first_seed", "backend", "address", "parallel", "warm_starts", "controls")
    for value in sweep.values:
        try:
            with warnings.catch_warnings():  # each value's benchmark says them when it runs
                warnings.simplefilter("ignore")
                prepare_benchmark(
                    out=out / sweep.folder(value),
                    suite=suite,
                    tier=tier,
                    methods=methods,
                    overrides=[*overrides, sweep.override(value)],
                    reps=reps,
                    **{name: benchmark[name] for name in options if name in benchmark},
                )
        except ConfigError as error:
            raise ConfigError(f"--sweep {sweep.override(value)}: {error}") from None


def run_sweep(
    *,
    sweep: str,
    out: str | Path,
    suite: str | Path = "core",
    tier: str = "smoke",
    methods: list[str] | None = None,
    overrides: list[str] | None = None,
    resume: bool = False,
    reps: int = 2000,
    **benchmark: Any,
) -> Path:
    """Run ``tier`` of ``suite`` at each value of ``sweep`` (``FIELD=V1,V2,...``); write each
    value's scorecard and the sweep's.

    ``benchmark`` holds the other options of :func:`~sao_online.benchmark.run_benchmark`
    (seeds, first_seed, backend, address, parallel, progress, warm_starts, allow_dirty).

    Returns:
        The path of the sweep's ``scorecard.md``.

    Raises:
        ConfigError: a malformed sweep or a value refused by :func:`check_sweep` (before any
            run), an output folder that holds something else, or what ``run_benchmark`` raises.
    """
    parsed = parse_sweep(sweep)
    check_run_options(  # what every value's benchmark would refuse, before sweep.json is written
        seeds=benchmark.get("seeds"),
        first_seed=benchmark.get("first_seed"),
        backend=benchmark.get("backend", "local"),
        address=benchmark.get("address"),
        parallel=benchmark.get("parallel"),
        reps=reps,
    )
    out = Path(out)
    overrides = list(overrides or [])
    plan = plan_tier(suite, tier)
    for task in plan.tasks:
        try:
            task.load(overrides)
        except ConfigError as error:
            raise ConfigError(f"--set: task {task.name}: {error}") from None
    check_sweep(parsed, plan, method_specs(methods, plan), overrides)
    _check_plans(parsed, out, suite, tier, methods, overrides, reps, benchmark)
    check_clean_tree(out, allow_dirty=benchmark.get("allow_dirty", False))
    recorded = _record(out, parsed, resume)
    for value in recorded.values:
        folder = out / recorded.folder(value)
        run_benchmark(
            out=folder,
            suite=suite,
            tier=tier,
            methods=methods,
            overrides=[*overrides, recorded.override(value)],
            resume=resume,
            reps=reps,
            **benchmark,
        )
    return write_sweep_scorecard(out, reps=reps)


def merge_sweeps(
    sources: list[str | Path], out: str | Path, *, reps: int = 2000, allow_dirty: bool = False
) -> Path:
    """Pool sweeps of one field (other seed sets, machines) into ``out``: each value's
    benchmark folders merged as ``benchmark merge`` merges them (``out`` keeps the results, not
    the run directories; ``allow_dirty`` as there), then the sweep's scorecard. A value some
    sweeps lack is pooled from those that have it.

    Raises:
        ConfigError: a source that is no sweep, or sweeps of different fields.
        ProtocolMismatch: one value's folders measured under different protocols.
    """
    from sao_online.benchmark.merge import merge_results

    check_clean_tree(out, allow_dirty=allow_dirty)
    read = [read_sweep(source) for source in sources]
    field = read[0][0].field
    for source, (sweep, _) in zip(sources, read):
        if sweep.field != field:
            raise ConfigError(f"merge: {source} is a sweep of {sweep.field}, not of {field}")
    values = list(dict.fromkeys(value for sweep, _ in read for value in sweep.values))
    out = Path(out)
    pooled = _record(out, Sweep(field, tuple(values)), resume=False)
    for value in pooled.values:
        folders = [folders[value] for sweep, folders in read if value in sweep.values]
        kept = [folder for folder in folders if (folder / "results" / "benchmark.json").is_file()]
        if kept:
            merge_results(kept, out / pooled.folder(value), reps=reps, allow_dirty=allow_dirty)
    return write_sweep_scorecard(out, reps=reps)
