"""ReasonShift-v0: procedural, verifiable reasoning whose task mix, difficulty and format drift.

Each episode poses one small task with a visible difficulty level (1 to 5), e.g.
``Level 3. Reverse: kqz``. The tasks are exact-match checkable:

- ``reverse``: reverse a string of ``level`` letters;
- ``sort``: sort ``level`` digits ascending;
- ``count``: count one letter in a string of ``2 * level`` letters drawn from ``abc``;
- ``add``: add two numbers of ``level`` digits each.

The answer must be written in the live format, which the prompt does not name:
``ANSWER: x`` (``answer``), ``<x>`` (``tags``) or ``\\boxed{x}`` (``boxed``). A correct answer
in the live format on the first turn earns 1; a well-formed but wrong answer earns 0; both end
the episode. An action in another format, or in none, is malformed: it earns 0 and an
observation that says why and how to answer, and the agent gets one more turn (``max_turns``,
default 2), where a correct answer earns ``retry_reward`` (default 0.5). So a policy that keeps
the old format after a format shift loses half its reward even when it recovers in-episode.

Levels make prompts differ in difficulty: a small warm-started model gets the easy levels right
and the hard ones mostly wrong, so one global baseline mixes very different expected rewards.
``info`` carries ``task`` and ``difficulty`` (the level) on every call, for per-prompt
baselines and per-level analysis.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any, ClassVar

from sao_online.drift_schedules.space import Choice
from sao_online.environments.base import DriftingTextEnv, TurnResult

TASKS: tuple[str, ...] = ("reverse", "sort", "count", "add")
LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)

#: Drift value of ``mix`` -> the tasks drawn (uniformly).
MIXES: dict[str, tuple[str, ...]] = {
    "all": TASKS,
    "letters": ("reverse", "count"),
    "digits": ("sort", "add"),
}

#: Drift value of ``difficulty`` -> the levels drawn (uniformly).
DIFFICULTIES: dict[str, tuple[int, ...]] = {
    "uniform": LEVELS,
    "easiest": (1,),
    "easy": (1, 2),
    "hard": (4, 5),
}

FORMATS: tuple[str, ...] = ("answer", "tags", "boxed")
_FORMAT_TEMPLATES = {"answer": "ANSWER: {}", "tags": "<{}>", "boxed": "\\boxed{{{}}}"}
_FORMAT_PATTERNS = {
    "answer": re.compile(r"ANSWER:[ \t]*([^\n]{0,40}?)"),
    "tags": re.compile(r"<([^<>\n]{0,40})>"),
    "boxed": re.compile(r"\\boxed\{([^{}\n]{0,40})\}"),
}
#: Longer actions are malformed without being parsed (keeps huge actions cheap).
_MAX_PARSED_LENGTH = 64

_PROMPT_VERBS = {"reverse": "Reverse", "sort": "Sort the digits", "add": "Add"}


def format_answer(answer: str, answer_format: str) -> str:
    """``answer`` written in ``answer_format``.

    Example:
        >>> format_answer("42", "answer"), format_answer("42", "tags"), format_answer("42", "boxed")
        ('ANSWER: 42', '<42>', '\\\\boxed{42}')
    """
    if answer_format not in _FORMAT_TEMPLATES:
        raise ValueError(f"answer_format: {answer_format!r} is not one of {', '.join(FORMATS)}")
    return _FORMAT_TEMPLATES[answer_format].format(answer)


def parse_answer(text: str) -> tuple[str, str] | None:
    """``(format, content)`` of an action, or None when it fits no format.

    Surrounding whitespace is ignored; the content is stripped.

    Example:
        >>> parse_answer(" <dcba> "), parse_answer("ANSWER: 7"), parse_answer("7")
        (('tags', 'dcba'), ('answer', '7'), None)
    """
    stripped = text.strip()
    if len(stripped) > _MAX_PARSED_LENGTH:
        return None
    for answer_format, pattern in _FORMAT_PATTERNS.items():
        match = pattern.fullmatch(stripped)
        if match is not None:
            return answer_format, match[1].strip()
    return None


def solve(task: str, operand: str) -> str:
    """The exact answer of ``task`` on ``operand`` (the text after the colon of the prompt).

    Example:
        >>> solve("reverse", "abc"), solve("sort", "3142"), solve("count", "a in abca")
        ('cba', '1234', '2')
        >>> solve("add", "57+68")
        '125'
    """
    if task == "reverse":
        return operand[::-1]
    if task == "sort":
        return "".join(sorted(operand))
    if task == "count":
        letter, _, text = operand.partition(" in ")
        return str(text.count(letter))
    if task == "add":
        left, _, right = operand.partition("+")
        return str(int(left) + int(right))
    raise ValueError(f"task: {task!r} is not one of {', '.join(TASKS)}")


class ReasonShiftEnv(DriftingTextEnv):
    """Solve a small verifiable task at a visible level; the answer format is hidden and drifts.

    Drift:
        ``mix``: which tasks are drawn (:data:`MIXES`). ``difficulty``: which levels are drawn
        (:data:`DIFFICULTIES`). ``answer_format``: the format an answer must use
        (:data:`FORMATS`; the prompt never says which).

    Info:
        every call: ``task``, ``difficulty`` (the level, an int), ``turns_left``. After an
        action: ``outcome`` (``correct``, ``wrong``, ``wrong_format``, ``malformed``). End of
        episode: ``answer`` (the expected content), ``correct`` (answered right in the live
        format), ``solved`` (some action held the right content, in any format: what the agent
        can compute, whatever it knows of the format), ``behavior``: the format of the first
        action (one of :data:`FORMATS`) or ``"malformed"``.

    Args:
        max_turns: actions before truncation (1: no second chance after a malformed answer).
        retry_reward: reward of a correct answer after the first turn, in [0, 1].
    """

    description: ClassVar[str] = (
        "Verifiable reasoning at visible levels 1-5; task mix, level mix and answer format drift."
    )
    drift_space: ClassVar[dict[str, Choice]] = {
        "mix": Choice(tuple(MIXES), help="which tasks are drawn"),
        "difficulty": Choice(tuple(DIFFICULTIES), help="which levels (1-5) are drawn"),
        "answer_format": Choice(
            FORMATS, help="the hidden answer format: ANSWER: x, <x>, \\boxed{x}"
        ),
    }
    max_action_length: ClassVar[int] = 64
    prompt_keys: ClassVar[dict[str, type]] = {"task": str, "difficulty": int}

    def __init__(self, max_turns: int = 2, retry_reward: float = 0.5) -> None:
        super().__init__()
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns: expected an int >= 1, got {max_turns!r}")
        if (
            isinstance(retry_reward, bool)
            or not isinstance(retry_reward, int | float)
            or not 0 <= retry_reward <= 1
        ):
            raise ValueError(f"retry_reward: expected a number in [0, 1], got {retry_reward!r}")
        self.max_turns = max_turns
        self.retry_reward = float(retry_reward)
        self._task = TASKS[0]
        self._level = 1
        self._operand = ""
        self._first_format: str | None = None
        self._solved = False

    @property
    def _answer(self) -> str:
        return solve(self._task, self._operand)

    def _begin_episode(self) -> tuple[str, dict[str, Any]]:
        tasks = MIXES[self._theta["mix"]]
        levels = DIFFICULTIES[self._theta["difficulty"]]
        self._task = tasks[int(self.np_random.integers(len(tasks)))]
        self._level = levels[int(self.np_random.integers(len(levels)))]
        self._operand = self._draw_operand(self._task, self._level)
        self._first_format = None
        self._solved = False
        if self._task == "count":
            letter, _, text = self._operand.partition(" in ")
            question = f"Count {letter} in: {text}"
        else:
            question = f"{_PROMPT_VERBS[self._task]}: {self._operand}"
        return f"Level {self._level}. {question}", self._task_info()

    def _draw_operand(self, task: str, level: int) -> str:
        rng = self.np_random
        if task == "reverse":
            return "".join(rng.choice(list(string.ascii_lowercase), size=level))
        if task == "sort":
            return "".join(rng.choice(list(string.digits), size=level))
        if task == "count":
            letter = "abc"[int(rng.integers(3))]
            return f"{letter} in " + "".join(rng.choice(list("abc"), size=2 * level))
        low, high = (0 if level == 1 else 10 ** (level - 1)), 10**level
        left, right = (int(value) for value in rng.integers(low, high, size=2))
        return f"{left}+{right}"

    def _task_info(self) -> dict[str, Any]:
        return {
            "task": self._task,
            "difficulty": self._level,
            "turns_left": self.max_turns - self._turn,
        }

    def _respond(self, action: str) -> TurnResult:
        parsed = parse_answer(action)
        if self._first_format is None:
            self._first_format = parsed[0] if parsed is not None else "malformed"
        self._solved = self._solved or (parsed is not None and parsed[1] == self._answer)
        live_format = self._theta["answer_format"]
        if parsed is None or parsed[0] != live_format:
            outcome = "malformed" if parsed is None else "wrong_format"
            how = format_answer("x", live_format)
            problem = "no answer format recognised" if parsed is None else "format not accepted"
            return self._continue(f"{problem}; write the answer as {how}", outcome)
        correct = parsed[1] == self._answer
        reward = (1.0 if self._turn == 1 else self.retry_reward) if correct else 0.0
        info = {
            **self._task_info(),
            "outcome": "correct" if correct else "wrong",
            "answer": self._answer,
            "correct": correct,
            "solved": self._solved,
        }
        return TurnResult(
            "Correct." if correct else "Wrong.",
            reward,
            terminated=True,
            behavior=self._first_format,
            info=info,
        )

    def _continue(self, observation: str, outcome: str) -> TurnResult:
        info = {**self._task_info(), "outcome": outcome}
        if info["turns_left"] > 0:
            return TurnResult(observation, 0.0, info=info)
        info.update(answer=self._answer, correct=False, solved=self._solved)
        return TurnResult(
            observation + "\nTurn limit reached.",
            0.0,
            truncated=True,
            behavior=self._first_format or "malformed",
            info=info,
        )

    def oracle_action(self, observation: str, info: dict[str, Any]) -> str:
        """The exact answer in the live format (read from ``info["theta"]``)."""
        return format_answer(self._answer, info["theta"]["answer_format"])

    def demonstration_action(self, observation: str, info: dict[str, Any]) -> str:
        """The exact answer; on the first turn in a format drawn uniformly from :data:`FORMATS`.

        Later turns follow the format the environment's last observation named, as a competent
        agent would; the first turn does not know the hidden format.
        """
        if self._turn > 0:
            return self.oracle_action(observation, info)
        answer_format = FORMATS[int(self.np_random.integers(len(FORMATS)))]
        return format_answer(self._answer, answer_format)

    def oracle_reward(self, theta: Mapping[str, Any]) -> float:
        """1.0 in every regime: the oracle answers correctly in the live format at once."""
        self.complete_theta(theta)
        return 1.0
