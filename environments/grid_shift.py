"""GridShift-v0: multi-turn navigation on a small walled grid whose controls, floor and goal drift.

Each episode draws a 5x5 grid with a few wall cells, a goal and a start 1 to 7 moves from the
goal (the shortest-path distance, drawn uniformly: the episode's difficulty). Each turn the
agent writes one move, ``N``, ``E``, ``S`` or ``W``; the observation is its new position, the
goal's offset (when the goal is shown) and the walls around it, e.g.
``At 2,1. Goal 2S 1E. Walls: N W.`` (grid edges count as walls).

Rewards: ``-move_cost`` per action (well formed or not), ``+1`` on reaching the goal, which ends
the episode; ``max_turns`` actions without reaching it truncate the episode. A move into a wall
leaves the agent where it is; an action that is not a move is malformed (the agent stays and the
observation says so).

Drift:

- ``moves``: what the letters do. ``compass`` is the usual reading; ``rotated`` turns every move
  90 degrees clockwise (N goes east, E south, S west, W north); ``mirrored`` swaps E and W. The
  prompt always documents the compass, so after a shift the agent must relearn its controls.
- ``slip``: probability that a move goes to one of its two perpendicular directions instead.
- ``goal``: ``shown`` (a random goal, its offset in every observation) or hidden at a corner
  that moves between regimes (``hidden_ne`` at row 0 column 4, ``hidden_sw`` at row 4
  column 0); a hidden goal has to be learnt from reward.
"""

from __future__ import annotations

import functools
import re
from collections import deque
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
NUM_WALLS = 5
_PERPENDICULAR = {"N": ("E", "W"), "S": ("E", "W"), "E": ("N", "S"), "W": ("N", "S")}
_MOVE = re.compile(r"[NESWnesw]")
_MAX_LAYOUT_TRIES = 1000

Cell = tuple[int, int]


def step_cell(cell: Cell, direction: str, walls: frozenset[Cell]) -> Cell:
    """Where a move in true ``direction`` from ``cell`` lands (``cell`` itself when blocked)."""
    row, col = cell[0] + DIRECTIONS[direction][0], cell[1] + DIRECTIONS[direction][1]
    if not (0 <= row < SIZE and 0 <= col < SIZE) or (row, col) in walls:
        return cell
    return row, col


def distances_to(goal: Cell, walls: frozenset[Cell]) -> dict[Cell, int]:
    """Shortest-path move counts to ``goal`` from every cell that can reach it (BFS)."""
    distance = {goal: 0}
    frontier = deque([goal])
    while frontier:
        cell = frontier.popleft()
        for direction in DIRECTIONS:
            neighbour = step_cell(cell, direction, walls)
            if neighbour not in distance:
                distance[neighbour] = distance[cell] + 1
                frontier.append(neighbour)
    return distance


def best_direction(cell: Cell, distance: Mapping[Cell, int], walls: frozenset[Cell]) -> str:
    """The first true direction (in N, E, S, W order) that brings ``cell`` one move closer."""
    for direction in DIRECTIONS:
        if distance.get(step_cell(cell, direction, walls), 99) < distance.get(cell, 99):
            return direction
    return "N"  # at the goal or cut off from it: no move helps


def letter_for(direction: str, moves: str) -> str:
    """The letter to write under convention ``moves`` to move in true ``direction``.

    Example:
        >>> letter_for("E", "compass"), letter_for("E", "rotated"), letter_for("E", "mirrored")
        ('E', 'N', 'W')
    """
    return next(letter for letter, true in CONVENTIONS[moves].items() if true == direction)


def describe_offset(cell: Cell, goal: Cell) -> str:
    """The goal's offset from ``cell`` in moves, e.g. ``2S 1E``; ``here`` at the goal.

    Example:
        >>> describe_offset((2, 1), (4, 2)), describe_offset((3, 3), (0, 3))
        ('2S 1E', '3N')
    """
    rows, cols = goal[0] - cell[0], goal[1] - cell[1]
    parts = []
    if rows:
        parts.append(f"{abs(rows)}{'S' if rows > 0 else 'N'}")
    if cols:
        parts.append(f"{abs(cols)}{'E' if cols > 0 else 'W'}")
    return " ".join(parts) or "here"


