"""ToolShift-v0: multi-turn tool use whose tool fails, gets renamed and changes its arguments.

The prompt asks for the product of two 3-digit numbers (too hard to guess) and documents the
calculator as it was first released: name ``calc``, schema ``v1``. Drift moves the live tool
away from that documentation; the documentation never changes. An agent that follows the stale
docs gets an error that tells the truth (``ERROR: unknown tool 'calc'; tools: compute``), so it
can recover within the episode at the price of extra calls, or learn the current API and call it
directly. This makes the drift something an agent has to adapt to, and its cost visible in reward.

Grammar (one action per turn, surrounding whitespace ignored)::

    CALL <tool>(<args>)      v1 args: 347*281          v2 args: a=347, op=*, b=281
    ANSWER <integer>

Rewards: ``-call_cost`` per CALL (whatever it returns), ``-malformed_penalty`` per action that
fits neither form (the episode goes on), and ``1`` for a correct ANSWER or ``0`` for a wrong one
(ANSWER ends the episode). ``max_turns`` actions without an ANSWER truncate the episode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from sao_online.drift_schedules.space import Choice, Range
from sao_online.environments.base import DriftingTextEnv, TurnResult, printable

TOOL_NAMES: tuple[str, ...] = ("calc", "compute")
SCHEMAS: tuple[str, ...] = ("v1", "v2")
OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}

#: How each schema's arguments are written, for prompts and error messages.
SCHEMA_USAGE = {"v1": "<int><op><int>", "v2": "a=<int>, op=<op>, b=<int>"}

_ANSWER = re.compile(r"ANSWER[ \t]+(-?\d{1,15})")
_CALL = re.compile(r"CALL[ \t]+([A-Za-z_][A-Za-z0-9_]{0,31})[ \t]*\(([^\n]*)\)")
_INTEGER = re.compile(r"-?\d{1,9}")
_V1_ARGS = re.compile(r"\s*(-?\d{1,9})\s*([-+*])\s*(-?\d{1,9})\s*")
_V2_ARG = re.compile(r"\s*([a-z]+)\s*=\s*(\S+?)\s*")


def parse_v1(args: str) -> tuple[int, str, int] | None:
    """``"347*281"`` -> ``(347, "*", 281)``; None when ``args`` is not v1."""
    match = _V1_ARGS.fullmatch(args)
    if match is None:
        return None
    return int(match[1]), match[2], int(match[3])


def parse_v2(args: str) -> tuple[int, str, int] | None:
    """``"a=347, op=*, b=281"`` (any order) -> ``(347, "*", 281)``; None when not v2."""
    fields: dict[str, str] = {}
    for part in args.split(","):
        match = _V2_ARG.fullmatch(part)
        if match is None or match[1] in fields:
            return None
        fields[match[1]] = match[2]
    if set(fields) != {"a", "op", "b"} or fields["op"] not in OPERATIONS:
        return None
    if not (_INTEGER.fullmatch(fields["a"]) and _INTEGER.fullmatch(fields["b"])):
        return None
    return int(fields["a"]), fields["op"], int(fields["b"])


def format_call(tool_name: str, schema: str, a: int, op: str, b: int) -> str:
    """The action that calls ``tool_name`` with ``schema``, e.g. ``CALL calc(347*281)``."""
    args = f"{a}{op}{b}" if schema == "v1" else f"a={a}, op={op}, b={b}"
    return f"CALL {tool_name}({args})"


def oracle_expected_return(failure: float, max_turns: int, call_cost: float) -> float:
    """Expected return of the tool-dependent oracle.

    The oracle calls the live tool correctly each turn until a call succeeds, then answers; a
    call on the last turn could not be answered, so with no result by then it answers without
    one (and is wrong). With success on call k (probability ``failure**(k-1) * (1-failure)``,
    k < max_turns) it earns ``1 - k * call_cost``; if all ``max_turns - 1`` calls fail it
    earns ``-(max_turns - 1) * call_cost``.

    Example:
        >>> round(oracle_expected_return(0.5, 4, 0.05), 4)   # .475 + .225 + .10625 - .01875
        0.7875
    """
    calls_available = max_turns - 1
    expected = 0.0
    for call_index in range(1, calls_available + 1):
        first_success = failure ** (call_index - 1) * (1.0 - failure)
        expected += first_success * (1.0 - call_index * call_cost)
    return expected - failure**calls_available * calls_available * call_cost


class ToolShiftEnv(DriftingTextEnv):
    """Answer an arithmetic question with a calculator tool that drifts.

    Drift:
        ``failure``: probability that a correct call fails (transient error, retry works).
        ``tool_name``: the live name of the tool (the prompt always documents ``calc``).
        ``schema``: the live argument schema (the prompt always documents ``v1``).

    Info:
        every call: ``question`` (e.g. ``"347*281"``), ``turns_left``. After a call:
        ``outcome`` (``result``, ``failed``, ``unknown_tool``, ``bad_arguments``,
        ``malformed``, ``answered``). End of episode: ``answer``, ``correct``, ``behavior``:
        ``"<tool>/<schema>"`` of the first call (tool ``other`` for a made-up name, schema
        ``bad_args`` for unparseable arguments), else ``"malformed"`` if any action was
        malformed, else ``"no_call"``.

    Args:
        max_turns: actions before truncation (at least 2: one call and one answer).
        call_cost: reward subtracted per CALL.
        malformed_penalty: reward subtracted per malformed action.
        operand_digits: digits of each operand, 2 to 4 (3: ``347*281``). Fewer digits make
            the call and the answer shorter to copy, for a small model; the product stays too
            large to guess.
    """

    description: ClassVar[str] = (
        "Multi-turn calculator use; the tool fails, is renamed and changes its argument schema."
    )
    drift_space: ClassVar[dict[str, Choice | Range]] = {
        "failure": Range(0.0, 0.5, help="probability that a correct tool call fails"),
        "tool_name": Choice(TOOL_NAMES, help="the live tool name (docs always say calc)"),
        "schema": Choice(SCHEMAS, help="the live argument schema (docs always say v1)"),
    }
    max_action_length: ClassVar[int] = 128

    def __init__(
        self,
        max_turns: int = 4,
        call_cost: float = 0.05,
        malformed_penalty: float = 0.1,
        operand_digits: int = 3,
    ) -> None:
        super().__init__()
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 2:
            raise ValueError(f"max_turns: expected an int >= 2, got {max_turns!r}")
        if (
            isinstance(operand_digits, bool)
            or not isinstance(operand_digits, int)
            or not 2 <= operand_digits <= 4
        ):
            raise ValueError(f"operand_digits: expected an int from 2 to 4, got {operand_digits!r}")
        for name, value in (("call_cost", call_cost), ("malformed_penalty", malformed_penalty)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise ValueError(f"{name}: expected a number in [0, 1), got {value!r}")
        self.max_turns = max_turns
        self.call_cost = float(call_cost)
        self.malformed_penalty = float(malformed_penalty)
        self.operand_digits = operand_digits
        self._operands = (100, "*", 100)
        self._first_call: str | None = None
        self._saw_malformed = False

    @property
    def _question(self) -> str:
        a, op, b = self._operands
        return f"{a}{op}{b}"

    @property
    def _answer(self) -> int:
        a, op, b = self._operands
        return OPERATIONS[op](a, b)

    def _begin_episode(self) -> tuple[str, dict[str, Any]]:
        low, high = 10 ** (self.operand_digits - 1), 10**self.operand_digits
        a, b = (int(value) for value in self.np_random.integers(low, high, size=2))
        self._operands = (a, "*", b)
        self._first_call = None
        self._saw_malformed = False
        prompt = (
            f"Compute {self._question}. Tool: CALL calc({SCHEMA_USAGE['v1']}). "
            "Finish with ANSWER <n>."
        )
        return prompt, {"question": self._question, "turns_left": self.max_turns}

    def _respond(self, action: str) -> TurnResult:
        text = action.strip()
        answer = _ANSWER.fullmatch(text) if len(text) <= self.max_action_length else None
        if answer is not None:
            return self._finish_with_answer(int(answer[1]))
        call = _CALL.fullmatch(text) if len(text) <= self.max_action_length else None
        if call is None:
            self._saw_malformed = True
            return self._continue(
                "ERROR: malformed action; reply CALL <tool>(<args>) or ANSWER <integer>",
                -self.malformed_penalty,
                "malformed",
            )
        observation, outcome = self._call_tool(call[1], call[2])
        return self._continue(observation, -self.call_cost, outcome)

    def _call_tool(self, name: str, args: str) -> tuple[str, str]:
        parsed = {"v1": parse_v1(args), "v2": parse_v2(args)}
        if self._first_call is None:
            label_tool = name if name in TOOL_NAMES else "other"
            label_schema = next((s for s in SCHEMAS if parsed[s] is not None), "bad_args")
            self._first_call = f"{label_tool}/{label_schema}"
        live_name, live_schema = self._theta["tool_name"], self._theta["schema"]
        if name != live_name:
            return (
                f"ERROR: unknown tool '{printable(name, 32)}'; tools: {live_name}",
                "unknown_tool",
            )
        operands = parsed[live_schema]
        if operands is None:
            usage = SCHEMA_USAGE[live_schema]
            return f"ERROR: bad arguments; use {live_name}({usage})", "bad_arguments"
        # Drawn only for correct calls, so a seeded episode replays exactly for the same actions.
        if self.np_random.random() < self._theta["failure"]:
            return "ERROR: tool failed, try again", "failed"
        a, op, b = operands
        return f"RESULT {OPERATIONS[op](a, b)}", "result"

    def _continue(self, observation: str, reward: float, outcome: str) -> TurnResult:
        turns_left = self.max_turns - self._turn
        info = {"question": self._question, "turns_left": turns_left, "outcome": outcome}
        if turns_left > 0:
            return TurnResult(observation, reward, info=info)
        info.update(answer=self._answer, correct=False)
        return TurnResult(
            observation + "\nTurn limit reached.",
            reward,
            truncated=True,
            behavior=self._behavior(),
            info=info,
        )

    def _finish_with_answer(self, value: int) -> TurnResult:
        correct = value == self._answer
        info = {
            "question": self._question,
            "turns_left": self.max_turns - self._turn,
            "outcome": "answered",
            "answer": self._answer,
            "correct": correct,
        }
        observation = "Correct." if correct else "Wrong."
        return TurnResult(
            observation, float(correct), terminated=True, behavior=self._behavior(), info=info
        )

    def _behavior(self) -> str:
        if self._first_call is not None:
            return self._first_call
        return "malformed" if self._saw_malformed else "no_call"

    def oracle_action(self, observation: str, info: dict[str, Any]) -> str:
        """Call the live tool (known from ``info["theta"]``) until it answers, then ANSWER.

        The oracle does not do arithmetic itself: it is the best agent that depends on the tool,
        so tool failures lower its ceiling. With one turn left and no result, it answers 0.
        """
        result = re.fullmatch(r"RESULT (-?\d+)", observation.strip())
        if result is not None:
            return f"ANSWER {result[1]}"
        if info["turns_left"] <= 1:
            return "ANSWER 0"
        a, op, b = parse_v1(info["question"])
        theta = info["theta"]
        return format_call(theta["tool_name"], theta["schema"], a, op, b)

    def oracle_reward(self, theta: Mapping[str, Any]) -> float:
        """Expected oracle return under ``theta`` (see :func:`oracle_expected_return`)."""
        resolved = self.complete_theta(theta)
        return oracle_expected_return(resolved["failure"], self.max_turns, self.call_cost)
