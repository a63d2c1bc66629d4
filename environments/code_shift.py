"""CodeShift-v0: write a small Python function; hidden unit tests score it in a sandbox.

The prompt asks for one function of ``x`` (its name, a one-line spec, one example) and
documents a helper module, ``kit``, as version 1:

    Write fit(x): return x + 3 kept within the range 2..9. Example: fit(4) == 7.
    You may import kit (kit 1.0): kit.clamp(x, lo, hi) is x limited to lo..hi.
    Reply with Python source.

The action is module source (optionally inside a fenced ``python`` code block). It runs in a
sandbox (:mod:`sao_online.environments.sandbox`) where hidden tests call the function. Two things
drift, and the prompt states neither:

- ``boundary``: whether "the range LO..HI" includes HI (``inclusive``: values above HI become
  HI) or not (``exclusive``: they become HI - 1, as in Python's ``range``). At least half
  of the hidden tests sit at or above HI, where the two readings differ.
- ``helper_version``: the live ``kit``. Version 2 renamed ``clamp`` to ``clip`` and takes the
  bounds as one pair, ``kit.clip(x, (lo, hi))``; calling ``kit.clamp`` raises an error that
  says so. The prompt keeps documenting version 1.

Both are learnt from the test report: failing tests are shown with what the function returned
and what was expected, or the exception. The agent may resubmit after a failure, up to
``max_turns`` submissions.

Rewards: a submission that passes every test earns 1 and ends the episode. A failed submission
with turns left earns ``-retry_cost``; the last allowed one earns its score (the fraction of
tests passed, or 0 unless all pass with ``reward_mode="all"``) and truncates the episode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from sao_online.drift_schedules.space import Choice, Range
from sao_online.environments.base import DriftingTextEnv, TurnResult
from sao_online.environments.sandbox import (
    Limits,
    Sandbox,
    SandboxResult,
    TestCase,
    acquire_sandbox,
    release_sandbox,
)

BOUNDARIES: tuple[str, ...] = ("inclusive", "exclusive")
HELPER_VERSIONS: tuple[str, ...] = ("v1", "v2")
REWARD_MODES: tuple[str, ...] = ("fraction", "all")

#: The helper module as it runs in the sandbox, per version. The harness counts every call of
#: its functions and every missing name asked of it (``helpers=["kit"]``), which is how
#: behaviour is labelled: from what the harness saw, not from anything the program can set.
KIT_SOURCES: dict[str, str] = {
    "v1": '''"""kit 1.0"""


def clamp(x, lo, hi):
    """x limited to the range lo..hi."""
    return min(max(x, lo), hi)


def __getattr__(name):
    raise AttributeError("kit 1.0 has no " + name + "; it has clamp(x, lo, hi)")
''',
    "v2": '''"""kit 2.0: clamp was renamed clip, and takes the bounds as one (lo, hi) pair."""


def clip(x, bounds):
    """x limited to the range bounds[0]..bounds[1]."""
    lo, hi = bounds
    return min(max(x, lo), hi)


def __getattr__(name):
    raise AttributeError("kit 2.0 has no " + name + "; use kit.clip(x, (lo, hi))")
''',
}

#: Helper function name -> the kit version whose API it is.
HELPER_API = {"clamp": "v1", "clip": "v2"}


@dataclass(frozen=True)
class Task:
    """One function to write: ``name(x) = clamp(expression, low, high)``."""

    name: str
    operator: str  # "", "+", "*" or "//"
    operand: int
    low: int
    high: int

    @property
    def expression(self) -> str:
        return "x" if not self.operator else f"x {self.operator} {self.operand}"

    def inner(self, x: int) -> int:
        return {
            "": x,
            "+": x + self.operand,
            "*": x * self.operand,
            "//": x // max(self.operand, 1),
        }[self.operator]

    def expected(self, x: int, boundary: str) -> int:
        high = self.high if boundary == "inclusive" else self.high - 1
        return min(max(self.inner(x), self.low), high)

    def largest_input_below(self, target: int) -> int:
        """The largest x in [-60, 120] with inner(x) <= target."""
        return max((x for x in range(-60, 121) if self.inner(x) <= target), default=-60)

    def smallest_input_reaching(self, target: int) -> int:
        """The smallest x in [-60, 120] with inner(x) >= target (the expression only grows)."""
        return next((x for x in range(-60, 121) if self.inner(x) >= target), 120)


#: Function name -> operator of the expression inside the clamp.
TASK_KINDS: dict[str, str] = {"fit": "", "shift": "+", "scale": "*", "level": "//"}

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_program(action: str) -> str:
    """The module source in an action: inside the first fenced code block if there is one."""
    fenced = _FENCE.search(action)
    return fenced[1] if fenced else action


def program_for(task: Task, helper_version: str, boundary: str) -> str:
    """The canonical solution written against ``helper_version`` reading ``boundary``."""
    high = str(task.high) if boundary == "inclusive" else f"{task.high} - 1"
    if helper_version == "v1":
        call = f"kit.clamp({task.expression}, {task.low}, {high})"
    else:
        call = f"kit.clip({task.expression}, ({task.low}, {high}))"
    return f"import kit\ndef {task.name}(x):\n    return {call}\n"


class CodeShiftEnv(DriftingTextEnv):
    """Write a Python function that hidden tests check in a sandbox; the spec and helper drift.

    Drift:
        ``boundary``: ``inclusive`` or ``exclusive`` reading of "the range LO..HI" in the tests.
        ``helper_version``: the live ``kit`` (``v1``: ``clamp(x, lo, hi)``; ``v2``:
        ``clip(x, (lo, hi))``); the prompt always documents v1.

    Info:
        reset: ``task`` (the function name), ``sandbox`` (the backend that will run the code),
        ``turns_left``. step: also ``tests_passed``, ``tests_total``, ``status`` (the run's
        status, see :data:`~sao_online.environments.sandbox.RUN_STATUSES`), ``helper_calls``,
        ``submitted`` (this submission's ``{"api": v1|v2|mixed|none, "boundary": ...}``, the
        boundary ``inclusive``, ``exclusive``, ``other`` when the bounds seen match neither
        reading or both, ``unknown`` when none was seen). End of episode: ``solved`` and
        ``behavior``: ``"<api>/<boundary>"`` of the first submission, or ``"invalid"`` when
        it did not run (syntax error, no such function, empty or too long).

    Args:
        sandbox: ``auto`` (the strongest backend available), ``docker``, ``bubblewrap`` or
            ``subprocess`` (shared by the process's envs of the same backend and limits, and
            released by :meth:`close`), or a
            :class:`~sao_online.environments.sandbox.Sandbox` (the env then does not close it).
        max_turns: submissions per episode (at least 1).
        retry_cost: reward of a failed submission that is not the last one (as a cost).
        reward_mode: ``fraction`` (tests passed / tests) or ``all`` (1 only if all pass).
        limits: sandbox limits for each run, ``Limits`` field -> value (e.g. wall_seconds).
        max_program_chars: longer programs are refused without running.
    """

    description: ClassVar[str] = (
        "Write a small Python function run against hidden tests in a sandbox; the spec's "
        "boundary rule and the helper module's API drift."
    )
    drift_space: ClassVar[dict[str, Choice | Range]] = {
        "boundary": Choice(BOUNDARIES, help="does the range LO..HI include HI (prompt is silent)"),
        "helper_version": Choice(
            HELPER_VERSIONS, help="the live kit module (the prompt documents v1)"
        ),
    }
    max_action_length: ClassVar[int] = 256
    prompt_keys: ClassVar[dict[str, type]] = {"task": str}

    def __init__(
        self,
        sandbox: str | Sandbox = "auto",
        max_turns: int = 3,
        retry_cost: float = 0.1,
        reward_mode: str = "fraction",
        limits: Mapping[str, Any] | None = None,
        max_program_chars: int = 20_000,
    ) -> None:
        super().__init__()
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns: expected an int >= 1, got {max_turns!r}")
        if (
            isinstance(retry_cost, bool)
            or not isinstance(retry_cost, int | float)
            or not (0 <= retry_cost < 1)
        ):
            raise ValueError(f"retry_cost: expected a number in [0, 1), got {retry_cost!r}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(
                f"reward_mode: expected one of {', '.join(REWARD_MODES)}, got {reward_mode!r}"
            )
        if (
            isinstance(max_program_chars, bool)
            or not isinstance(max_program_chars, int)
            or (max_program_chars < 1)
        ):
            raise ValueError(
                f"max_program_chars: expected a positive int, got {max_program_chars!r}"
            )
        if limits is not None and not isinstance(limits, Mapping):
            raise ValueError(f"limits: expected a mapping of Limits fields, got {limits!r}")
        try:
            run_limits = Limits(**dict(limits or {}))
        except TypeError as error:
            raise ValueError(f"limits: {error}") from error
        self.max_turns = max_turns
        self.retry_cost = float(retry_cost)
        self.reward_mode = reward_mode
        self.max_program_chars = max_program_chars
        if isinstance(sandbox, Sandbox):
            self.sandbox, self._owns_sandbox = sandbox, False
        elif isinstance(sandbox, str):
            # Shared with the process's other CodeShift envs of the same backend and limits.
            self.sandbox, self._owns_sandbox = acquire_sandbox(sandbox, run_limits), True
        else:
            raise ValueError(f"sandbox: expected a backend name or a Sandbox, got {sandbox!r}")
        self.limits = run_limits
        self._task = Task("fit", "", 0, 2, 9)
        self._tests: list[TestCase] = []
        self._first_submission: str | None = None

    # ---- episode ------------------------------------------------------------------------------

    def _begin_episode(self) -> tuple[str, dict[str, Any]]:
        rng = self.np_random
        name = list(TASK_KINDS)[int(rng.integers(len(TASK_KINDS)))]
        low = int(rng.integers(0, 6))
        self._task = Task(
            name, TASK_KINDS[name], int(rng.integers(2, 5)), low, low + int(rng.integers(4, 10))
        )
        self._tests = self._draw_tests()
        self._first_submission = None
        task = self._task
        example_x = self._example_input()
        # Short on purpose: a byte-level policy reads and writes every character.
        prompt = (
            f"Write {task.name}(x): return {task.expression} kept within the range "
            f"{task.low}..{task.high}. Example: {task.name}({example_x}) == "
            f"{task.expected(example_x, 'inclusive')}.\n"
            "You may import kit (kit 1.0): kit.clamp(x, lo, hi) is x limited to lo..hi.\n"
            "Reply with Python source."
        )
        return prompt, {
            "task": task.name,
            "sandbox": self.sandbox.name,
            "turns_left": self.max_turns,
        }

    def _draw_tests(self) -> list[TestCase]:
        """Six tests aimed below the range, inside it, at HI - 1 and at three values from HI up
        (where the boundary readings differ), each input the one nearest its target.
        Rounding (``x * k`` moves in steps of k) can push more of them to HI or above."""
        task, rng = self._task, self.np_random
        targets = [
            task.low - int(rng.integers(1, 6)),
            task.low + 1,
            task.high - 1,
            task.high,
            task.high + 1 + int(rng.integers(0, 3)),
            task.high + 5 + int(rng.integers(0, 10)),
        ]
        inputs: list[int] = [task.largest_input_below(targets[0])]
        for target in targets[1:]:
            x = task.smallest_input_reaching(target)
            while x in inputs:
                x += 1
            inputs.append(x)
        boundary = self._theta["boundary"]
        return [TestCase((x,), task.expected(x, boundary)) for x in inputs]

    def _example_input(self) -> int:
        """An input whose answer lies inside the range, below HI - 1 where possible, so the
        example does not give the boundary away."""
        task = self._task
        middle = (task.low + task.high) / 2
        for bottom, top in ((task.low + 1, task.high - 2), (task.low, task.high - 1)):
            inside = [x for x in range(-60, 121) if bottom <= task.inner(x) <= top]
            if inside:
                return min(inside, key=lambda x: (abs(task.inner(x) - middle), x))
        return task.smallest_input_reaching(task.low)

    def _respond(self, action: str) -> TurnResult:
        program = extract_program(action).encode("utf-8", "replace").decode("utf-8")
        if not program.strip():
            return self._score(
                None, f"empty program: reply with Python source defining {self._task.name}(x)"
            )
        if len(program) > self.max_program_chars:
            return self._score(
                None,
                f"program too long ({len(program)} characters; the limit "
                f"is {self.max_program_chars})",
            )
        result = self.sandbox.run(
            program,
            self._task.name,
            self._tests,
            files={"kit.py": KIT_SOURCES[self._theta["helper_version"]]},
            helpers=["kit"],
            limits=self.limits,
        )
        return self._score(result, "")

    def _score(self, result: SandboxResult | None, refusal: str) -> TurnResult:
        total = len(self._tests)
        passed = result.num_passed if result is not None else 0
        submitted = self._label(result)
        if self._first_submission is None:
            self._first_submission = (
                f"{submitted['api']}/{submitted['boundary']}" if submitted["ran"] else "invalid"
            )
        turns_left = self.max_turns - self._turn
        info: dict[str, Any] = {
            "task": self._task.name,
            "turns_left": turns_left,
            "tests_passed": passed,
            "tests_total": total,
            "sandbox": result.backend if result else self.sandbox.name,
            "status": result.status if result else "refused",
            "helper_calls": dict(result.helper_calls) if result else {},
            "submitted": {"api": submitted["api"], "boundary": submitted["boundary"]},
        }
        if passed == total:
            info["solved"] = True
            return TurnResult(
                f"All {total} tests passed.",
                1.0,
                terminated=True,
                behavior=self._first_submission,
                info=info,
            )
        report = self._report(result, refusal, passed, total)
        if turns_left > 0:
            return TurnResult(report + "\nFix it and resubmit.", -self.retry_cost, info=info)
        info["solved"] = False
        score = passed / total if self.reward_mode == "fraction" else 0.0
        return TurnResult(
            report + "\nTurn limit reached.",
            score,
            truncated=True,
            behavior=self._first_submission,
            info=info,
        )

    def _report(self, result: SandboxResult | None, refusal: str, passed: int, total: int) -> str:
        if result is None:
            return f"0/{total} tests passed: {refusal}."
        lines = [
            f"{passed}/{total} tests passed" + (f" ({result.detail})." if result.detail else ".")
        ]
        failures = [outcome for outcome in result.outcomes if not outcome.passed]
        lines += [f"FAIL {outcome.name}: {outcome.reason}" for outcome in failures[:1]]
        return "\n".join(lines)

    def _label(self, result: SandboxResult | None) -> dict[str, Any]:
        """Which kit API the submission used and how it read the range's upper end."""
        if result is None or result.status in ("syntax_error", "missing_function"):
            return {"ran": False, "api": "none", "boundary": "unknown"}
        apis = {HELPER_API[name] for name in result.helper_calls if name in HELPER_API}
        api = "mixed" if len(apis) > 1 else (apis.pop() if apis else "none")
        # Where the expression reaches HI or more, inclusive code returns HI, exclusive HI - 1.
        high = self._task.high
        readings = set()
        for test, outcome in zip(self._tests, result.outcomes):
            if self._task.inner(test.args[0]) >= high and type(outcome.value) is int:
                readings.add({high: "inclusive", high - 1: "exclusive"}.get(outcome.value, "other"))
        boundary = readings.pop() if len(readings) == 1 else ("other" if readings else "unknown")
        return {"ran": True, "api": api, "boundary": boundary}

    # ---- oracle and demonstrations -----------------------------------------------------------

    def oracle_action(self, observation: str, info: dict[str, Any]) -> str:
        """The canonical solution for the live helper and boundary (read from ``theta``)."""
        theta = info["theta"]
        return program_for(self._task, theta["helper_version"], theta["boundary"])

    def demonstration_action(self, observation: str, info: dict[str, Any]) -> str:
        """Competent but not told the regime: the first submission draws the helper API and the
        boundary reading uniformly; after a failure it changes what the report points at (the
        API after a kit error, the boundary after a wrong answer)."""
        submitted = info.get("submitted")
        if submitted is None or submitted["api"] not in HELPER_VERSIONS:
            version = HELPER_VERSIONS[int(self.np_random.integers(len(HELPER_VERSIONS)))]
            boundary = BOUNDARIES[int(self.np_random.integers(len(BOUNDARIES)))]
            return program_for(self._task, version, boundary)
        version, boundary = submitted["api"], submitted["boundary"]
        if "kit 2.0 has no" in observation or "kit 1.0 has no" in observation:
            version = "v2" if "kit 2.0 has no" in observation else "v1"
            # The run stopped at the helper: the boundary it read is not known yet.
            boundary = (
                boundary
                if boundary in BOUNDARIES
                else BOUNDARIES[int(self.np_random.integers(len(BOUNDARIES)))]
            )
        elif "wrong answer" in observation and boundary in BOUNDARIES:
            boundary = BOUNDARIES[1 - BOUNDARIES.index(boundary)]
        return program_for(self._task, version, boundary)

    def oracle_reward(self, theta: Mapping[str, Any]) -> float:
        """1.0 in every regime: the oracle passes every test on its first submission."""
        self.complete_theta(theta)
        return 1.0

    def close(self) -> None:
        if getattr(self, "_owns_sandbox", False):
            self._owns_sandbox = False
            release_sandbox(self.sandbox)
        super().close()
