"""What each event of an episode's turns does to it: a sampled token, the environment's first
observation, its answer to an action, a step past its deadline.

``TurnRules`` is bookkeeping on an ``EpisodeState`` against the episode's caps and chat layout,
with no model, no slots and no threads; ``RolloutEngine`` applies it slot by slot and acts on
what it returns: the tokens the slot feeds next, an ``ActionEnd`` (hand the action to the
environment) or an ``EpisodeEnd``.

The caps:

- An action ends at a stop token (it is an action token with its own logprob) or when it
  reaches ``max_action_tokens``; then ``on_action_cap="truncate"`` ends the episode and
  ``"submit"`` hands the cut action to the environment.
- ``max_turns`` actions without the environment ending the episode truncate it.
- ``max_episode_tokens``: the episode is truncated when it reaches the cap mid-action, or when
  the next observation segment (plus one action token) would not fit.
- An environment's own ``truncated`` truncates the episode too. What truncated an episode is
  recorded in ``trajectory.info[TRUNCATED_BY_KEY]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao_online.config import ActionCapPolicy
from sao_online.learning.types import FINAL_OBSERVATION_CHARS
from sao_online.models.chat import ChatLayout
from sao_online.rollout.env_results import (
    STEP_TIMEOUT,
    checked_reset,
    checked_step,
    env_label,
    reported_latency,
)
from sao_online.rollout.episode import EpisodeState, prompt_info


@dataclass(frozen=True)
class EpisodeEnd:
    """The episode is over: the environment ended it (``terminated``), or ``truncated_by``
    names the cap, the environment or the step timeout that cut it."""

    terminated: bool = False
    truncated_by: str | None = None


@dataclass(frozen=True)
class ActionEnd:
    """The action is complete: hand it to the environment. ``stop_token`` ended it (None: it
    reached ``max_action_tokens`` and is submitted as cut)."""

    stop_token: int | None


class TurnRules:
    """An episode's caps and chat layout, applied to its ``EpisodeState`` event by event.

    Args:
        tokenizer: decodes actions into the text the environment gets.
        layout: the chat layout of prompts and observation segments.
        max_turns: actions per episode before it is truncated.
        max_action_tokens: tokens per action before the action is cut.
        max_episode_tokens: tokens per episode (prompt, actions, observations).
        on_action_cap: ``"truncate"`` ends the episode when an action reaches
            ``max_action_tokens``; ``"submit"`` hands the cut action to the environment.
        stop_token_ids: tokens that end an action.

    Raises:
        ValueError: a cap is out of range.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        layout: ChatLayout,
        *,
        max_turns: int,
        max_action_tokens: int,
        max_episode_tokens: int,
        on_action_cap: ActionCapPolicy,
        stop_token_ids: list[int],
    ) -> None:
        for name, value, lowest in (
            ("max_turns", max_turns, 1),
            ("max_action_tokens", max_action_tokens, 1),
            ("max_episode_tokens", max_episode_tokens, 2),
        ):
            if not isinstance(value, int) or value < lowest:
                raise ValueError(f"RolloutEngine: {name} must be an int >= {lowest}, got {value!r}")
        if on_action_cap not in get_args(ActionCapPolicy):
            raise ValueError(
                f"RolloutEngine: on_action_cap must be one of {get_args(ActionCapPolicy)}, got "
                f"{on_action_cap!r}"
            )
        self.tokenizer = tokenizer
        self.layout = layout
        self.max_turns = max_turns
        self.max_action_tokens = max_action_tokens
        self.max_episode_tokens = max_episode_tokens
        self.on_action_cap = on_action_cap
        self.stop_token_ids = frozenset(int(token) for token in stop_token_ids)

    def open(
        self, episode: EpisodeState, result: tuple[Any, dict[str, Any]], seconds: float
    ) -> list[int] | EpisodeEnd:
        """Lays out the environment's first observation as the episode's prompt.

        Returns:
            The prompt tokens the slot feeds, or the end when not a single action token fits.
        """
        env = episode.request.env
        observation, info = checked_reset(result, f"{env_label(env)}: reset")
        spec = getattr(env, "spec", None)
        episode.env_id = (
            spec.id if spec is not None else type(getattr(env, "unwrapped", env)).__name__
        )
        # An env that does not report its regime (a plain Gymnasium env) ran the requested one.
        requested = episode.request.options or {}
        episode.phase = int(info.get("phase", requested.get("phase", 0)))
        episode.theta = dict(info.get("theta", requested.get("drift", {})))
        episode.env_seconds = seconds
        episode.latency_seconds = reported_latency(info)
        episode.messages = [{"role": "user", "content": str(observation)}]
        episode.last_info = info
        episode.prompt_info = prompt_info(env, info)
        prompt = self.layout.prompt_tokens(str(observation))
        episode.append_context(prompt)
        episode.action_start = len(episode.tokens)
        if len(prompt) >= self.max_episode_tokens:
            return EpisodeEnd(truncated_by="episode_tokens")
        return prompt

    def after_token(self, episode: EpisodeState, token: int) -> ActionEnd | EpisodeEnd | None:
        """What the action token just appended to ``episode`` ends: the action, the episode,
        or nothing (None: keep sampling)."""
        action_length = len(episode.tokens) - episode.action_start
        if token in self.stop_token_ids:
            return ActionEnd(token)
        if action_length >= self.max_action_tokens:
            if self.on_action_cap == "truncate":
                return EpisodeEnd(truncated_by="action_tokens")
            return ActionEnd(None)
        if len(episode.tokens) >= self.max_episode_tokens:
            return EpisodeEnd(truncated_by="episode_tokens")
        return None

    def action_text(self, episode: EpisodeState, stop_token: int | None) -> str:
        """The episode's current action as the environment gets it (without its stop token)."""
        action_tokens = episode.tokens[episode.action_start :]
        if stop_token is not None:
            action_tokens = action_tokens[:-1]
        return self.tokenizer.decode(action_tokens, skip_special_tokens=True)

    def answer(
        self,
        episode: EpisodeState,
        action_text: str,
        stop_token: int | None,
        result: tuple[Any, float, bool, bool, dict[str, Any]],
        seconds: float,
    ) -> list[int] | EpisodeEnd:
        """Records the environment's answer to an action and lays out the next observation.

        Returns:
            The tokens the slot feeds next (the action's last token, then the observation
            segment), or how the episode ended.
        """
        observation, reward, terminated, truncated, info = checked_step(
            result, f"{env_label(episode.request.env)}: step {episode.turn + 1}"
        )
        episode.env_seconds += seconds
        episode.latency_seconds += reported_latency(info)
        episode.rewards[-1] += float(reward)
        episode.turn += 1
        episode.last_info = info
        episode.messages.append({"role": "assistant", "content": action_text})
        if terminated or truncated:
            episode.final_observation = str(observation)[:FINAL_OBSERVATION_CHARS]
            return EpisodeEnd(
                terminated=bool(terminated), truncated_by="env" if truncated else None
            )
        if episode.turn >= self.max_turns:
            return EpisodeEnd(truncated_by="turns")
        stop_text = None if stop_token is None else self.tokenizer.decode([stop_token])
        segment = self.layout.observation_tokens(episode.messages, str(observation), stop_text)
        # The segment plus at least one action token must fit.
        if len(episode.tokens) + len(segment) >= self.max_episode_tokens:
            return EpisodeEnd(truncated_by="episode_tokens")
        # The action's last token was sampled but not fed yet: it goes in before the segment.
        last_action_token = episode.tokens[-1]
        episode.append_context(segment)
        episode.messages.append(self.layout.observation_message(str(observation)))
        episode.action_start = len(episode.tokens)
        return [last_action_token, *segment]

    def time_out(self, episode: EpisodeState, seconds: float) -> EpisodeEnd:
        """Ends the episode whose env step ran past the deadline (its reward stays what the
        earlier steps earned)."""
        episode.env_seconds += seconds
        episode.turn += 1
        episode.last_info = {**episode.last_info, "behavior": STEP_TIMEOUT}
        return EpisodeEnd(truncated_by=STEP_TIMEOUT)


def default_stop_token_ids(tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel) -> list[int]:
    """The tokenizer's eos plus the end tokens of the model's generation config (instruct
    models often end a turn with a token other than the tokenizer's eos, e.g. Llama 3's
    ``<|eot_id|>``).

    Raises:
        ValueError: the tokenizer has no eos token.
    """
    if tokenizer.eos_token_id is None:
        raise ValueError("RolloutEngine: the tokenizer has no eos token; pass stop_token_ids")
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    extra = (
        [] if eos is None else [int(t) for t in (eos if isinstance(eos, list | tuple) else [eos])]
    )
    return [tokenizer.eos_token_id, *extra]
