"""GridShift-v0: layouts and difficulty, controls, slip, walls, rewards, truncation, hidden goals,
behaviour labels, the oracle's ceiling and the demonstrations."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from sao_online.environments import GridShiftEnv
from sao_online.environments.grid_shift import (
    CONVENTIONS,
    DISTANCES,
    GOALS,
    HIDDEN_CORNERS,
    best_direction,
    describe_offset,
    distances_to,
    letter_for,
    step_cell,
)


def start(theta=None, seed=0, **kwargs):
    env = GridShiftEnv(**kwargs)
    observation, info = env.reset(seed=seed, options={"drift": theta or {}})
    return env, observation, info


def run(env, observation, info, policy):
    total, steps = 0.0, 0
    while True:
        observation, reward, terminated, truncated, info = env.step(policy(observation, info))
        total, steps = total + reward, steps + 1
        if terminated or truncated:
            return total, steps, info


def test_grid_helpers_by_hand():
    walls = frozenset({(1, 1), (0, 2)})
    assert step_cell((0, 1), "E", walls) == (0, 1)  # wall
    assert step_cell((0, 1), "N", walls) == (0, 1)  # edge
    assert step_cell((0, 1), "W", walls) == (0, 0)
    distance = distances_to((0, 3), walls)
    # (0, 1) must go around the walls: S is blocked by (1, 1), so 0,1 -> 0,0 -> 1,0 -> 2,0 ...
    assert distance[(0, 4)] == 1 and distance[(1, 2)] == 2 and distance[(0, 1)] == 8
    assert best_direction((1, 2), distance, walls) == "E"
    assert describe_offset((4, 4), (4, 4)) == "here"
    assert [letter_for("N", moves) for moves in CONVENTIONS] == ["N", "W", "N"]


def test_difficulty_is_the_shortest_path_distance_and_uniform():
    seen = Counter()
    for seed in range(700):
        env, _, info = start(seed=seed)
        assert distances_to(env._goal, env._walls)[env._position] == info["difficulty"]
        assert env._goal not in env._walls and env._position not in env._walls
        seen[info["difficulty"]] += 1
    assert set(seen) == set(DISTANCES)
    assert all(70 <= count <= 130 for count in seen.values()), seen  # 100 +- 3.2 sd


def test_observation_shows_position_goal_offset_and_walls():
    env, observation, info = start(seed=4)
    row, col = info["position"]
    assert observation.startswith("Grid 5x5. Reach the goal. Move with N, E, S or W. ")
    assert f"At {row},{col}. Goal {describe_offset((row, col), env._goal)}. Walls: " in observation
    walls = [d for d in "NESW" if step_cell((row, col), d, env._walls) == (row, col)]
    assert observation.endswith(f"Walls: {' '.join(walls) or 'none'}.")


@pytest.mark.parametrize(
    ("moves", "letter", "moved"),
    [
        ("compass", "N", (-1, 0)),
        ("compass", "e", (0, 1)),
        ("rotated", "N", (0, 1)),
        ("rotated", "E", (1, 0)),
        ("rotated", "S", (0, -1)),
        ("rotated", "W", (-1, 0)),
        ("mirrored", "E", (0, -1)),
        ("mirrored", "W", (0, 1)),
        ("mirrored", "S", (1, 0)),
    ],
)
def test_controls_drift(moves, letter, moved):
    env, _, _ = start({"moves": moves})
    env._walls, env._goal, env._position = frozenset(), (4, 4), (2, 2)
    env.step(f" {letter}\n")
    assert env._position == (2 + moved[0], 2 + moved[1])


def test_walls_block_and_malformed_actions_cost_a_move():
    env, _, _ = start({"goal": "shown"})
    env._walls, env._goal, env._position = frozenset({(1, 2)}), (4, 4), (2, 2)
    env._distance = distances_to(env._goal, env._walls)
    observation, reward, terminated, truncated, info = env.step("N")
    assert observation.startswith("Bumped into a wall. At 2,2.")
    assert (reward, terminated, truncated, info["outcome"]) == (-0.02, False, False, "bumped")
    observation, reward, _, _, info = env.step("go north")
    assert observation.startswith("Not a move; write N, E, S or W. At 2,2.")
    assert (reward, info["outcome"]) == (-0.02, "malformed")


def test_oracle_return_is_one_minus_the_path_cost_without_slip():
    for moves, goal, seed in itertools.product(CONVENTIONS, GOALS, range(15)):
        env, observation, info = start({"moves": moves, "goal": goal}, seed=seed)
        total, steps, end = run(env, observation, info, env.oracle_action)
        assert steps == info["difficulty"] and end["reached"]
        assert moves in end["behavior"].split("+")
        assert total == pytest.approx(1.0 - 0.02 * info["difficulty"])


def test_oracle_reward_exact_without_slip_and_estimated_with_it():
    env = GridShiftEnv()
    assert env.oracle_reward({}) == pytest.approx(1.0 - 0.02 * 4)  # mean distance 4
    returns = []
    for seed in range(1000):
        observation, info = env.reset(seed=10_000 + seed, options={"drift": {"slip": 0.0}})
        returns.append(run(env, observation, info, env.oracle_action)[0])
    assert np.mean(returns) == pytest.approx(env.oracle_reward({"slip": 0.0}), abs=0.005)
    slippery = env.oracle_reward({"slip": 0.3})
    assert 0.5 < slippery < env.oracle_reward({}) - 0.02  # sideways moves cost turns
    assert env.oracle_reward({"slip": 0.3}) == slippery  # cached and seeded: the same number


def test_slip_happens_at_the_drifted_rate():
    env = GridShiftEnv(max_turns=2000)
    env.reset(seed=0, options={"drift": {"slip": 0.3}})
    env._walls, env._goal = frozenset(), (4, 4)
    outcomes = Counter()
    for _ in range(1500):
        env._position = (2, 2)
        outcomes[env.step("N")[4]["outcome"]] += 1
    assert outcomes["slipped"] / 1500 == pytest.approx(0.3, abs=0.04)


def test_turn_cap_truncates_and_reports_not_reached():
    env, observation, info = start(max_turns=7)
    for turn in range(6):
        *_, terminated, truncated, info = env.step("?")
        assert not (terminated or truncated) and info["turns_left"] == 6 - turn
    observation, reward, terminated, truncated, info = env.step("?")
    assert (reward, terminated, truncated) == (-0.02, False, True)
    assert observation.endswith("Turn limit reached.")
    assert info["behavior"] == "malformed" and info["reached"] is False


@pytest.mark.parametrize("goal", ["hidden_ne", "hidden_sw"])
def test_hidden_goal_sits_at_its_corner_and_is_not_shown(goal):
    for seed in range(20):
        env, observation, info = start({"goal": goal}, seed=seed)
        assert env._goal == HIDDEN_CORNERS[goal] and "Goal ?." in observation
        assert distances_to(env._goal, env._walls)[env._position] == info["difficulty"]


def test_behavior_names_the_convention_whose_moves_made_progress():
    env, _, _ = start({"moves": "mirrored"})
    env._walls, env._goal, env._position = frozenset(), (0, 4), (2, 2)
    env._distance = distances_to(env._goal, env._walls)
    # E from (2, 2) and from (2, 1): progress under compass only (rotated E goes south,
    # mirrored E goes west, which is where the live controls take the agent: to (2, 0)).
    env.step("E")
    env.step("E")
    env.step("N")  # from (2, 0): compass and mirrored go north, rotated goes east: all progress
    env.step("S")  # from (1, 0): south under compass and mirrored, west (an edge) under rotated
    assert env._progress_counts == {"compass": 3, "rotated": 1, "mirrored": 1}
    env._position = (0, 3)
    *_, info = env.step("W")  # mirrored W goes east onto the goal: progress for mirrored only
    assert env._progress_counts == {"compass": 3, "rotated": 1, "mirrored": 2}
    assert info["reached"] and info["behavior"] == "compass"


def test_tied_conventions_are_all_named():
    env, _, _ = start()
    env._walls, env._goal, env._position = frozenset(), (0, 2), (2, 2)
    env._distance = distances_to(env._goal, env._walls)
    env.step("N")
    *_, info = env.step("N")
    assert info["reached"] and info["behavior"] == "compass+mirrored"


def test_demonstrations_navigate_under_a_drawn_convention_and_stay_undecided():
    env = GridShiftEnv()
    first_moves = Counter()
    for seed in range(300):
        observation, info = env.reset(seed=seed, options={"drift": {"moves": "compass"}})
        convention_probe = env.demonstration_action(observation, info)
        convention = env._demo_plan[0]
        first_moves[convention] += 1
        direction = best_direction(env._position, env._distance, env._walls)
        assert convention_probe == letter_for(direction, convention)
    assert set(first_moves) == set(CONVENTIONS)
    assert all(70 <= count <= 130 for count in first_moves.values()), first_moves


def test_demonstrations_reach_a_shown_goal_when_their_convention_is_live():
    env = GridShiftEnv()
    reached = 0
    for seed in range(200):
        observation, info = env.reset(seed=seed, options={"drift": {"moves": "rotated"}})
        env.demonstration_action(observation, info)
        if env._demo_plan[0] != "rotated":
            continue
        _, steps, end = run(env, observation, info, env.demonstration_action)
        assert end["reached"] and steps == info["difficulty"]
        reached += 1
    assert reached > 40


def test_demonstrations_draw_only_the_named_conventions():
    env = GridShiftEnv(demo_moves=["mirrored", "compass", "mirrored"])
    assert env.demo_moves == ("compass", "mirrored")
    drawn = Counter()
    for seed in range(200):
        observation, info = env.reset(seed=seed, options={"drift": {"moves": "compass"}})
        env.demonstration_action(observation, info)
        drawn[env._demo_plan[0]] += 1
    assert set(drawn) == {"compass", "mirrored"} and min(drawn.values()) > 70, drawn
    # With one convention, and it live, every demonstration is the oracle's path.
    env = GridShiftEnv(demo_moves=["compass"])
    for seed in range(20):
        observation, info = env.reset(seed=seed, options={"drift": {"moves": "compass"}})
        assert run(env, observation, info, env.demonstration_action)[1] == info["difficulty"]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"demo_moves": []}, "demo_moves"),
        ({"demo_moves": "compass"}, "demo_moves"),
        ({"demo_moves": ["compass", "diagonal"]}, "demo_moves"),
        ({"max_turns": 6}, "max_turns"),
        ({"max_turns": 10.0}, "max_turns"),
        ({"move_cost": 0.5}, "move_cost"),
        ({"move_cost": None}, "move_cost"),
    ],
)
def test_constructor_arguments_are_validated(kwargs, named):
    with pytest.raises(ValueError, match=named):
        GridShiftEnv(**kwargs)
