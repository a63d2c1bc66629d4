"""Every built-in environment: Gymnasium's checker without warnings, registration, and a fuzz test
showing that no text action makes them raise or leave their spaces.

CodeShift runs with the subprocess sandbox (the cheapest backend; each checked submission starts
one Python process), and gets a smaller fuzz budget of its own to keep this file quick.
"""

from __future__ import annotations

import math
import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from sao_online.drift_schedules import Choice, Range
from sao_online.environments import (
    CodeShiftEnv,
    GridShiftEnv,
    ReasonShiftEnv,
    StyleShiftEnv,
    ToolShiftEnv,
    list_envs,
    register_envs,
)

# The sandbox modules run on one worker: the containment tests find no sao-sandbox-* folder
# in the shared temp dir only while no other sandbox runs, and fork bombs and wall-clock
# limits must not meet each other's bursts.
pytestmark = pytest.mark.xdist_group("sandbox")

ENV_CLASSES = {
    "sao_online/StyleShift-v0": StyleShiftEnv,
    "sao_online/ToolShift-v0": ToolShiftEnv,
    "sao_online/ReasonShift-v0": ReasonShiftEnv,
    "sao_online/GridShift-v1": GridShiftEnv,
    "sao_online/CodeShift-v0": CodeShiftEnv,
}
ENV_IDS = list(ENV_CLASSES)
#: Constructor arguments per class (CodeShift: the subprocess sandbox, no Docker needed).
ENV_KWARGS = {CodeShiftEnv: {"sandbox": "subprocess"}}
#: The classes whose steps cost no process start, fuzzed together with the larger budget.
CHEAP_CLASSES = [c for c in ENV_CLASSES.values() if c is not CodeShiftEnv]

NASTY_ACTIONS = [
    "",
    " ",
    "\n",
    "x" * 1_000_000,
    "\u00e9\u2603\U0001f600",
    "\x00\x07\x1b[2J",
    "ANSWER",
    "ANSWER 99999999999999999999",
    "CALL calc(",
    "CALL calc()",
    "CALL calc(1*2",
    "CALL (1*2)",
    "CALL calc(a=1, op=*, b=2, c=3)",
    "CALL calc(" + "9" * 100_000 + "*2)",
    "ANSWER -0",
    "call calc(1*2)",
    "Nya~\n",
    "uwu " * 100,
    "ANSWER: ",
    "<>",
    "<" * 1000 + ">" * 1000,
    "\\boxed{",
    "\\boxed{}}",
    "N",
    " e ",
    "NN",
    "N\nE",
    "\u039d",
    "def fit(x):\n    return x",
    "def fit(x):\n    import kit\n    return kit.clip(x, (0, 1))",
    "def fit(x)\n",
    "import os\nos._exit(3)",
    "def fit(x):\n    return 'a' * 10**9",
]


def build(env_class):
    """An instance of ``env_class`` built as the contract tests use it."""
    return env_class(**ENV_KWARGS.get(env_class, {}))


def make(env_id):
    """``gymnasium.make(env_id)`` with the same constructor arguments as :func:`build`."""
    return gymnasium.make(env_id, **ENV_KWARGS.get(ENV_CLASSES[env_id], {}))


