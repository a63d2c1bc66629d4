"""ReasonShift-v0: tasks and their answers, levels, the hidden format, rewards, retries, oracle and
demonstrations."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from sao_online.environments import ReasonShiftEnv
from sao_online.environments.reason_shift import (
    DIFFICULTIES,
    FORMATS,
    MIXES,
    TASKS,
    format_answer,
    parse_answer,
    solve,
)


def start(theta=None, seed=0, **kwargs):
    env = ReasonShiftEnv(**kwargs)
    observation, info = env.reset(seed=seed, options={"drift": theta or {}})
    return env, observation, info


@pytest.mark.parametrize(
    ("task", "operand", "answer"),
    [
        ("reverse", "kqzmwd", "dwmzqk"),
        ("sort", "907142", "012479"),
        ("count", "b in abbcab", "3"),
        ("count", "c in ab", "0"),
        ("add", "5600+3428", "9028"),
        ("add", "7+8", "15"),
    ],
)
def test_solve_by_hand(task, operand, answer):
    assert solve(task, operand) == answer


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("ANSWER: 42", ("answer", "42")),
        ("  ANSWER:dcba\n", ("answer", "dcba")),
        ("<42>", ("tags", "42")),
        ("< 42 >", ("tags", "42")),
        ("\\boxed{012}", ("boxed", "012")),
        ("42", None),
        ("answer: 42", None),
        ("<4<2>", None),
        ("\\boxed{42", None),
        ("", None),
        ("<" + "9" * 70 + ">", None),
    ],
)
def test_parse_answer(text, parsed):
    assert parse_answer(text) == parsed


def test_format_answer_round_trips():
    for answer_format in FORMATS:
        assert parse_answer(format_answer("abc", answer_format)) == (answer_format, "abc")
    with pytest.raises(ValueError, match="answer_format"):
        format_answer("1", "xml")


def test_prompts_show_the_level_and_operands_grow_with_it():
    lengths = {}
    for seed in range(300):
        env, observation, info = start(seed=seed)
        assert observation.startswith(f"Level {info['difficulty']}. ")
        question = observation.split(": ", 1)[1]
        if info["task"] in ("reverse", "sort"):
            lengths.setdefault(info["difficulty"], set()).add(len(question))
        if info["task"] == "add":
            left, right = question.split("+")
            assert len(left) == len(right) == info["difficulty"]
    assert lengths == {level: {level} for level in range(1, 6)}


@pytest.mark.parametrize("mix", list(MIXES))
@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_mix_and_difficulty_drift_what_is_drawn(mix, difficulty):
    seen = Counter()
    for seed in range(200):
        _, _, info = start({"mix": mix, "difficulty": difficulty}, seed=seed)
        seen[(info["task"], info["difficulty"])] += 1
    assert {task for task, _ in seen} == set(MIXES[mix])
    assert {level for _, level in seen} == set(DIFFICULTIES[difficulty])


def test_prompt_never_names_the_format():
    for answer_format, seed in itertools.product(FORMATS, range(20)):
        _, observation, _ = start({"answer_format": answer_format}, seed=seed)
        assert "ANSWER" not in observation and "<" not in observation and "boxed" not in observation


def test_rewards_by_hand():
    env, _, info = start({"answer_format": "tags"}, seed=1)
    answer = env.oracle_action("", info)
    observation, reward, terminated, truncated, info = env.step(answer)
    assert (observation, reward, terminated, truncated) == ("Correct.", 1.0, True, False)
    assert info["correct"] and info["solved"] and info["behavior"] == "tags"

    env, _, info = start({"answer_format": "tags"}, seed=1)
    observation, reward, terminated, truncated, info = env.step("<wrong>")
    assert (observation, reward, terminated, truncated) == ("Wrong.", 0.0, True, False)
    assert not info["correct"] and not info["solved"] and info["outcome"] == "wrong"


def test_wrong_format_says_why_and_a_retry_earns_the_retry_reward():
    env, _, info = start({"answer_format": "boxed"}, seed=2)
    content = parse_answer(env.oracle_action("", info))[1]
    observation, reward, terminated, truncated, info = env.step(f"ANSWER: {content}")
    assert observation == "format not accepted; write the answer as \\boxed{x}"
    assert (reward, terminated, truncated, info["outcome"]) == (0.0, False, False, "wrong_format")
    assert info["turns_left"] == 1
    observation, reward, terminated, truncated, info = env.step(f"\\boxed{{{content}}}")
    assert (observation, reward, terminated) == ("Correct.", 0.5, True)
    assert info["behavior"] == "answer" and info["correct"] and info["solved"]


def test_malformed_twice_truncates_with_nothing():
    env, _, _ = start({"answer_format": "answer"})
    observation, reward, *_ = env.step("the answer is 4")
    assert observation == "no answer format recognised; write the answer as ANSWER: x"
    observation, reward, terminated, truncated, info = env.step("4")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert observation.endswith("Turn limit reached.")
    assert info["behavior"] == "malformed" and not info["correct"] and not info["solved"]


def test_solved_records_a_right_answer_in_the_wrong_format():
    env, _, info = start({"answer_format": "answer"}, seed=3, max_turns=1)
    content = parse_answer(env.oracle_action("", info))[1]
    *_, truncated, info = env.step(f"<{content}>")
    assert truncated and info["solved"] and not info["correct"] and info["behavior"] == "tags"


def test_info_carries_task_and_difficulty_on_every_call():
    env, _, info = start()
    assert {"task", "difficulty", "phase", "theta"} <= set(info)
    for action in ("?", "??"):
        *_, info = env.step(action)
        assert info["task"] in TASKS and info["difficulty"] in range(1, 6)


@pytest.mark.parametrize(
    ("mix", "difficulty", "answer_format"), list(itertools.product(MIXES, DIFFICULTIES, FORMATS))
)
def test_oracle_scores_its_ceiling_in_every_regime(mix, difficulty, answer_format):
    theta = {"mix": mix, "difficulty": difficulty, "answer_format": answer_format}
    for seed in range(10):
        env, observation, info = start(theta, seed=seed)
        *_, reward, terminated, _, info = env.step(env.oracle_action(observation, info))
        assert terminated and reward == env.oracle_reward(theta) == 1.0


def test_demonstrations_solve_every_task_and_are_undecided_about_the_format():
    env = ReasonShiftEnv()
    formats = Counter()
    for seed in range(300):
        observation, info = env.reset(seed=seed, options={"drift": {"answer_format": "tags"}})
        demo = env.demonstration_action(observation, info)
        observation, reward, terminated, _, info = env.step(demo)
        formats[parse_answer(demo)[0]] += 1
        if not terminated:  # the demonstration follows the format the observation named
            *_, reward, terminated, _, info = env.step(env.demonstration_action(observation, info))
            assert reward == 0.5
        assert terminated and info["correct"] and info["solved"]
    assert set(formats) == set(FORMATS)
    assert all(70 <= count <= 130 for count in formats.values()), formats  # 100 +- 4.1 sd


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"max_turns": True}, "max_turns"),
        ({"retry_reward": 1.5}, "retry_reward"),
        ({"retry_reward": "half"}, "retry_reward"),
    ],
)
def test_constructor_arguments_are_validated(kwargs, named):
    with pytest.raises(ValueError, match=named):
        ReasonShiftEnv(**kwargs)
