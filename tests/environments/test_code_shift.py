"""CodeShift-v0: tasks and tests by hand, oracle and demonstrations in every regime, rewards,
behaviour labels, garbage never raising, the Gymnasium checker, and sandbox selection."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from sao_online.drift_schedules import DriftValueError
from sao_online.environments import CodeShiftEnv, list_envs
from sao_online.environments.code_shift import Task, extract_program, program_for
from sao_online.environments.sandbox import SandboxUnavailable, make_sandbox

# The sandbox modules run on one worker: the containment tests find no sao-sandbox-* folder
# in the shared temp dir only while no other sandbox runs, and fork bombs and wall-clock
# limits must not meet each other's bursts.
pytestmark = pytest.mark.xdist_group("sandbox")

REGIMES = [
    {"boundary": b, "helper_version": v} for b in ("inclusive", "exclusive") for v in ("v1", "v2")
]


@pytest.fixture(scope="module")
def box():
    sandbox = make_sandbox("subprocess")
    yield sandbox
    sandbox.close()


def test_task_arithmetic_by_hand():
    shift = Task("shift", "+", 3, 2, 9)
    assert shift.expression == "x + 3"
    assert [shift.expected(x, "inclusive") for x in (-5, 2, 5, 6, 20)] == [2, 5, 8, 9, 9]
    assert [shift.expected(x, "exclusive") for x in (-5, 2, 5, 6, 20)] == [2, 5, 8, 8, 8]
    level = Task("level", "//", 4, 1, 6)
    assert level.inner(-1) == -1 and level.expected(27, "inclusive") == 6
    assert level.smallest_input_reaching(6) == 24
    assert program_for(shift, "v1", "exclusive") == (
        "import kit\ndef shift(x):\n    return kit.clamp(x + 3, 2, 9 - 1)\n"
    )
    assert program_for(Task("fit", "", 0, 0, 5), "v2", "inclusive") == (
        "import kit\ndef fit(x):\n    return kit.clip(x, (0, 5))\n"
    )


def test_hidden_tests_straddle_the_boundary_and_the_example_does_not(box):
    env = CodeShiftEnv(sandbox=box)
    strictly_inside = []
    for seed in range(40):
        prompt, info = env.reset(seed=seed, options={"drift": REGIMES[seed % 4]})
        task, tests = env._task, env._tests
        inputs = [test.args[0] for test in tests]
        assert len(tests) == 6 and len(set(inputs)) == 6
        assert sum(task.inner(x) >= task.high for x in inputs) >= 3
        assert sum(task.inner(x) < task.low for x in inputs) >= 1
        example = env._example_input()
        shown = task.expected(example, "inclusive")
        assert shown == task.expected(example, "exclusive") and task.low <= task.inner(example)
        strictly_inside.append(task.low < shown < task.high - 1)
        assert f"{task.name}({example}) == {task.expected(example, 'exclusive')}" in prompt
        assert "kit.clamp(x, lo, hi)" in prompt and "clip" not in prompt  # docs stay v1
        assert info["task"] == task.name and info["sandbox"] == "subprocess"
    assert sum(strictly_inside) >= 36  # only ranges too narrow for k = 3 or 4 miss


@pytest.mark.parametrize("theta", REGIMES, ids=lambda t: "/".join(t.values()))
def test_oracle_passes_first_time_in_every_regime(box, theta):
    env = CodeShiftEnv(sandbox=box)
    for seed in range(4):
        observation, info = env.reset(seed=seed, options={"drift": theta})
        _, reward, terminated, truncated, info = env.step(env.oracle_action(observation, info))
        assert (reward, terminated, truncated) == (1.0, True, False), observation
        assert info["solved"] and info["tests_passed"] == info["tests_total"] == 6
        assert info["behavior"] == f"{theta['helper_version']}/{theta['boundary']}"
    assert env.oracle_reward(theta) == 1.0


def test_demonstrations_are_undecided_and_always_recover(box):
    env = CodeShiftEnv(sandbox=box)
    first_choices, returns = Counter(), []
    for seed in range(32):
        observation, info = env.reset(seed=seed, options={"drift": REGIMES[seed % 4]})
        total = 0.0
        for _ in range(env.max_turns):
            observation, reward, terminated, truncated, info = env.step(
                env.demonstration_action(observation, info)
            )
            total += reward
            if terminated or truncated:
                break
        assert info["solved"], observation
        first_choices[info["behavior"]] += 1
        returns.append(round(total, 6))
    # First submissions spread over both APIs and both readings (a v1 call under kit 2.0
    # stops before the boundary shows, hence v1/unknown).
    apis = Counter(label.split("/")[0] for label in first_choices.elements())
    readings = Counter(label.split("/")[1] for label in first_choices.elements())
    assert set(apis) == {"v1", "v2"} and min(apis.values()) >= 8, apis  # 16 +- 2.8 each
    assert readings["inclusive"] >= 4 and readings["exclusive"] >= 4, readings
    assert set(returns) <= {1.0, 0.9, 0.8}
    assert 1.0 in returns and 0.9 in returns


def test_rewards_by_hand(box):
    theta = {"boundary": "exclusive", "helper_version": "v1"}
    env = CodeShiftEnv(sandbox=box, max_turns=2, retry_cost=0.25)
    _, info = env.reset(seed=1, options={"drift": theta})
    wrong = program_for(env._task, "v1", "inclusive")
    observation, reward, terminated, truncated, info = env.step(wrong)
    assert (reward, terminated, truncated) == (-0.25, False, False)
    assert observation.startswith("3/6 tests passed.\nFAIL ") and "wrong answer: got" in observation
    assert observation.endswith("Fix it and resubmit.") and observation.count("FAIL") == 1
    assert info["submitted"] == {"api": "v1", "boundary": "inclusive"} and info["turns_left"] == 1
    observation, reward, terminated, truncated, info = env.step(wrong)
    assert (reward, terminated, truncated) == (0.5, False, True)  # 3 of 6 on the last turn
    assert observation.endswith("Turn limit reached.") and info["behavior"] == "v1/inclusive"
    strict = CodeShiftEnv(sandbox=box, max_turns=1, reward_mode="all")
    strict.reset(seed=1, options={"drift": theta})
    assert strict.step(program_for(strict._task, "v1", "inclusive"))[1] == 0.0


def test_helper_v2_error_names_the_new_api(box):
    env = CodeShiftEnv(sandbox=box, max_turns=1)
    _, info = env.reset(seed=2, options={"drift": {"helper_version": "v2"}})
    observation, reward, _, _, info = env.step(program_for(env._task, "v1", "inclusive"))
    assert "AttributeError: kit 2.0 has no clamp; use kit.clip(x, (lo, hi))" in observation
    assert reward == 0.0 and info["helper_calls"] == {"clamp": 6}
    assert info["behavior"] == "v1/unknown"


def test_the_behaviour_label_cannot_be_forged_by_the_program(box):
    """A top-level ``_sao_calls`` once made the label say v2 for a program that never called the
    helper (the reward was unaffected, the behaviour-share figures lied)."""
    env = CodeShiftEnv(sandbox=box, max_turns=1)
    _, info = env.reset(seed=2, options={"drift": {"helper_version": "v1"}})
    honest = program_for(env._task, "v1", "inclusive")
    forged = "_sao_calls = {'clip': 6}\n" + honest.replace(
        "import kit\n", "import kit\nkit._sao_calls = {'clip': 6}\n"
    )
    _, reward, _, _, info = env.step(forged)
    assert reward == 1.0 and info["helper_calls"] == {"clamp": 6}
    assert info["submitted"]["api"] == "v1" and info["behavior"] == "v1/inclusive"


def test_behaviour_without_the_helper_and_inside_a_fence(box):
    env = CodeShiftEnv(sandbox=box)
    _, info = env.reset(seed=3, options={"drift": {"boundary": "inclusive"}})
    task = env._task
    fenced = (
        f"Here you go:\n```python\ndef {task.name}(x):\n"
        f"    return min(max({task.expression}, {task.low}), {task.high})\n```\nDone."
    )
    _, reward, terminated, _, info = env.step(fenced)
    assert reward == 1.0 and terminated and info["behavior"] == "none/inclusive"
    assert extract_program("```\nx = 1\n```") == "x = 1\n"
    assert extract_program("```py\nx = 1") == "x = 1"
    assert extract_program("x = 1") == "x = 1"


@pytest.mark.parametrize(
    "action",
    [
        "",
        "   \n",
        "\x00\x01",
        "\ud800 surrogate",
        "é☃😀",
        b"\xff\xfe",
        "x" * 100_000,
        "```python\n```",
        "import os\nos.system('echo hi')\n",
        "def fit(x):\n    return fit(x)\n",
        "print('ok' * 10 ** 6)\n",
        "exit()",
        "import sys\nsys.stdout.close()\n",
    ],
    ids=lambda a: repr(a[:16]),
)
def test_garbage_never_raises(box, action):
    env = CodeShiftEnv(sandbox=box, max_turns=2)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation in env.observation_space
    assert math.isfinite(reward) and reward == -0.1 and not (terminated or truncated)
    assert info["tests_passed"] == 0
    _, reward, _, truncated, info = env.step(action)
    assert (
        truncated
        and reward == 0.0
        and info["behavior"] in ("invalid", "none/unknown", "none/other")
    )


def test_refused_programs_say_why(box):
    env = CodeShiftEnv(sandbox=box, max_program_chars=50)
    env.reset(seed=0)
    observation, *_, info = env.step("#" * 51)
    assert observation.startswith(
        "0/6 tests passed: program too long (51 characters; the limit is 50)."
    )
    assert info["status"] == "refused"
    observation, *_ = env.step(" ")
    assert "empty program" in observation


def test_bad_arguments_are_named(box):
    for kwargs, field in [
        ({"sandbox": "chroot"}, "unknown backend 'chroot'"),
        ({"max_turns": 0}, "max_turns"),
        ({"retry_cost": 1.5}, "retry_cost"),
        ({"reward_mode": "best"}, "reward_mode"),
        ({"limits": {"cpu": 1}}, "limits"),
        ({"limits": {"wall_seconds": -1}}, "Limits.wall_seconds"),
        ({"sandbox": 3}, "sandbox"),
    ]:
        with pytest.raises(ValueError, match=field):
            CodeShiftEnv(**kwargs)
    env = CodeShiftEnv(sandbox=box)
    with pytest.raises(DriftValueError, match="boundary"):
        env.reset(options={"drift": {"boundary": "open"}})


def test_check_env_through_make_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gymnasium.make("sao_online/CodeShift-v0", sandbox="subprocess")
        check_env(env.unwrapped)
        env.close()


def test_registered_and_listed():
    listed = {env_id: space for env_id, _, space in list_envs()}
    assert set(listed["sao_online/CodeShift-v0"]) == {"boundary", "helper_version"}


def test_default_sandbox_is_the_strongest_available_and_info_says_which():
    try:
        from sao_online.environments.sandbox import backend_problems

        problems = backend_problems()
        expected = next(
            name for name in ("docker", "bubblewrap", "subprocess") if not problems[name]
        )
    except SandboxUnavailable as error:  # pragma: no cover
        pytest.skip(str(error))
    env = gymnasium.make("sao_online/CodeShift-v0")
    observation, info = env.reset(seed=0)
    assert info["sandbox"] == expected
    *_, info = env.step(env.unwrapped.oracle_action(observation, info))
    assert info["sandbox"] == expected and info["solved"]
    env.close()


@pytest.mark.docker
def test_docker_container_is_removed_on_close():
    try:
        env = gymnasium.make("sao_online/CodeShift-v0", sandbox="docker")
    except SandboxUnavailable as error:
        pytest.skip(str(error))
    import docker

    box = env.unwrapped.sandbox
    observation, info = env.reset(seed=0)
    env.step(env.unwrapped.oracle_action(observation, info))
    container_id = box.container_id
    client = docker.from_env()
    assert client.containers.get(container_id).status == "running"
    attributes = client.containers.get(container_id).attrs["HostConfig"]
    assert attributes["NetworkMode"] == "none" and attributes["ReadonlyRootfs"]
    assert attributes["PidsLimit"] > 0 and attributes["Memory"] > 0
    env.close()
    assert box.container_id is None
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(container_id)
    client.close()


def test_envs_in_a_process_share_one_sandbox_per_backend():
    from sao_online.environments import sandbox as sandboxes

    first, second = CodeShiftEnv(sandbox="subprocess"), CodeShiftEnv(sandbox="subprocess")
    other_limits = CodeShiftEnv(sandbox="subprocess", limits={"wall_seconds": 2.0})
    assert first.sandbox is second.sandbox is not other_limits.sandbox
    shared = first.sandbox
    first.close()
    first.close()  # a second close releases nothing more
    assert any(entry[0] is shared for entry in sandboxes._shared.values())
    second.close()
    other_limits.close()
    assert not any(entry[0] is shared for entry in sandboxes._shared.values())
    with pytest.raises(ValueError, match="not acquired"):
        sandboxes.release_sandbox(shared)


@pytest.mark.docker
def test_closing_a_docker_env_releases_its_sockets():
    """Each CodeShift env on docker left two connections to the engine open after close()."""
    import gc

    from sao_online.environments.sandbox.docker_backend import docker_problem

    if problem := docker_problem():
        pytest.skip(f"docker sandbox: {problem}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        env = CodeShiftEnv(sandbox="docker", max_turns=1)
        _, info = env.reset(seed=0)
        assert env.step(program_for(env._task, "v1", "inclusive"))[4]["sandbox"] == "docker"
        env.close()
        del env
        gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []
