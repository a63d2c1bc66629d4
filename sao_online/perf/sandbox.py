"""``sao-online bench sandbox``: program executions per second for each sandbox backend.

Every backend runs the same programs: CodeShift submissions of the kinds a policy produces
(correct solutions under both helper versions, a wrong boundary, a stale helper call, a syntax
error, an exception), each against its six hidden tests, one after the other in one sandbox.
The first run of each backend is timed apart (``startup_seconds``: for Docker it starts the warm
container, for the subprocess backend as root its fork server) and not counted. Beside the
backends, ``subprocess-per-run`` is the subprocess backend without its fork server (an
interpreter per run, what it does where it is not root). Backends that cannot run here are
reported with the reason.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from sao_online.environments.code_shift import KIT_SOURCES, CodeShiftEnv, program_for
from sao_online.environments.sandbox import (
    BACKENDS,
    SandboxUnavailable,
    SubprocessSandbox,
    TestCase,
    make_sandbox,
)

#: What can be measured: every backend, and the subprocess backend without its fork server.
VARIANTS = (*BACKENDS, "subprocess-per-run")


def workload(num_tasks: int = 8) -> list[tuple[str, str, list[TestCase], dict[str, str]]]:
    """(program, function, tests, files) per run: ``num_tasks`` CodeShift tasks x 6 programs."""
    runs = []
    env = CodeShiftEnv(sandbox="subprocess")
    try:
        for seed in range(num_tasks):
            env.reset(
                seed=seed, options={"drift": {"boundary": "exclusive", "helper_version": "v1"}}
            )
            task, tests = env._task, env._tests  # noqa: SLF001  (the env's own hidden tests)
            v1_files, v2_files = {"kit.py": KIT_SOURCES["v1"]}, {"kit.py": KIT_SOURCES["v2"]}
            programs = [
                (program_for(task, "v1", "exclusive"), v1_files),  # correct
                (program_for(task, "v2", "exclusive"), v2_files),  # correct after the drift
                (program_for(task, "v1", "inclusive"), v1_files),  # wrong boundary
                (program_for(task, "v1", "exclusive"), v2_files),  # stale helper call
                (f"def {task.name}(x)\n    return x\n", v1_files),  # syntax error
                (f"def {task.name}(x):\n    return x // 0\n", v1_files),  # exception
            ]
            runs += [(program, task.name, tests, files) for program, files in programs]
    finally:
        env.close()
    return runs


def _measure(backend: str, runs: list, repeats: int) -> dict[str, Any]:
    try:
        if backend == "subprocess-per-run":
            sandbox = SubprocessSandbox(fork_server=False)
        else:
            sandbox = make_sandbox(backend)
    except SandboxUnavailable as error:
        return {"available": False, "reason": str(error)}
    try:
        program, function, tests, files = runs[0]
        started = time.perf_counter()
        sandbox.run(program, function, tests, files=files, helpers=["kit"])
        startup = time.perf_counter() - started
        durations, passed = [], 0
        begun = time.perf_counter()
        for _ in range(repeats):
            for program, function, tests, files in runs:
                started = time.perf_counter()
                result = sandbox.run(program, function, tests, files=files, helpers=["kit"])
                durations.append(time.perf_counter() - started)
                passed += result.num_passed
        seconds = time.perf_counter() - begun
    finally:
        sandbox.close()
    ordered = sorted(durations)
    return {
        "available": True,
        "executions": len(durations),
        "seconds": round(seconds, 3),
        "executions_per_second": round(len(durations) / seconds, 2),
        "mean_ms": round(1000 * statistics.fmean(durations), 1),
        "p50_ms": round(1000 * ordered[len(ordered) // 2], 1),
        "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "startup_seconds": round(startup, 3),
        "tests_passed": passed,
    }


def run_sandbox_benchmark(
    quick: bool = False,
    *,
    backends: list[str] | None = None,
    num_tasks: int | None = None,
    repeats: int | None = None,
) -> dict[str, Any]:
    """Executions per second of every backend on the same programs.

    Args:
        quick: 2 tasks x 6 programs once (12 executions per backend) instead of 8 x 6 x 2 (96).
        backends: which to measure (default all: docker, bubblewrap, subprocess,
            subprocess-per-run).
        num_tasks: CodeShift tasks in the workload (6 programs each).
        repeats: passes over the workload.

    Returns:
        ``executions_per_second`` per backend at the top level (None where it cannot run), the
        workload, and per backend ``executions``, ``seconds``, ``mean_ms``, ``p50_ms``,
        ``p95_ms``, ``startup_seconds`` (the uncounted first run), ``tests_passed`` (equal
        across backends: they ran the same programs), or ``available: false`` with the reason.
    """
    names = list(backends or VARIANTS)
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise ValueError(f"backends: unknown {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    tasks = num_tasks if num_tasks is not None else (2 if quick else 8)
    passes = repeats if repeats is not None else (1 if quick else 2)
    runs = workload(tasks)
    measured = {name: _measure(name, runs, passes) for name in names}
    return {
        "workload": {
            "tasks": tasks,
            "programs_per_task": 6,
            "repeats": passes,
            "tests_per_program": 6,
            "runs_per_backend": len(runs) * passes,
        },
        "executions_per_second": {
            name: side.get("executions_per_second") for name, side in measured.items()
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **measured,
    }