class GridShiftEnv(DriftingTextEnv):
    """Walk to a goal on a 5x5 grid with walls; the controls, slip and goal placement drift.

    Drift:
        ``moves``: what the letters do (:data:`CONVENTIONS`; the prompt documents the compass).
        ``slip``: probability that a move goes sideways. ``goal``: shown, or hidden at a corner
        (:data:`GOALS`).

    Info:
        every call: ``difficulty`` (the start's shortest-path distance to the goal, 1 to 7),
        ``position`` (``[row, col]``), ``turns_left``. After an action: ``outcome``
        (``moved``, ``bumped``, ``slipped``, ``malformed``, ``reached``). End of episode:
        ``reached``, ``behavior``: the convention under which most of the agent's moves headed
        closer to the goal (one of :data:`CONVENTIONS`; tied ones joined by ``+`` in
        :data:`CONVENTIONS` order, e.g. ``compass+mirrored`` for a walk of N and S moves only),
        ``none`` when no move did, ``malformed`` when no action was a move.

    Args:
        max_turns: actions before truncation (at least 7, the longest start distance).
        move_cost: reward subtracted per action, in [0, 0.1].
        demo_moves: the conventions demonstrations draw their controls from (default: all of
            :data:`CONVENTIONS`). A warm start learns the mixture step by step, not one
            convention per episode, so each convention added makes it a worse walker; name
            the ones a schedule moves between to keep it undecided about just those.
    """

    description: ClassVar[str] = (
        "Multi-turn walk to a goal on a 5x5 walled grid; controls, slip and goal placement drift."
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
            demo_moves = tuple(CONVENTIONS)
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
        self.max_turns = max_turns
        self.move_cost = float(move_cost)
        # In CONVENTIONS order, duplicates dropped, so a draw depends on the set only.
        self.demo_moves = tuple(name for name in CONVENTIONS if name in demo_moves)
        self._walls: frozenset[Cell] = frozenset()
        self._goal: Cell = (0, 0)
        self._position: Cell = (0, 0)
        self._distance: dict[Cell, int] = {}
        self._difficulty = 1
        self._progress_counts: dict[str, int] = {}
        self._moves_made = 0
        self._demo_plan: tuple[str, list[Cell]] | None = None

    # ---- episode ---------------------------------------------------------------------------

    def _begin_episode(self) -> tuple[str, dict[str, Any]]:
        self._difficulty = DISTANCES[int(self.np_random.integers(len(DISTANCES)))]
        self._walls, self._goal, self._position = self._draw_layout(self._difficulty)
        self._distance = distances_to(self._goal, self._walls)
        self._progress_counts = dict.fromkeys(CONVENTIONS, 0)
        self._moves_made = 0
        self._demo_plan = None
        prompt = f"Grid {SIZE}x{SIZE}. Reach the goal. Move with N, E, S or W. " + self._view()
        return prompt, self._status_info()

    def _draw_layout(self, difficulty: int) -> tuple[frozenset[Cell], Cell, Cell]:
        rng = self.np_random
        cells = [(row, col) for row in range(SIZE) for col in range(SIZE)]
        corner = HIDDEN_CORNERS.get(self._theta["goal"])
        for _ in range(_MAX_LAYOUT_TRIES):
            goal = corner if corner is not None else cells[int(rng.integers(len(cells)))]
            others = [cell for cell in cells if cell != goal]
            picks = rng.choice(len(others), size=NUM_WALLS, replace=False)
            walls = frozenset(others[int(index)] for index in picks)
            starts = [
                cell for cell, moves in distances_to(goal, walls).items() if moves == difficulty
            ]
            if starts:
                return walls, goal, starts[int(rng.integers(len(starts)))]
        # Reaching this needs 1000 layouts in a row without a cell at that distance.
        raise RuntimeError(f"GridShift: no layout with a start {difficulty} moves from the goal")

    def _view(self) -> str:
        row, col = self._position
        goal = (
            f"Goal {describe_offset(self._position, self._goal)}."
            if self._theta["goal"] == "shown"
            else "Goal ?."
        )
        walls = [
            direction
            for direction in DIRECTIONS
            if step_cell(self._position, direction, self._walls) == self._position
        ]
        return f"At {row},{col}. {goal} Walls: {' '.join(walls) or 'none'}."

    def _status_info(self) -> dict[str, Any]:
        return {
            "difficulty": self._difficulty,
            "position": list(self._position),
            "turns_left": self.max_turns - self._turn,
        }

    def _respond(self, action: str) -> TurnResult:
        letter = action.strip()
        if len(letter) > 1 or _MOVE.fullmatch(letter) is None:
            return self._after(f"Not a move; write N, E, S or W. {self._view()}", "malformed")
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
        landed = step_cell(self._position, direction, self._walls)
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
        return self._after(
            ("Bumped into a wall. " if outcome == "bumped" else "") + self._view(), outcome
        )

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
        here = self._distance.get(self._position, 99)
        for convention, mapping in CONVENTIONS.items():
            landed = step_cell(self._position, mapping[letter], self._walls)
            if self._distance.get(landed, 99) < here:
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
        direction = best_direction(self._position, self._distance, self._walls)
        return letter_for(direction, info["theta"]["moves"])

    def demonstration_action(self, observation: str, info: dict[str, Any]) -> str:
        """A shortest-path move under controls drawn once per episode, not the live ones.

        The controls are drawn uniformly from ``demo_moves``. A hidden goal is looked for
        at a corner drawn uniformly, then at the other one; a shown goal is walked to. So the
        demonstrations navigate competently and are undecided about what the drift hides.
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
        distance = distances_to(targets[0], self._walls)
        return letter_for(best_direction(self._position, distance, self._walls), convention)

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
