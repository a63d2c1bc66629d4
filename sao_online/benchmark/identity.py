"""Whether kept results belong to the benchmark that pools them: one check for ``--resume``,
``merge`` and the scorecard.

A run's result records what it ran: its tier, the hash of its resolved config (the run
directory's ``config.yaml``: settings, schedule, method, and the code it ran, see
``sao_online.util.code_identity``) and that code itself. Before ``--resume`` continues a benchmark,
every result kept in its folder is compared with the run this benchmark would make in its place
(:func:`check_kept_results`): another tier, another config (a file copied in from another
setup) or other code (a plug-in module edited since) is refused, naming the file and the first
difference. Results pooled from several runs (a folder, ``merge``'s sources) must have run one
code per task and method (:func:`check_one_code`), the module that differs named.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from sao_online.benchmark.results_files import ResultsError
from sao_online.util.code_identity import code_difference, stable_hash


def expected_run(
    config_source: str | dict[str, Any], overrides: list[str], cache: dict[str, Any]
) -> dict[str, Any]:
    """What a run of this config would record: ``config_hash`` (of its ``config.yaml``) and
    ``code``. ``cache`` keeps each task's schedule and each method between calls."""
    from sao_online.algorithms import build_method
    from sao_online.config import load_config
    from sao_online.config.run_schedule import resolve_schedule
    from sao_online.runtime.launch import resolved_run_config

    config = load_config(config_source, overrides)
    schedule_key = stable_hash([config.env.id, config.schedule, config.budget.episodes])
    if schedule_key not in cache:
        cache[schedule_key] = resolve_schedule(config)
    method_key = stable_hash(config.algorithm.model_dump()) + stable_hash(
        config.rollout.model_dump()
    )
    if method_key not in cache:
        cache[method_key] = build_method(config)
    resolved = resolved_run_config(config, cache[schedule_key], cache[method_key])
    written = yaml.safe_load(yaml.safe_dump(resolved, sort_keys=False))  # as config.yaml reads
    code = written.pop("code", None)
    return {
        "config_hash": stable_hash({**written, "code": code}),
        "config_hash_before_code": stable_hash(written),  # what results kept before code did
        "code": code,
    }


def check_kept_results(
    records: list[tuple[Path, dict[str, Any]]],
    job_for: Callable[[str, str, int], dict[str, Any] | None],
    tier: str,
) -> None:
    """Refuse a kept result that this benchmark would not have made.

    Args:
        records: (file, record) of every result kept in the folder.
        job_for: (task, method label, seed) -> the job this benchmark would run there
            (``config``, ``overrides``), or None for a method it does not run.
        tier: this benchmark's tier.

    Raises:
        ResultsError: naming the first file that ran at another tier, with another config or
            with other code.
    """
    cache: dict[str, Any] = {}
    for path, record in records:
        key = record["key"]
        where = f"--resume: {path}"
        if key["tier"] != tier:
            raise ResultsError(
                f"{where}: a result of tier {key['tier']}, and this benchmark's tier is {tier}"
            )
        job = job_for(key["task"], key["method"], key["seed"])
        if job is None:
            continue  # a method this command does not run: checked when it ran
        expected = expected_run(job["config"], job["overrides"], cache)
        known = "config_hash" if record.get("code") else "config_hash_before_code"
        if record["config_hash"] == expected[known]:
            continue
        code = code_difference(record.get("code"), expected["code"])
        if code is not None:
            raise ResultsError(
                f"{where}: ran other code than this benchmark runs ({code}); pool runs of one "
                "code: restore that code, or start the benchmark in a new folder"
            )
        raise ResultsError(
            f"{where}: its config hash {record['config_hash']} is not this benchmark's "
            f"{expected['config_hash']} for that run (a result of another setup: copied in, or "
            "the suite or --set changed); remove it to run it again"
        )


def check_one_code(runs: pd.DataFrame, codes: dict[str, Any], where: str = "results") -> None:
    """Refuse runs of one task and method that ran different code (results that recorded none
    are not compared).

    Args:
        runs: the runs table (``code_id`` per run).
        codes: code id -> code identity (``benchmark.json``'s ``code``).
        where: what holds the runs, for the message.

    Raises:
        ResultsError: naming the task, the method, the seeds of each code and the module that
            differs.
    """
    if "code_id" not in runs:
        return
    known = runs.dropna(subset=["code_id"])
    for (task, method), rows in known.groupby(["task", "method"], sort=True):
        ids = list(dict.fromkeys(rows["code_id"]))
        if len(ids) < 2:
            continue
        first, second = ids[:2]
        seeds = {
            code: ", ".join(str(seed) for seed in sorted(rows[rows["code_id"] == code]["seed"]))
            for code in (first, second)
        }
        difference = code_difference(codes.get(first), codes.get(second)) or "code ids differ"
        raise ResultsError(
            f"{where}: {method} on {task} ran two codes, seeds {seeds[first]} and seeds "
            f"{seeds[second]}: {difference}; a result pools runs of one code"
        )
