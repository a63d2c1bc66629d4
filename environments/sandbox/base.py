"""The sandbox interface: run untrusted Python source against unit tests, under limits.

One call, :meth:`Sandbox.run`, takes the program (module source), the name of the function the
tests call, the tests (positional arguments and the expected value) and extra files for the
program's folder (a helper module, say). It returns a :class:`SandboxResult` with one
:class:`TestOutcome` per test: passed or not, and why (wrong answer, exception, syntax error,
timeout, a resource limit).

Every backend runs the same in-sandbox harness (``harness.py``) with the same request; they
differ only in how the process is confined. The harness prints one JSON record per event
behind a per-run random nonce, so a program that prints look-alike lines cannot fake results;
:func:`interpret_output` turns the records plus the way the process ended into the result.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import signal
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024

#: Programs run as an unprivileged uid of their own, one per concurrent run, so concurrent runs
#: neither share a process limit (RLIMIT_NPROC counts per uid, across the whole machine) nor get
#: killed by each other's cleanup. Each process takes a block of MAX_CONCURRENT_RUNS uids at
#: FIRST_RUN_UID + pid * MAX_CONCURRENT_RUNS, so processes running sandboxes side by side never
#: share one. The uids need no account.
FIRST_RUN_UID = 100_000
MAX_CONCURRENT_RUNS = 64


def run_uid_block(pid: int | None = None) -> range:
    """The run uids of process ``pid`` (default: this one)."""
    base = FIRST_RUN_UID + (os.getpid() if pid is None else pid) * MAX_CONCURRENT_RUNS
    return range(base, base + MAX_CONCURRENT_RUNS)


class _RunUids:
    """This process's block of run uids (a forked child takes its own block)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free_count = threading.Semaphore(MAX_CONCURRENT_RUNS)
        self._pid = -1
        self._free: list[int] = []

    @contextlib.contextmanager
    def take(self) -> Iterator[int]:
        self._free_count.acquire()
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._free = list(reversed(run_uid_block(self._pid)))
            uid = self._free.pop()
        try:
            yield uid
        finally:
            with self._lock:
                if self._pid == os.getpid():
                    self._free.append(uid)
            self._free_count.release()


_run_uids = _RunUids()


@contextlib.contextmanager
def run_files(payload: bytes) -> Iterator[tuple[Any, Any]]:
    """(request, output): host temp files for one run, the request holding ``payload`` and
    rewound, to hand to the harness as its stdin and stdout; gone when the block ends."""
    with (
        tempfile.TemporaryFile(prefix="sao-sandbox-out-") as output,
        tempfile.TemporaryFile(prefix="sao-sandbox-in-") as request,
    ):
        request.write(payload)
        request.flush()
        request.seek(0)
        yield request, output


#: The source of the program run inside every sandbox (standard library only, Python 3.9+).
HARNESS_SOURCE: str = (Path(__file__).with_name("harness.py")).read_text()

#: Statuses of a whole run; ``ok`` means the harness ran every test (each may still fail).
RUN_STATUSES = (
    "ok",
    "syntax_error",
    "load_error",
    "missing_function",
    "timeout",
    "cpu_limit",
    "memory_limit",
    "file_limit",
    "output_limit",
    "exited",
    "sandbox_error",
)


class SandboxUnavailable(RuntimeError):
    """The requested backend cannot run on this machine (the message says what is missing)."""


class SandboxWarning(UserWarning):
    """``auto`` chose a backend that cannot give every guarantee here (the message says which)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one program run.

    Attributes:
        cpu_seconds: CPU time (RLIMIT_CPU soft limit; the hard limit is one second more).
        wall_seconds: wall-clock time after which the whole run is killed.
        memory_bytes: address space of each process (RLIMIT_AS).
        file_bytes: largest file a process may write (RLIMIT_FSIZE); also caps the run's output.
        processes: processes of the sandbox user (RLIMIT_NPROC; Docker adds a pids limit).
        disk_bytes: size of the private work folder where the backend can bound it (tmpfs).
    """

    cpu_seconds: int = 2
    wall_seconds: float = 5.0
    memory_bytes: int = 512 * MIB
    file_bytes: int = 1 * MIB
    processes: int = 64
    disk_bytes: int = 16 * MIB

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "memory_bytes", "file_bytes", "processes", "disk_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"Limits.{name}: expected a positive int, got {value!r}")
        wall = self.wall_seconds
        if (
            isinstance(wall, bool)
            or not isinstance(wall, int | float)
            or not (math.isfinite(wall) and wall > 0)
        ):
            raise ValueError(f"Limits.wall_seconds: expected a positive number, got {wall!r}")
        if self.memory_bytes < 64 * MIB:
            raise ValueError(
                "Limits.memory_bytes: Python needs at least 64 MiB of address space, "
                f"got {self.memory_bytes}"
            )


@dataclass(frozen=True)
class TestCase:
    """One hidden test: call the function with ``args`` and compare with ``expected``.

    Attributes:
        args: positional arguments (JSON values: int, float, str, bool, None, lists).
        expected: the value the function must return (same kinds; ``True`` is not ``1``).
        name: how the test is shown, e.g. ``fit(12)``; built from ``args`` when empty.
    """

    __test__ = False  # not a pytest test class

    args: tuple[Any, ...]
    expected: Any
    name: str = ""

    def label(self, function: str) -> str:
        return self.name or f"{function}({', '.join(repr(arg) for arg in self.args)})"


@dataclass(frozen=True)
class TestOutcome:
    """The verdict on one test.

    Attributes:
        name: the test's label.
        passed: the function returned the expected value.
        reason: ``passed`` or why not (``wrong answer: got 9, expected 8``, ``exception:
            ZeroDivisionError: ...``, ``not run: timeout after 5 s``, ...).
        value: what the function returned (None when it returned nothing usable).
    """

    __test__ = False

    name: str
    passed: bool
    reason: str
    value: Any = None


@dataclass
class SandboxResult:
    """The result of one run.

    Attributes:
        backend: which sandbox ran the program (``subprocess``, ``bubblewrap``, ``docker``).
        status: one of :data:`RUN_STATUSES`.
        detail: the run-level reason in words (empty when ``ok``).
        outcomes: one per test, in order.
        helper_calls: functions of the ``helpers`` modules the program called, and names it
            asked of them that they lack, name -> count (as the harness counted them).
        seconds: wall time of the run, sandbox start-up included.
        run_id: the run's tag, the last argument on its processes' command lines.
    """

    backend: str
    status: str
    detail: str
    outcomes: list[TestOutcome]
    helper_calls: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    run_id: str = ""

    @property
    def num_passed(self) -> int:
        return sum(outcome.passed for outcome in self.outcomes)

    @property
    def fraction_passed(self) -> float:
        return self.num_passed / len(self.outcomes) if self.outcomes else 0.0

    @property
    def all_passed(self) -> bool:
        return bool(self.outcomes) and self.num_passed == len(self.outcomes)


