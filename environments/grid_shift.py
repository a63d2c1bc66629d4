"""GridShift-v1: multi-turn navigation on a small open grid whose controls, floor and goal drift.

Each episode places a goal and a start 1 to 7 moves from it on a 5x5 grid (the Manhattan
distance, drawn uniformly: the episode's difficulty). Each turn the agent writes one move,
``N``, ``E``, ``S`` or ``W``; the observation is the goal's offset from the agent, rows first,
e.g. ``Goal 2S 1E.`` (two moves south and one east still to go). The grid's
edges are walls: a move off the grid leaves the agent where it is (``Bumped.``).

Rewards: ``-move_cost`` per action (well formed or not), ``+1`` on reaching the goal, which
ends the episode; ``max_turns`` actions without reaching it truncate the episode. Every wrong
move costs two of the episode's spare turns (the move and the move back), so the early moves
decide whether the later ones can still pay.

Drift:

- ``moves``: what the letters do. ``compass`` is the usual reading; ``rotated`` turns every move
  90 degrees clockwise (N goes east, E south, S west, W north); ``mirrored`` swaps E and W. The
  prompt always documents the compass, so after a shift the agent must relearn its controls.
- ``slip``: probability that a move goes to one of its two perpendicular directions instead.
- ``goal``: ``shown`` (a random goal, its offset in every observation) or hidden at a corner
  that moves between regimes (``hidden_ne`` at row 0 column 4, ``hidden_sw`` at row 4
  column 0); with a hidden goal the observation gives the agent's position instead
  (``At 2,1.``) and the goal has to be learnt from reward.

Why the task is this small: the observation holds only what the next move depends on, and
the demonstrations move along its last part (columns before rows), so the letter to write sits
right before the closing period; the byte-level tiny model learns to read it in a
few hundred SFT steps; ``docs/families/grid_shift.md`` has the measurements behind this.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from sao_online.drift_schedules.space import Choice, Range
from sao_online.environments.base import DriftingTextEnv, TurnResult

SIZE = 5
DIRECTIONS: dict[str, tuple[int, int]] = {"N": (-1, 0), "E": (0, 1), "S": (1, 0), "W": (0, -1)}
#: Drift value of ``moves`` -> the true direction each written letter moves in.
CONVENTIONS: dict[str, dict[str, str]] = {
    "compass": {"N": "N", "E": "E", "S": "S", "W": "W"},
    "rotated": {"N": "E", "E": "S", "S": "W", "W": "N"},
    "mirrored": {"N": "N", "E": "W", "S": "S", "W": "E"},
}
GOALS: tuple[str, ...] = ("shown", "hidden_ne", "hidden_sw")
HIDDEN_CORNERS: dict[str, tuple[int, int]] = {
    "hidden_ne": (0, SIZE - 1),
    "hidden_sw": (SIZE - 1, 0),
}
DISTANCES: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
_PERPENDICULAR = {"N": ("E", "W"), "S": ("E", "W"), "E": ("N", "S"), "W": ("N", "S")}
_MOVE = re.compile(r"[NESWnesw]")

Cell = tuple[int, int]


def step_cell(cell: Cell, direction: str) -> Cell:
    """Where a move in true ``direction`` from ``cell`` lands (``cell`` itself off the grid)."""
    row, col = cell[0] + DIRECTIONS[direction][0], cell[1] + DIRECTIONS[direction][1]
    if not (0 <= row < SIZE and 0 <= col < SIZE):
        return cell
    return row, col


def distance(cell: Cell, goal: Cell) -> int:
    """Moves from ``cell`` to ``goal`` on the open grid (the Manhattan distance)."""
    return abs(goal[0] - cell[0]) + abs(goal[1] - cell[1])


def offset_parts(cell: Cell, goal: Cell) -> list[tuple[int, str]]:
    """The goal's offset from ``cell`` as (moves, direction) pairs, rows first, then columns.

    Example:
        >>> offset_parts((2, 1), (4, 2)), offset_parts((3, 3), (0, 1))
        ([(2, 'S'), (1, 'E')], [(3, 'N'), (2, 'W')])
    """
    rows, cols = goal[0] - cell[0], goal[1] - cell[1]
    parts = []
    if rows:
        parts.append((abs(rows), "S" if rows > 0 else "N"))
    if cols:
        parts.append((abs(cols), "E" if cols > 0 else "W"))
    return parts


def describe_offset(cell: Cell, goal: Cell) -> str:
    """The goal's offset from ``cell`` in moves, rows first, e.g. ``2S 1E``.

    Example:
        >>> describe_offset((2, 1), (4, 2)), describe_offset((3, 3), (0, 3))
        ('2S 1E', '3N')
    """
    return " ".join(f"{count}{direction}" for count, direction in offset_parts(cell, goal))


def best_direction(cell: Cell, goal: Cell) -> str:
    """The move the demonstrations make: along the offset's last part (columns before rows).

    Any direction of the offset is on a shortest path; taking the last part's puts the letter
    to write right before the observation's closing period, where a small model finds it.
    ``N`` at the goal itself (no move helps).
    """
    parts = offset_parts(cell, goal)
    return parts[-1][1] if parts else "N"


def letter_for(direction: str, moves: str) -> str:
    """The letter to write under convention ``moves`` to move in true ``direction``.

    Example:
        >>> letter_for("E", "compass"), letter_for("E", "rotated"), letter_for("E", "mirrored")
        ('E', 'N', 'W')
    """
    return next(letter for letter, true in CONVENTIONS[moves].items() if true == direction)


class GridShiftEnv(DriftingTextEnv):
    """Walk to a goal on a 5x5 grid; the controls, slip and goal placement drift.

    Drift:
        ``moves``: what the letters do (:data:`CONVENTIONS`; the prompt documents the compass).
        ``slip``: probability that a move goes sideways. ``goal``: shown, or hidden at a corner
        (:data:`GOALS`).

    Info:
        every call: ``difficulty`` (the start's distance to the goal, 1 to 7), ``position``
        (``[row, col]``), ``turns_left``. After an action: ``outcome`` (``moved``, ``bumped``,
        ``slipped``, ``malformed``, ``reached``). End of episode: ``reached``, ``behavior``:
        the convention under which most of the agent's moves headed closer to the goal (one of
        :data:`CONVENTIONS`; tied ones joined by ``+`` in :data:`CONVENTIONS` order, e.g.
        ``compass+mirrored`` for a walk of N and S moves only), ``none`` when no move did,
        ``malformed`` when no action was a move.

    Args:
        max_turns: actions before truncation (at least 7, the longest start distance).
        move_cost: reward subtracted per action, in [0, 0.1].
        demo_moves: the conventions demonstrations draw their controls from, one per episode
            (default: compass only, so a warm start walks well under the first regime of a
            schedule that starts there and pays for a shift away from it).
        demo_noise: probability in [0, 0.5] that a demonstration writes a letter drawn
            uniformly instead of its planned move. The demonstration then walks back, so a
            warm start sees wrong moves recovered from, and keeps some probability on every
            letter for reinforcement learning to find after the controls change.
    """

    description: ClassVar[str] = (
        "Multi-turn walk to a goal on a 5x5 grid; controls, slip and goal placement drift."
    )
    drift_space: ClassVar[dict[str, Choice | Range]] = {
        "moves": Choice(tuple(CONVENTIONS), help="what N/E/S/W do: compass, rotated, mirrored"),
        "slip": Range(0.0, 0.3, help="probability that a move goes to a perpendicular direction"),
        "goal": Choice(GOALS, help="goal shown, or hidden at the NE or SW corner"),
    }
    max_action_length: ClassVar[int] = 16
    prompt_keys: ClassVar[dict[str, type]] = {"difficulty": int}

    def __init__(
        self,
        max_turns: int = 10,
        move_cost: float = 0.02,
        demo_moves: Sequence[str] | None = None,
        demo_noise: float = 0.0,
    ) -> None:
        super().__init__()
        if (
            isinstance(max_turns, bool)
            or not isinstance(max_turns, int)
            or max_turns < max(DISTANCES)
        ):
            raise ValueError(f"max_turns: expected an int >= {max(DISTANCES)}, got {max_turns!r}")
        if (
            isinstance(move_cost, bool)
            or not isinstance(move_cost, int | float)
            or not 0 <= move_cost <= 0.1
        ):
            raise ValueError(f"move_cost: expected a number in [0, 0.1], got {move_cost!r}")
        if demo_moves is None:
            demo_moves = ("compass",)
        if (
            isinstance(demo_moves, str)
            or not isinstance(demo_moves, Sequence)
            or not demo_moves
            or not set(demo_moves) <= set(CONVENTIONS)
        ):
            raise ValueError(
                f"demo_moves: expected a non-empty list drawn from {', '.join(CONVENTIONS)}, "
                f"got {demo_moves!r}"
            )
        if (
            isinstance(demo_noise, bool)
            or not isinstance(demo_noise, int | float)
            or not 0 <= demo_noise <= 0.5
        ):
            raise ValueError(f"demo_noise: expected a number in [0, 0.5], got {demo_noise!r}")
        self.max_turns = max_turns
        self.move_cost = float(move_cost)
        # In CONVENTIONS order, duplicates dropped, so a draw depends on the set only.
        self.demo_moves = tuple(name for name in CONVENTIONS if name in demo_moves)
        self.demo_noise = float(demo_noise)
        self._goal: Cell = (0, 0)
        self._position: Cell = (0, 0)
        self._difficulty = 1
        self._progress_counts: dict[str, int] = {}
        self._moves_made = 0
        self._demo_plan: tuple[str, list[Cell]] | None = None

    # ---- episode ---------------------------------------------------------------------------

    def _begin_episode(self) -> tuple[str, dict[str, Any]]:
        self._difficulty = DISTANCES[int(self.np_random.integers(len(DISTANCES)))]
        self._goal, self._position = self._draw_layout(self._difficulty)
        self._progress_counts = dict.fromkeys(CONVENTIONS, 0)
        self._moves_made = 0
        self._demo_plan = None
        hidden = " The goal is hidden." if self._theta["goal"] != "shown" else ""
        prompt = f"Walk to the goal with N, E, S or W.{hidden} " + self._view()
        return prompt, self._status_info()

    def _draw_layout(self, difficulty: int) -> tuple[Cell, Cell]:
        """A goal (random, or the hidden corner) and a start ``difficulty`` moves from it."""
        cells = [(row, col) for row in range(SIZE) for col in range(SIZE)]
        corner = HIDDEN_CORNERS.get(self._theta["goal"])
        if corner is None:
            # Drawn among the goals that have a cell at that distance, so no retry is needed.
            goals = [g for g in cells if any(distance(c, g) == difficulty for c in cells)]
            corner = goals[int(self.np_random.integers(len(goals)))]
        starts = [cell for cell in cells if distance(cell, corner) == difficulty]
        return corner, starts[int(self.np_random.integers(len(starts)))]

    def _view(self) -> str:
        if self._theta["goal"] == "shown":
            return f"Goal {describe_offset(self._position, self._goal)}."
        row, col = self._position
        return f"At {row},{col}."

    def _status_info(self) -> dict[str, Any]:
        return {
            "difficulty": self._difficulty,
            "position": list(self._position),
            "turns_left": self.max_turns - self._turn,
        }

    def _respond(self, action: str) -> TurnResult:
        letter = action.strip()
        if len(letter) > 1 or _MOVE.fullmatch(letter) is None:
            return self._after(f"Not a move. {self._view()}", "malformed")
        letter = letter.upper()
        self._moves_made += 1
        self._label_move(letter)
        direction = CONVENTIONS[self._theta["moves"]][letter]
        outcome = "moved"
        # Drawn for every move, so a seeded episode replays exactly for the same actions.
        if self.np_random.random() < self._theta["slip"]:
            sideways = _PERPENDICULAR[direction]
            direction = sideways[int(self.np_random.integers(2))]
            outcome = "slipped"
        landed = step_cell(self._position, direction)
        if landed == self._position:
            outcome = "bumped"
        self._position = landed
        if landed == self._goal:
            info = {**self._status_info(), "outcome": "reached", "reached": True}
            return TurnResult(
                "Goal reached.",
                1.0 - self.move_cost,
                terminated=True,
                behavior=self._behavior(),
                info=info,
            )
        return self._after(("Bumped. " if outcome == "bumped" else "") + self._view(), outcome)

    def _after(self, observation: str, outcome: str) -> TurnResult:
        info = {**self._status_info(), "outcome": outcome}
        if info["turns_left"] > 0:
            return TurnResult(observation, -self.move_cost, info=info)
        info["reached"] = False
        return TurnResult(
            observation + "\nTurn limit reached.",
            -self.move_cost,
            truncated=True,
            behavior=self._behavior(),
            info=info,
        )

    def _label_move(self, letter: str) -> None:
        here = distance(self._position, self._goal)
        for convention, mapping in CONVENTIONS.items():
            if distance(step_cell(self._position, mapping[letter]), self._goal) < here:
                self._progress_counts[convention] += 1

    def _behavior(self) -> str:
        if self._moves_made == 0:
            return "malformed"
        best = max(self._progress_counts.values())
        if best == 0:
            return "none"
        # Ties are common (N and S mean the same under compass and mirrored): name them all.
        return "+".join(name for name, count in self._progress_counts.items() if count == best)

    # ---- scripted agents -------------------------------------------------------------------

    def oracle_action(self, observation: str, info: dict[str, Any]) -> str:
        """A shortest-path move toward the (possibly hidden) goal under the live controls."""
        return letter_for(best_direction(self._position, self._goal), info["theta"]["moves"])

    def demonstration_action(self, observation: str, info: dict[str, Any]) -> str:
        """A shortest-path move under controls drawn once per episode, not the live ones.

        The controls are drawn uniformly from ``demo_moves``. A hidden goal is looked for
        at a corner drawn uniformly, then at the other one; a shown goal is walked to. With
        probability ``demo_noise`` the move is a letter drawn uniformly instead.
        """
        if self._demo_plan is None:
            conventions = self.demo_moves
            convention = conventions[int(self.np_random.integers(len(conventions)))]
            if self._theta["goal"] == "shown":
                targets = [self._goal]
            else:
                corners = list(HIDDEN_CORNERS.values())
                first = int(self.np_random.integers(len(corners)))
                targets = [corners[first], corners[1 - first]]
            self._demo_plan = (convention, targets)
        convention, targets = self._demo_plan
        while len(targets) > 1 and self._position == targets[0]:
            targets.pop(0)
        # Drawn for every move, so the demonstrations of a seed do not depend on demo_noise's
        # value except where a draw falls below it.
        noise_draw, noise_letter = self.np_random.random(), int(self.np_random.integers(4))
        if noise_draw < self.demo_noise:
            return tuple(DIRECTIONS)[noise_letter]
        return letter_for(best_direction(self._position, targets[0]), convention)

    def oracle_reward(self, theta: Mapping[str, Any]) -> float:
        """The oracle's expected return under ``theta``.

        Without slip it is exact: the oracle walks the shortest path, so a start d moves away
        returns ``1 - d * move_cost``, and d is uniform over :data:`DISTANCES`. With slip it is
        a Monte-Carlo mean over 1,000 oracle episodes with a fixed seed (standard error below
        0.01), cached per ``theta``.
        """
        resolved = self.complete_theta(theta)
        if resolved["slip"] == 0.0:
            return 1.0 - self.move_cost * float(np.mean(DISTANCES))
        return _oracle_return_estimate(
            self.max_turns, self.move_cost, tuple(sorted(resolved.items()))
        )


@functools.lru_cache(maxsize=256)
def _oracle_return_estimate(
    max_turns: int, move_cost: float, theta_items: tuple[tuple[str, Any], ...], episodes: int = 1000
) -> float:
    env = GridShiftEnv(max_turns=max_turns, move_cost=move_cost)
    theta = dict(theta_items)
    returns = []
    for seed in range(episodes):
        observation, info = env.reset(seed=seed, options={"drift": theta})
        total, ended = 0.0, False
        while not ended:
            observation, reward, terminated, truncated, info = env.step(
                env.oracle_action(observation, info)
            )
            total += reward
            ended = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))
