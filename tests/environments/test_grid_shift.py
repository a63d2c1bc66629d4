"""GridShift-v1: layouts and difficulty, the offset observation, controls, slip, edges, rewards,
truncation, hidden goals, behaviour labels, the oracle's ceiling and the demonstrations."""

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
    SIZE,
    best_direction,
    describe_offset,
    distance,
    letter_for,
    offset_parts,
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


def place(env, position, goal):
    env._position, env._goal = position, goal


def test_grid_helpers_by_hand():
    assert step_cell((0, 1), "N") == (0, 1)  # the edge
    assert step_cell((0, 1), "W") == (0, 0) and step_cell((4, 4), "E") == (4, 4)
    assert distance((0, 0), (3, 4)) == 7
    # Rows first, then columns; the demonstrations move along the last part.
    assert offset_parts((2, 1), (4, 2)) == [(2, "S"), (1, "E")]
    assert offset_parts((3, 3), (0, 1)) == [(3, "N"), (2, "W")]
    assert describe_offset((3, 3), (4, 0)) == "1S 3W" and describe_offset((4, 4), (4, 4)) == ""
    assert best_direction((2, 1), (4, 2)) == "E" and best_direction((3, 3), (0, 3)) == "N"
    assert [letter_for("N", moves) for moves in CONVENTIONS] == ["N", "W", "N"]


def test_difficulty_is_the_distance_and_uniform():
    seen = Counter()
    for seed in range(700):
        env, _, info = start(seed=seed)
        assert distance(env._position, env._goal) == info["difficulty"]
        assert all(0 <= x < SIZE for x in (*env._position, *env._goal))
        seen[info["difficulty"]] += 1
    assert set(seen) == set(DISTANCES)
    assert all(70 <= count <= 130 for count in seen.values()), seen  # 100 +- 3.2 sd


def test_observation_is_the_goal_offset_rows_first():
    env, observation, info = start(seed=4)
    offset = describe_offset(tuple(info["position"]), env._goal)
    assert observation == f"Walk to the goal with N, E, S or W. Goal {offset}."
    place(env, (0, 0), (2, 3))
    observation, *_ = env.step("E")
    assert observation == "Goal 2S 2E."
    observation, *_ = env.step("W")
    assert observation == "Goal 2S 3E."


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
    place(env, (2, 2), (4, 4))
    env.step(f" {letter}\n")
    assert env._position == (2 + moved[0], 2 + moved[1])


def test_edges_block_and_malformed_actions_cost_a_move():
    env, _, _ = start({"goal": "shown"})
    place(env, (0, 2), (4, 4))
    observation, reward, terminated, truncated, info = env.step("N")
    assert observation == "Bumped. Goal 4S 2E."
    assert (reward, terminated, truncated, info["outcome"]) == (-0.02, False, False, "bumped")
    observation, reward, _, _, info = env.step("go north")
    assert observation == "Not a move. Goal 4S 2E."
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
    outcomes = Counter()
    for _ in range(1500):
        place(env, (2, 2), (4, 4))
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


def test_a_wrong_early_move_costs_the_goal_when_the_cap_leaves_no_slack():
    # Start 7 moves away with a cap of 8 actions: the shortest path pays, a first move the
    # wrong way leaves 7 actions for 8 moves and the episode ends without the goal.
    for first, reached in (("S", True), ("N", False)):
        env, _, _ = start(max_turns=8, seed=1)
        place(env, (1, 0), (4, 4))  # 3S 4E: S is on a shortest path, N is not
        env.step(first)
        *_, end = run(env, None, {"theta": {"moves": "compass"}}, env.oracle_action)
        assert end["reached"] is reached


@pytest.mark.parametrize("goal", ["hidden_ne", "hidden_sw"])
def test_hidden_goal_sits_at_its_corner_and_only_the_position_is_shown(goal):
    for seed in range(20):
        env, observation, info = start({"goal": goal}, seed=seed)
        row, col = info["position"]
        assert env._goal == HIDDEN_CORNERS[goal] and "Goal" not in observation
        assert observation.endswith(f"The goal is hidden. At {row},{col}.")
        assert distance(env._position, env._goal) == info["difficulty"]