class Sandbox:
    """A place to run untrusted programs. Subclasses implement :meth:`_execute`.

    Example:
        >>> from sao_online.environments.sandbox import make_sandbox, TestCase
        >>> with make_sandbox("subprocess") as box:                    # doctest: +SKIP
        ...     result = box.run("def add(a, b):\\n    return a + b\\n", "add",
        ...                      [TestCase((1, 2), 3), TestCase((2, 2), 5)])
        >>> [o.reason for o in result.outcomes]                        # doctest: +SKIP
        ['passed', 'wrong answer: got 4, expected 5']
    """

    #: The backend's name, reported in every result.
    name: str = ""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()

    def missing_guarantees(self) -> list[str]:
        """What this sandbox cannot promise on this machine, in words (empty: nothing).

        The guarantees: no network; no file of the host or of other runs readable; a fresh,
        private, size-limited writable area per run that nothing of an earlier run is left in;
        a user of its own, so the process limit and the clean-up cover exactly the run.
        """
        return []

    @staticmethod
    def run_uid() -> contextlib.AbstractContextManager[int]:
        """A uid no other run on this machine is using, for the length of one run."""
        return _run_uids.take()

    def run(
        self,
        program: str,
        function: str,
        tests: Sequence[TestCase],
        *,
        files: Mapping[str, str] | None = None,
        helpers: Sequence[str] = (),
        limits: Limits | None = None,
    ) -> SandboxResult:
        """Run ``program`` and call ``function`` once per test.

        Args:
            program: Python module source (stored as ``solution.py``).
            function: name of the function the tests call.
            tests: the tests, run in order in one process.
            files: extra files for the program's folder, name -> text (e.g. ``kit.py``).
            helpers: modules among ``files`` (e.g. ``kit``) whose function calls the harness
                counts into ``SandboxResult.helper_calls``: it imports them before the program
                and wraps their public functions, so the count is what it saw called.
            limits: this run's limits; the sandbox's own when None.

        Returns:
            The per-test verdicts and the run status. Never raises for anything the program
            does; raises :class:`SandboxUnavailable` if the backend itself broke.
        """
        if not function.isidentifier():
            raise ValueError(f"function: expected a Python identifier, got {function!r}")
        extra = dict(files or {})
        for name in extra:
            if "/" in name or name.startswith(".") or name == "solution.py":
                raise ValueError(f"files: {name!r} is not a plain file name other than solution.py")
        for helper in helpers:
            if not helper.isidentifier() or f"{helper}.py" not in extra:
                raise ValueError(f"helpers: {helper!r} is not a module among the files")
        limits = limits or self.limits
        nonce = secrets.token_hex(16)
        # On the harness's command line (the nonce must stay off it: the program can read its
        # own command line), so a run's processes can be found from outside.
        run_id = secrets.token_hex(8)
        request = {
            "nonce": nonce,
            "function": function,
            "files": {**extra, "solution.py": program},
            "helpers": list(helpers),
            "tests": [list(test.args) for test in tests],
        }
        payload = json.dumps(request).encode()
        with self.run_uid() as uid:
            output, ending, seconds = self._execute(payload, limits, uid, run_id)
        result = interpret_output(output, nonce, function, tests, ending, limits)
        result.backend = self.name
        result.seconds = seconds
        result.run_id = run_id
        return result

    def _execute(
        self, payload: bytes, limits: Limits, uid: int, run_id: str
    ) -> tuple[bytes, Ending, float]:
        """Run the harness (``python3 -E -s -c HARNESS_SOURCE run_id``) with ``payload`` on its
        stdin, as ``uid`` where the backend can switch users; return (stdout, how it ended,
        seconds)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the sandbox holds (containers, folders). Safe to call twice."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class Ending:
    """How the harness process ended: its exit code (negative: killed by that signal), or a
    limit the backend enforced from outside (``timeout``, ``output_limit``)."""

    returncode: int | None = None
    enforced: str = ""


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def same_value(value: Any, expected: Any) -> bool:
    """Equal and of the same JSON kind (``True`` does not pass for ``1``, ``1.0`` does not for
    ``1``); lists compare item by item."""
    if isinstance(expected, list):
        return (
            isinstance(value, list)
            and len(value) == len(expected)
            and all(same_value(v, e) for v, e in zip(value, expected))
        )
    return type(value) is type(expected) and value == expected


def _ending_status(ending: Ending, limits: Limits) -> tuple[str, str]:
    if ending.enforced == "timeout":
        return "timeout", f"timeout after {limits.wall_seconds:g} s"
    if ending.enforced == "output_limit":
        return "output_limit", f"output limit ({limits.file_bytes} bytes)"
    code = ending.returncode
    # Signals arrive either as -N (the process itself) or 128 + N (reported by a shell).
    signal_number = (
        -code
        if code is not None and code < 0
        else (code - 128 if code is not None and 128 < code < 160 else None)
    )
    if signal_number == signal.SIGXCPU or signal_number == signal.SIGKILL:
        # SIGKILL without a wall timeout is the CPU hard limit (soft limit + 1 s).
        return "cpu_limit", f"CPU time limit ({limits.cpu_seconds} s)"
    if signal_number == signal.SIGXFSZ:
        return "file_limit", f"file size limit ({limits.file_bytes} bytes)"
    if signal_number is not None:
        return "exited", f"killed by signal {signal_number}"
    return "exited", f"the program ended the run (exit code {code})"


def interpret_output(
    output: bytes,
    nonce: str,
    function: str,
    tests: Sequence[TestCase],
    ending: Ending,
    limits: Limits,
) -> SandboxResult:
    """Turn the harness's records (lines ``<nonce> <json>``) and the ending into a result."""
    prefix = nonce.encode() + b" "
    records = []
    for line in output.splitlines():
        if line.startswith(prefix):
            try:
                record = json.loads(line[len(prefix) :])
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    by_index: dict[int, dict] = {}
    status, detail = "", ""
    helper_calls: dict[str, int] = {}
    for record in records:
        calls = record.get("helper_calls")
        if isinstance(calls, dict):
            helper_calls = {str(k): int(v) for k, v in calls.items() if isinstance(v, int)}
        event = record.get("event")
        if event == "test" and isinstance(record.get("index"), int):
            by_index[record["index"]] = record
        elif event == "done":
            status = "ok"
        elif event in (
            "syntax_error",
            "load_error",
            "missing_function",
            "memory_limit",
            "file_limit",
        ):
            status, detail = event, str(record.get("detail", ""))[:300]
    if not status:
        if ending.enforced == "" and ending.returncode == 0:
            status, detail = "exited", "the program ended the run before the tests finished"
        else:
            status, detail = _ending_status(ending, limits)
    outcomes = []
    for index, test in enumerate(tests):
        name = test.label(function)
        record = by_index.get(index)
        if record is None:
            reason = f"not run: {detail}" if detail else "not run"
            outcomes.append(TestOutcome(name, False, reason))
        elif "error" in record:
            outcomes.append(TestOutcome(name, False, str(record["error"])[:300]))
        else:
            value = record.get("value")
            if same_value(value, test.expected):
                outcomes.append(TestOutcome(name, True, "passed", value))
            else:
                outcomes.append(
                    TestOutcome(
                        name,
                        False,
                        f"wrong answer: got {_short(value)}, expected {_short(test.expected)}",
                        value,
                    )
                )
    return SandboxResult(
        backend="", status=status, detail=detail, outcomes=outcomes, helper_calls=helper_calls
    )
