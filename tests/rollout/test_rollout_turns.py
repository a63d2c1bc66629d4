"""TurnRules without a model: what a sampled token, an env answer and a timeout do to an episode.

The engine's end-to-end behaviour (caps, truncation reasons, layouts) is in test_rollout.py;
these pin the rules themselves on a token-level fake, with hand-counted lengths.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sao_online.rollout.episode import EpisodeRequest, EpisodeState
from sao_online.rollout.turns import ActionEnd, EpisodeEnd, TurnRules, default_stop_token_ids

STOP = 99


class _Tokenizer:
    """Token k decodes to the letter k (a=0); stop tokens are special."""

    eos_token_id = STOP

    def decode(self, tokens, skip_special_tokens=False):
        return "".join(
            "" if t == STOP and skip_special_tokens else chr(97 + t % 26) for t in tokens
        )


class _Layout:
    """A prompt of three tokens; an observation segment of ``len(text)`` tokens."""

    def prompt_tokens(self, text):
        return [1, 2, 3]

    def observation_tokens(self, messages, text, stop_text):
        return [7] * len(text)

    def observation_message(self, text):
        return {"role": "user", "content": text}


def _rules(**caps) -> TurnRules:
    settings = dict(
        max_turns=2,
        max_action_tokens=3,
        max_episode_tokens=12,
        on_action_cap="truncate",
        stop_token_ids=[STOP],
    )
    settings.update(caps)
    return TurnRules(_Tokenizer(), _Layout(), **settings)


def _opened(rules: TurnRules) -> EpisodeState:
    episode = EpisodeState(request=EpisodeRequest(env=SimpleNamespace(spec=None), seed=0))
    assert rules.open(episode, ("task", {"phase": 1, "theta": {"x": 2}}), 0.5) == [1, 2, 3]
    assert (episode.phase, episode.theta, episode.action_start) == (1, {"x": 2}, 3)
    return episode


def _sample(rules: TurnRules, episode: EpisodeState, token: int):
    episode.append_action_token(token, -0.1, 0)
    return rules.after_token(episode, token)


def test_a_stop_token_ends_the_action_and_is_left_out_of_its_text():
    rules = _rules()
    episode = _opened(rules)
    assert _sample(rules, episode, 0) is None
    assert _sample(rules, episode, STOP) == ActionEnd(STOP)
    assert rules.action_text(episode, STOP) == "a"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("truncate", EpisodeEnd(truncated_by="action_tokens")), ("submit", ActionEnd(None))],
)
def test_the_action_cap_truncates_or_submits_the_cut_action(policy, expected):
    rules = _rules(on_action_cap=policy)
    episode = _opened(rules)
    assert [_sample(rules, episode, token) for token in (0, 1)] == [None, None]
    assert _sample(rules, episode, 2) == expected
    assert rules.action_text(episode, None) == "abc"


def test_an_answer_lays_out_the_last_action_token_then_the_observation():
    rules = _rules()
    episode = _opened(rules)
    _sample(rules, episode, 0)
    _sample(rules, episode, STOP)
    fed = rules.answer(episode, "a", STOP, ("xy", 1.5, False, False, {"behavior": "b"}), 0.25)
    assert fed == [STOP, 7, 7]
    # prompt 3 + action 2 + segment 2; the next action starts after the segment
    assert (len(episode.tokens), episode.action_start, episode.turn) == (7, 7, 1)
    assert episode.rewards[4] == 1.5 and episode.env_seconds == 0.75


def test_an_answer_ends_the_episode_at_the_env_the_turn_cap_or_the_token_cap():
    def answered(rules, observation="xy", terminated=False, truncated=False):
        episode = _opened(rules)
        _sample(rules, episode, STOP)
        return rules.answer(episode, "", STOP, (observation, 0.0, terminated, truncated, {}), 0.0)

    assert answered(_rules(), terminated=True) == EpisodeEnd(terminated=True)
    assert answered(_rules(), truncated=True) == EpisodeEnd(truncated_by="env")
    assert answered(_rules(max_turns=1)) == EpisodeEnd(truncated_by="turns")
    # 4 tokens so far + an 8-token segment reach the 12-token cap: no room for an action
    assert answered(_rules(), observation="x" * 8) == EpisodeEnd(truncated_by="episode_tokens")
    assert answered(_rules(), observation="x" * 7) == [STOP, *[7] * 7]


def test_a_prompt_that_fills_the_episode_ends_it_before_any_action():
    rules = _rules(max_episode_tokens=3)
    episode = EpisodeState(request=EpisodeRequest(env=SimpleNamespace(spec=None)))
    assert rules.open(episode, ("task", {}), 0.0) == EpisodeEnd(truncated_by="episode_tokens")


def test_a_timed_out_step_ends_the_episode_with_its_label():
    rules = _rules()
    episode = _opened(rules)
    assert rules.time_out(episode, 2.0) == EpisodeEnd(truncated_by="step_timeout")
    assert episode.last_info["behavior"] == "step_timeout" and episode.turn == 1


def test_caps_are_checked_and_stop_tokens_default_to_every_eos():
    with pytest.raises(ValueError, match="max_turns must be an int >= 1"):
        _rules(max_turns=0)
    with pytest.raises(ValueError, match="on_action_cap must be one of"):
        _rules(on_action_cap="cut")
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[5, 6]))
    assert default_stop_token_ids(_Tokenizer(), model) == [STOP, 5, 6]
    assert default_stop_token_ids(_Tokenizer(), SimpleNamespace()) == [STOP]
