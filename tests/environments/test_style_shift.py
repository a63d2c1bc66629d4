"""StyleShift-v0: style detection, the judge, the reward table, the oracle and demonstrations."""

from __future__ import annotations

import itertools

import pytest

from sao_online.environments import StyleShiftEnv, detect_style, rule_judge
from sao_online.environments.style_shift import (
    POOLS,
    STYLES,
    TEMPLATES,
    TOPICS,
    line_problem,
    mentions_topic,
)

ALL_REGIMES = [
    {"preferred": preferred, "pool": pool} for preferred, pool in itertools.product(STYLES, POOLS)
]


@pytest.mark.parametrize(
    ("text", "style"),
    [
        ("Furthermore, rain falls.", "academic"),
        ("NYA~ cats!", "cute"),
        ("Kukuku, the moon.", "chuunibyou"),
        ("The dark flame of tea", "chuunibyou"),
        ("Hath the river run?", "classical"),
        ("Rain on the roof.", "none"),
        ("Though thoughtful, the theme", "none"),  # "thou"/"thee" only inside longer words
        ("uwu thou art rain", "mixed"),
        ("", "none"),
    ],
)
def test_detect_style(text, style):
    assert detect_style(text) == style


def test_topic_must_be_a_whole_word():
    assert mentions_topic("I like Cats a lot", "cats")
    assert not mentions_topic("scatsong", "cats")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Nya~ rain!", None),
        ("  Nya~ rain!\n", None),  # surrounding whitespace is not part of the line
        ("Nya~ r\u00e4in rain", "not printable"),
        ("Nya~ rain\nmore rain", "more than one line"),
        ("uwu rain", None),  # exactly 8 bytes passes
        ("uw rain", "length 7"),
        ("Nya~ rain " + "x" * 51, "length 61"),
        ("Nya~ snow!", "topic 'rain'"),
        ("Rain falls down.", "style none"),
        ("Thou rain, uwu", "style mixed"),
        ("Thou art rain.", "style classical not offered"),
    ],
)
def test_quality_bar(text, problem):
    found = line_problem(text, "rain", POOLS["academic_cute_chuunibyou"])
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_rule_judge_scores_quality_and_style_separately():
    pool = POOLS["academic_cute_chuunibyou"]
    assert rule_judge("Nya~ rain!", "rain", pool, "cute") == (1.0, 1.0)
    assert rule_judge("Nya~ rain!", "rain", pool, "academic") == (1.0, 0.0)
    assert rule_judge("Nya~ snow!", "rain", pool, "cute") == (0.0, 1.0)


def test_prompt_names_topic_and_offered_styles_but_not_the_preference():
    env = StyleShiftEnv()
    prompt, info = env.reset(
        seed=3, options={"drift": {"preferred": "classical", "pool": "classical_cute_chuunibyou"}}
    )
    assert (
        prompt
        == f"Write one short line about {info['topic']}. Styles: classical, cute, chuunibyou."
    )
    assert info["pool"] == ("classical", "cute", "chuunibyou")
    assert info["topic"] in TOPICS


def test_topics_come_from_np_random():
    env = StyleShiftEnv()
    topics = [env.reset(seed=seed)[1]["topic"] for seed in range(60)]
    assert len(set(topics)) >= 15
    assert [env.reset(seed=seed)[1]["topic"] for seed in range(60)] == topics


@pytest.mark.parametrize("theta", ALL_REGIMES, ids=lambda t: f"{t['preferred']}-{t['pool']}")
def test_oracle_reaches_its_ceiling_in_every_regime(theta):
    env = StyleShiftEnv()
    ceiling = 1.0 if theta["preferred"] in POOLS[theta["pool"]] else 0.0
    assert env.oracle_reward(theta) == ceiling
    for seed in range(20):
        observation, info = env.reset(seed=seed, options={"drift": theta})
        action = env.oracle_action(observation, info)
        _, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated) == (ceiling, True, False)
        assert info["behavior"] == theta["preferred"]


def test_demonstrations_are_competent_but_only_the_preferred_style_is_rewarded():
    env = StyleShiftEnv()
    theta = {"preferred": "chuunibyou", "pool": "academic_cute_chuunibyou"}
    for seed in range(10):
        for style in POOLS[theta["pool"]]:
            observation, info = env.reset(seed=seed, options={"drift": theta})
            _, reward, _, _, info = env.step(env.demonstration(observation, info, style))
            assert info["quality"] == 1.0
            assert info["behavior"] == style
            assert reward == float(style == "chuunibyou")


def test_every_template_is_short_and_unambiguous_for_every_topic():
    for style, templates in TEMPLATES.items():
        for template, topic in itertools.product(templates, TOPICS):
            line = template.format(topic=topic)
            assert 20 <= len(line) <= 45, line
            assert detect_style(line) == style, line
            assert line_problem(line, topic, STYLES) is None, line


def test_demonstration_rejects_unknown_style():
    env = StyleShiftEnv()
    observation, info = env.reset(seed=0)
    with pytest.raises(ValueError, match="'poetic'"):
        env.demonstration(observation, info, "poetic")


def test_pluggable_judge_receives_the_episode_and_sets_the_reward():
    calls = []

    def half_judge(text, topic, pool, preferred):
        calls.append((text, topic, pool, preferred))
        return 1, 0.5

    env = StyleShiftEnv(judge=half_judge)
    _, info = env.reset(seed=1, options={"drift": {"preferred": "cute"}})
    _, reward, _, _, step_info = env.step("anything at all")
    assert calls == [("anything at all", info["topic"], info["pool"], "cute")]
    assert reward == 0.5
    assert step_info["behavior"] == "none"  # the label still comes from the rules


@pytest.mark.parametrize("bad_return", [(1.0,), (1.0, 2.0), ("yes", 1.0), None])
def test_a_judge_returning_nonsense_is_named(bad_return):
    env = StyleShiftEnv(judge=lambda *args: bad_return)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="judge returned"):
        env.step("Nya~ rain!")


def test_non_callable_judge_is_rejected():
    with pytest.raises(ValueError, match="judge"):
        StyleShiftEnv(judge="gpt")


def test_terminal_observation_says_what_was_wrong():
    env = StyleShiftEnv()
    _, info = env.reset(seed=0)
    observation, reward, *_ = env.step("")
    assert reward == 0.0
    assert observation == "style: none; quality: 0 (length 0 outside 8..60 bytes)"
