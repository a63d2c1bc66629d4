"""ToolShift-v0: grammar, drift of name/schema/failure, rewards, truncation, the oracle's
ceiling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sao_online.environments import ToolShiftEnv
from sao_online.environments.tool_shift import (
    SCHEMAS,
    TOOL_NAMES,
    format_call,
    oracle_expected_return,
    parse_v1,
    parse_v2,
)


def start(theta=None, seed=0, **kwargs):
    env = ToolShiftEnv(**kwargs)
    observation, info = env.reset(seed=seed, options={"drift": theta or {}})
    a, b = (int(x) for x in info["question"].split("*"))
    return env, observation, info, a, b


def run_oracle(env, observation, info):
    total = 0.0
    while True:
        observation, reward, terminated, truncated, info = env.step(
            env.oracle_action(observation, info)
        )
        total += reward
        if terminated or truncated:
            return total, info


@pytest.mark.parametrize(
    ("args", "parsed"),
    [
        ("347*281", (347, "*", 281)),
        (" 3 - -4 ", (3, "-", -4)),
        ("1+2+3", None),
        ("a=1", None),
        ("347 x 281", None),
        ("", None),
    ],
)
def test_parse_v1(args, parsed):
    assert parse_v1(args) == parsed


@pytest.mark.parametrize(
    ("args", "parsed"),
    [
        ("a=347, op=*, b=281", (347, "*", 281)),
        ("b=2,a=1,op=+", (1, "+", 2)),
        ("a=1, op=/, b=2", None),
        ("a=1, b=2", None),
        ("a=1, a=2, op=+, b=3", None),
        ("a=x, op=+, b=2", None),
        ("347*281", None),
    ],
)
def test_parse_v2(args, parsed):
    assert parse_v2(args) == parsed


def test_prompt_documents_the_original_api_whatever_the_drift():
    for tool_name, schema in itertools.product(TOOL_NAMES, SCHEMAS):
        _, observation, info, a, b = start({"tool_name": tool_name, "schema": schema}, seed=5)
        assert observation == (
            f"Compute {a}*{b}. Tool: CALL calc(<int><op><int>). Finish with ANSWER <n>."
        )
        assert 100 <= a <= 999 and 100 <= b <= 999


@pytest.mark.parametrize("digits", [2, 4])
def test_operand_digits_sets_the_operands_length(digits):
    for seed in range(20):
        _, observation, _, a, b = start(seed=seed, operand_digits=digits)
        assert 10 ** (digits - 1) <= min(a, b) and max(a, b) < 10**digits
        assert f"Compute {a}*{b}." in observation


def test_questions_vary_with_the_seed_and_are_not_guessable():
    questions = {start(seed=seed)[2]["question"] for seed in range(100)}
    assert len(questions) == 100


def test_stale_docs_get_errors_that_reveal_the_live_api():
    env, _, _, a, b = start({"tool_name": "compute", "schema": "v2"})
    observation, reward, terminated, truncated, info = env.step(f"CALL calc({a}*{b})")
    assert observation == "ERROR: unknown tool 'calc'; tools: compute"
    assert (reward, terminated, truncated, info["outcome"]) == (-0.05, False, False, "unknown_tool")
    observation, *_ = env.step(f"CALL compute({a}*{b})")
    assert observation == "ERROR: bad arguments; use compute(a=<int>, op=<op>, b=<int>)"
    observation, *_ = env.step(f"CALL compute(a={a}, op=*, b={b})")
    assert observation == f"RESULT {a * b}"
    observation, reward, terminated, truncated, info = env.step(f"ANSWER {a * b}")
    assert (observation, reward, terminated, truncated) == ("Correct.", 1.0, True, False)
    assert info["behavior"] == "calc/v1" and info["correct"]


def test_rewards_add_up_by_hand():
    env, _, _, a, b = start()
    rewards = [
        env.step(action)[1] for action in ["hello", f"CALL calc({a}*{b})", f" ANSWER {a * b}\n"]
    ]
    assert rewards == [-0.1, -0.05, 1.0]
    assert sum(rewards) == pytest.approx(0.85)


def test_wrong_answer_terminates_with_zero():
    env, _, _, a, b = start()
    observation, reward, terminated, truncated, info = env.step(f"ANSWER {a * b + 1}")
    assert (observation, reward, terminated, truncated) == ("Wrong.", 0.0, True, False)
    assert info["behavior"] == "no_call" and info["answer"] == a * b and not info["correct"]


def test_turn_limit_truncates_and_is_not_termination():
    env, _, _, a, b = start(max_turns=3)
    for turn in range(2):
        _, _, terminated, truncated, info = env.step("ANSWER forty")
        assert not (terminated or truncated) and info["turns_left"] == 2 - turn
    observation, reward, terminated, truncated, info = env.step("ANSWER 1e5")
    assert (reward, terminated, truncated) == (-0.1, False, True)
    assert observation.endswith("Turn limit reached.")
    assert info["behavior"] == "malformed" and info["correct"] is False


@pytest.mark.parametrize(
    ("first_action", "label"),
    [
        ("CALL calc(1*2)", "calc/v1"),
        ("CALL compute(a=1, op=+, b=2)", "compute/v2"),
        ("CALL calc(a=1, op=+, b=2)", "calc/v2"),
        ("CALL eval(1*2)", "other/v1"),
        ("CALL compute(one times two)", "compute/bad_args"),
    ],
)
def test_behavior_is_the_first_call(first_action, label):
    env, _, _, a, b = start({"tool_name": "compute"})
    env.step(first_action)
    *_, info = env.step(f"ANSWER {a * b}")
    assert info["behavior"] == label


def test_tool_names_are_short_identifiers_so_echoing_them_is_safe():
    env, *_ = start(max_turns=5)
    observation, *_ = env.step("CALL \u00e9val(1*2)")
    assert observation == "ERROR: malformed action; reply CALL <tool>(<args>) or ANSWER <integer>"
    observation, *_ = env.step("CALL " + "x" * 32 + "(1*2)")
    assert observation == f"ERROR: unknown tool '{'x' * 32}'; tools: calc"
    observation, *_ = env.step("CALL " + "x" * 33 + "(1*2)")
    assert observation.startswith("ERROR: malformed action")


def test_failures_happen_at_the_drifted_rate_and_retrying_works():
    env = ToolShiftEnv(max_turns=400)
    env.reset(seed=0, options={"drift": {"failure": 0.3}})
    outcomes = [env.step("CALL calc(2*3)")[4]["outcome"] for _ in range(399)]
    assert set(outcomes) == {"failed", "result"}
    assert outcomes.count("failed") / len(outcomes) == pytest.approx(0.3, abs=0.07)


def test_oracle_expected_return_by_hand():
    assert oracle_expected_return(0.0, 4, 0.05) == pytest.approx(0.95)
    # p = .5: success on call 1, 2, 3 or never: .5*.95 + .25*.90 + .125*.85 + .125*(-.15)
    assert oracle_expected_return(0.5, 4, 0.05) == pytest.approx(0.7875)
    assert oracle_expected_return(0.5, 2, 0.1) == pytest.approx(0.5 * 0.9 - 0.5 * 0.1)


@pytest.mark.parametrize(("tool_name", "schema"), list(itertools.product(TOOL_NAMES, SCHEMAS)))
def test_oracle_scores_the_ceiling_without_failures(tool_name, schema):
    theta = {"tool_name": tool_name, "schema": schema, "failure": 0.0}
    for seed in range(5):
        env, observation, info, *_ = start(theta, seed=seed)
        total, info = run_oracle(env, observation, info)
        assert total == pytest.approx(env.oracle_reward(theta)) == pytest.approx(0.95)
        assert info["behavior"] == f"{tool_name}/{schema}"


@pytest.mark.parametrize("failure", [0.1, 0.3, 0.5])
@pytest.mark.parametrize(("tool_name", "schema"), list(itertools.product(TOOL_NAMES, SCHEMAS)))
def test_oracle_mean_return_matches_its_expected_ceiling(tool_name, schema, failure):
    theta = {"tool_name": tool_name, "schema": schema, "failure": failure}
    env = ToolShiftEnv()
    returns = []
    for seed in range(1000):
        observation, info = env.reset(seed=seed, options={"drift": theta})
        returns.append(run_oracle(env, observation, info)[0])
    # The return's standard deviation is at most 0.36 (p = 0.5), so the standard error of the
    # mean is below 0.012; allow about 3.5 of them.
    assert np.mean(returns) == pytest.approx(env.oracle_reward(theta), abs=0.04)


def test_format_call_round_trips_through_the_parsers():
    assert format_call("calc", "v1", 12, "*", 34) == "CALL calc(12*34)"
    assert format_call("compute", "v2", 12, "-", 34) == "CALL compute(a=12, op=-, b=34)"
    assert parse_v2(format_call("x", "v2", 5, "+", 6)[7:-1]) == (5, "+", 6)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_turns": 1}, "max_turns"),
        ({"max_turns": 2.0}, "max_turns"),
        ({"call_cost": -0.1}, "call_cost"),
        ({"malformed_penalty": "big"}, "malformed_penalty"),
        ({"operand_digits": 1}, "operand_digits"),
        ({"operand_digits": 3.0}, "operand_digits"),
    ],
)
def test_constructor_arguments_are_validated(kwargs, named):
    with pytest.raises(ValueError, match=named):
        ToolShiftEnv(**kwargs)