def drifted_theta(env_class, draw_index: int) -> dict:
    """A theta with every Choice at one of its values and every Range inside its interval."""
    theta = {}
    for name, spec in env_class.drift_space.items():
        if isinstance(spec, Choice):
            theta[name] = spec.values[draw_index % len(spec.values)]
        else:
            assert isinstance(spec, Range)
            theta[name] = spec.low + (spec.high - spec.low) * (draw_index % 3) / 2
    return theta


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_through_make_without_warnings(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = make(env_id)
        check_env(env.unwrapped)
        env.reset(seed=0)
        env.close()


@pytest.mark.parametrize("env_class", list(ENV_CLASSES.values()))
def test_check_env_on_a_directly_built_env_without_warnings(env_class):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Built without gymnasium.make there is no spec to remake the env from, so the render
        # check (which needs one) is skipped; there are no render modes anyway.
        env = build(env_class)
        check_env(env, skip_render_check=True)
        env.close()


def test_registration_is_idempotent_and_listed():
    register_envs()
    register_envs()
    listed = {env_id: (description, space) for env_id, description, space in list_envs()}
    assert set(ENV_IDS) <= set(listed)
    for env_id, env_class in ENV_CLASSES.items():
        description, space = listed[env_id]
        assert description == env_class.description and "\n" not in description
        assert space == env_class.drift_space
    assert set(listed["sao_online/StyleShift-v0"][1]["preferred"].values) == {
        "academic",
        "cute",
        "chuunibyou",
        "classical",
    }
    assert listed["sao_online/StyleShift-v0"][1]["pool"].values == (
        "academic_cute_chuunibyou",
        "classical_cute_chuunibyou",
    )


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_passes_drift_through_options(env_id):
    env = make(env_id)
    theta = drifted_theta(ENV_CLASSES[env_id], 1)
    _, info = env.reset(seed=0, options={"drift": theta, "phase": 1})
    assert info["theta"] == theta and info["phase"] == 1
    env.close()


def assert_well_formed_step(env, result):
    observation, reward, terminated, truncated, info = result
    assert observation in env.observation_space
    assert isinstance(reward, float) and math.isfinite(reward)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    assert not (terminated and truncated)
    assert {"phase", "theta"} <= set(info)
    assert ("behavior" in info) == (terminated or truncated)
    return terminated or truncated


@pytest.mark.parametrize("env_class", list(ENV_CLASSES.values()))
@pytest.mark.parametrize("action", NASTY_ACTIONS, ids=lambda a: repr(a[:20]))
def test_nasty_actions_never_raise(env_class, action):
    env = build(env_class)
    env.reset(seed=0, options={"drift": drifted_theta(env_class, 1)})
    assert_well_formed_step(env, env.step(action))
    env.close()


ACTIONS = st.one_of(
    st.text(max_size=200),
    st.from_regex(r"(CALL|ANSWER)[ ]?[a-z]{0,8}\(?[-0-9a-z=,*+ ]{0,20}\)?", fullmatch=True),
    st.from_regex(r"(ANSWER: ?|<|\\boxed\{)?[0-9a-z]{0,12}[>}]?", fullmatch=True),
    st.sampled_from(["N", "E", "S", "W", "n", " s\n", "X"]),
    st.binary(max_size=50),
)
PYTHON_ACTIONS = st.from_regex(
    # No "*": "9**9**9" would spend the sandbox's whole CPU limit on one example.
    r"(import kit\n)?def (fit|[a-z]{1,6})\(x\):\n    return [-+/% ()0-9a-z.,]{0,30}",
    fullmatch=True,
)


def fuzz_episode(env_class, actions, seed, regime):
    env = build(env_class)
    try:
        observation, _ = env.reset(seed=seed, options={"drift": drifted_theta(env_class, regime)})
        assert observation in env.observation_space
        for action in actions:
            if assert_well_formed_step(env, env.step(action)):
                break
    finally:
        env.close()


@settings(max_examples=60, deadline=None)
@given(
    actions=st.lists(ACTIONS, min_size=1, max_size=6),
    seed=st.integers(0, 2**31 - 1),
    regime=st.integers(0, 11),
)
def test_fuzzed_episodes_stay_in_the_contract(actions, seed, regime):
    for env_class in CHEAP_CLASSES:
        fuzz_episode(env_class, actions, seed, regime)


@settings(max_examples=12, deadline=None)
@given(
    actions=st.lists(st.one_of(ACTIONS, PYTHON_ACTIONS), min_size=1, max_size=3),
    seed=st.integers(0, 2**31 - 1),
    regime=st.integers(0, 11),
)
def test_fuzzed_code_shift_episodes_stay_in_the_contract(actions, seed, regime):
    fuzz_episode(CodeShiftEnv, actions, seed, regime)


def test_docstring_examples_run():
    import doctest

    from sao_online.environments import grid_shift, reason_shift, style_shift, tool_shift

    # (code_shift has no docstring examples: its examples need a sandbox.)
    for module in (style_shift, tool_shift, reason_shift, grid_shift):
        results = doctest.testmod(module)
        assert results.attempted > 0 and results.failed == 0, module.__name__
