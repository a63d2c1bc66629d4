"""``--backend ray``: the benchmark's runs as Ray tasks on a cluster.

Each run is one task asking for the CPUs its suite task declares (``cpus``); Ray places it on
any node with that many free. Each warm start is built once, by a task of its own (or taken from
this machine's cache), and its files travel to the run tasks through the object store and are
kept in this machine's cache too, so no node builds a warm start that was built before.
Progress comes back through a Ray queue; each finished run's result record comes back as the
task's return value and is written here, on the driver, so resuming works as it does locally:
runs with a result are skipped, the others start again (continuing their run directory when the
node they land on has it, e.g. on shared storage).

Every node must be able to import ``sao_online`` (and a user's task or method modules). When
this command starts Ray itself (no Ray initialised yet) it passes its working directory on the
workers' ``PYTHONPATH``, which is enough on one machine or with shared storage.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sao_online.benchmark.warm_starts import warm_start_unit
from sao_online.config import ConfigError

_WAIT_SECONDS = 0.5


class _QueueProgress:
    """``put(n)`` for ``run_experiment``'s progress callback, onto a Ray queue."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def put(self, episodes: int) -> None:
        self.queue.put(episodes)


def _packed(folder: Path) -> dict[str, Any]:
    """A warm-start folder as its name and files (for the object store)."""
    return {
        "name": folder.name,
        "files": {
            str(path.relative_to(folder)): path.read_bytes()
            for path in folder.rglob("*")
            if path.is_file()
        },
    }


def _warm_start_task(job: dict[str, Any]) -> dict[str, Any]:
    """Build a task's warm start on this node; return its files for the run tasks."""
    from sao_online.benchmark.execute import execute_warm_start

    return _packed(Path(execute_warm_start(job, None)))


def _local_warm_start(job: dict[str, Any]) -> Path | None:
    """This machine's cached warm start of ``job``'s task, when it has one."""
    from sao_online.config import load_config
    from sao_online.learning.warm_start import warm_start_path

    path = warm_start_path(load_config(job["config"], job["overrides"]))
    return path if (path / "warm_start.json").exists() else None


def _install_warm_start(warm: dict[str, Any]) -> None:
    """Put a warm start's files into this node's cache, unless it has them already."""
    from sao_online.learning.warm_start import cache_root

    target = cache_root() / "warm-start" / warm["name"]
    if (target / "warm_start.json").exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    for relative, content in warm["files"].items():
        path = staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    try:
        os.replace(staging, target)
    except OSError:  # another task installed it first
        shutil.rmtree(staging, ignore_errors=True)


def _run_task(job: dict[str, Any], queue: Any, warm: dict[str, Any] | None) -> dict[str, Any]:
    import ray

    from sao_online.benchmark.execute import execute_run

    if warm is not None:
        _install_warm_start(warm)
    record = execute_run(job, _QueueProgress(queue))
    record["ray_node"] = ray.get_runtime_context().get_node_id()
    return record


def _largest_node_cpus(ray: Any) -> float:
    return max(
        (node["Resources"].get("CPU", 0.0) for node in ray.nodes() if node.get("Alive")),
        default=0.0,
    )


def _first_line(error: BaseException) -> str:
    cause = getattr(error, "cause", None) or error
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[-1][:300]}" if lines else type(cause).__name__


def run_on_ray(
    jobs: list[dict[str, Any]],
    warm_jobs: list[dict[str, Any]],
    *,
    address: str | None,
    bar: Any,
    on_result: Callable[[str, dict[str, Any]], None],
) -> list[str]:
    """Run ``jobs`` as Ray tasks; return the failures (``"<name>: <error>"``)."""
    from sao_online.runtime.workers.ray_backend import import_ray

    ray = import_ray()
    from ray.util.queue import Empty, Queue

    started_here = not ray.is_initialized()
    if started_here:
        path = os.pathsep.join(
            part for part in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if part
        )
        try:
            ray.init(
                address=address,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
                log_to_driver=False,
                include_dashboard=False if address is None else None,
            )
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise ConfigError(f"--address: cannot join Ray at {address!r}: {error}") from None
    try:
        largest = _largest_node_cpus(ray)
        for job in jobs:
            if job["cpus"] > largest:
                raise ConfigError(
                    f"task {job['key']['task']}: a run needs {job['cpus']} CPUs; the largest "
                    f"node of the Ray cluster has {largest:g}"
                )
        progress = Queue()
        warm_task = ray.remote(_warm_start_task)
        run_task = ray.remote(_run_task)
        # A warm start this machine has is sent from here; the others are built by a task
        # and kept here too once done, so a resumed benchmark builds none of them again.
        warm_refs, built_remotely = {}, []
        for job in warm_jobs:
            local = _local_warm_start(job)
            if local is not None:
                reference = ray.put(_packed(local))
            else:
                reference = warm_task.options(num_cpus=1).remote(job)
                built_remotely.append(reference)
            warm_refs.update({warm_start_unit(job, served): reference for served in job["serves"]})
        refs = {
            run_task.options(num_cpus=job["cpus"], max_retries=0).remote(
                job, progress, warm_refs.get(warm_start_unit(job))
            ): job
            for job in jobs
        }
        failures = []
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=_WAIT_SECONDS)
            while True:
                try:
                    bar.update(progress.get_nowait())
                except Empty:
                    break
            for ref in ready:
                job = refs.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as error:  # noqa: BLE001  (a task's failure, reported by name)
                    failures.append(f"{job['name']}: {_first_line(error)}")
                else:
                    on_result(job["name"], record)
        for ref in built_remotely:
            with contextlib.suppress(Exception):  # a failed build already failed its runs
                _install_warm_start(ray.get(ref))
        return failures
    finally:
        if started_here:
            ray.shutdown()