def test_behavior_names_the_convention_whose_moves_made_progress():
    env, _, _ = start({"moves": "mirrored"})
    place(env, (2, 2), (0, 4))
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
    place(env, (2, 2), (0, 2))
    env.step("N")
    *_, info = env.step("N")
    assert info["reached"] and info["behavior"] == "compass+mirrored"


def test_demonstrations_write_the_offsets_last_letter_under_the_compass_by_default():
    env = GridShiftEnv()
    for seed in range(100):
        observation, info = env.reset(seed=seed, options={"drift": {"moves": "mirrored"}})
        # The letter to write sits right before the closing period: "... Goal 2S 1E." -> E.
        assert env.demonstration_action(observation, info) == observation[-2]
        assert env._demo_plan[0] == "compass"


def test_demonstrations_draw_the_named_conventions_and_reach_when_theirs_is_live():
    env = GridShiftEnv(demo_moves=["mirrored", "compass", "mirrored"])
    assert env.demo_moves == ("compass", "mirrored")
    drawn, reached = Counter(), 0
    for seed in range(200):
        observation, info = env.reset(seed=seed, options={"drift": {"moves": "mirrored"}})
        env.demonstration_action(observation, info)
        drawn[env._demo_plan[0]] += 1
        if env._demo_plan[0] == "mirrored":
            _, steps, end = run(env, observation, info, env.demonstration_action)
            assert end["reached"] and steps == info["difficulty"]
            reached += 1
    assert set(drawn) == {"compass", "mirrored"} and min(drawn.values()) > 70, drawn
    assert reached == drawn["mirrored"]


def test_demonstration_noise_draws_letters_uniformly_at_its_rate_and_walks_back():
    env = GridShiftEnv(demo_noise=0.3, max_turns=40)
    planned, letters, reached = 0, Counter(), 0
    moves = 0
    for seed in range(300):
        observation, info = env.reset(seed=seed, options={"drift": {"slip": 0.0}})
        while True:
            best = letter_for(best_direction(env._position, env._goal), "compass")
            letter = env.demonstration_action(observation, info)
            moves += 1
            planned += letter == best
            letters[letter] += letter != best
            observation, _, terminated, truncated, info = env.step(letter)
            if terminated or truncated:
                reached += info["reached"]
                break
    # A noisy move is the planned letter a quarter of the time: 0.7 + 0.3 / 4 = 0.775.
    assert planned / moves == pytest.approx(0.775, abs=0.03)
    assert reached == 300  # with 40 turns every demonstration recovers and arrives
    off_plan = sum(letters.values())
    assert all(count / off_plan > 0.15 for count in letters.values()), letters


def test_demonstrations_look_for_a_hidden_goal_at_both_corners():
    env = GridShiftEnv(max_turns=20)
    first_corners = Counter()
    for seed in range(60):
        observation, info = env.reset(seed=seed, options={"drift": {"goal": "hidden_sw"}})
        visited = [env._position]
        while True:
            letter = env.demonstration_action(observation, info)
            if len(visited) == 1:
                first_corner = env._demo_plan[1][0]
            observation, _, terminated, truncated, info = env.step(letter)
            visited.append(env._position)
            if terminated or truncated:
                break
        assert info["reached"] and visited[-1] == HIDDEN_CORNERS["hidden_sw"]
        first_corners[first_corner] += 1
        if first_corner == HIDDEN_CORNERS["hidden_ne"]:  # the wrong corner first, then the other
            assert HIDDEN_CORNERS["hidden_ne"] in visited
    assert set(first_corners) == set(HIDDEN_CORNERS.values()), first_corners


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"demo_moves": []}, "demo_moves"),
        ({"demo_moves": "compass"}, "demo_moves"),
        ({"demo_moves": ["compass", "diagonal"]}, "demo_moves"),
        ({"demo_noise": 0.6}, "demo_noise"),
        ({"demo_noise": True}, "demo_noise"),
        ({"max_turns": 6}, "max_turns"),
        ({"max_turns": 10.0}, "max_turns"),
        ({"move_cost": 0.5}, "move_cost"),
        ({"move_cost": None}, "move_cost"),
    ],
)
def test_constructor_arguments_are_validated(kwargs, named):
    with pytest.raises(ValueError, match=named):
        GridShiftEnv(**kwargs)
