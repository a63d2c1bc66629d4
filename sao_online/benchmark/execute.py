"""What runs where a benchmark run runs: a child process of this machine or a Ray task.

``execute_run`` runs one job (one task, method and seed) to its budget through the job pool's
``run_one`` and returns the run's small result record, with the provenance of the process that
ran it. ``execute_warm_start`` builds a task's warm start. ``execute_job`` runs either (by the
job's ``kind``) and measures the CPU time it took. All are module-level functions, so a
forkserver child or a Ray worker imports them by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sao_online.benchmark.results import summarize_run
from sao_online.rundir.provenance import provenance, stable_hash


def execute_run(job: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Run ``job`` (continuing its run directory when there is one) and summarise it.

    ``progress.put(n)`` is called with the episodes each update consumed.
    """
    from sao_online.jobs.pool import run_one
    from sao_online.rundir.layout import read_config_file

    job = {**job, "resume": (Path(job["out"]) / "config.yaml").exists()}
    run_one(job, progress)
    resolved = read_config_file(Path(job["out"]) / "config.yaml")
    return {
        "key": job["key"],
        **summarize_run(job["out"], job.get("time_window")),
        "config_hash": stable_hash(resolved),
        "code": resolved.get("code"),  # the code it ran: the package's, the user's modules
        "warm_start": task_warm_start(job),
        "provenance": provenance(),
    }


def task_warm_start(job: dict[str, Any]) -> str | None:
    """The weights id of the cached warm start of ``job``'s task config (what its run started
    from); None when the config uses none or it is not cached here."""
    from sao_online.config import load_config
    from sao_online.learning.warm_start import warm_start_path, warm_start_weights

    config = load_config(job["config"], job["overrides"])
    if not config.model.warm_start:
        return None
    path = warm_start_path(config)
    return warm_start_weights(path) if path.is_dir() else None


def execute_warm_start(job: dict[str, Any], progress: Any) -> str:
    """Build (or reuse) the warm start of ``job``'s task config; return its folder."""
    import torch

    from sao_online.config import load_config
    from sao_online.learning.warm_start import warm_start

    torch.set_num_threads(1)
    return str(warm_start(load_config(job["config"], job["overrides"])))


def execute_job(job: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Run a benchmark job (``job["kind"]``: ``run`` or ``warm start``) in this fresh child
    process and measure it: ``{"result": <its result>, "cpu_seconds": <user + system seconds
    of this process and the children it waited for, such as a sandbox's programs>}``.

    The process must be new for the job (a forkserver child: its counters start at zero)."""
    from sao_online.benchmark.costs import WARM_START
    from sao_online.jobs.pool import process_cpu_seconds

    if job["kind"] == WARM_START:
        result: Any = execute_warm_start(job, progress)
    else:
        result = execute_run(job, progress)
    return {"result": result, "cpu_seconds": process_cpu_seconds()}
