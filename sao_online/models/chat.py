"""Token layout of a multi-turn episode under a tokenizer's chat template.

An episode is ``prompt, action 1, observation 1, action 2, ...`` as one token sequence:

- the prompt is the template rendering of ``[system prompt (optional), user: first
  observation]`` with the generation prompt (the assistant header) at its end; a template with
  a default system message (SmolLM2's, Qwen's) writes it here when none is given;
- an action is the sampled tokens, ending with the end-of-turn token when the model closed it;
- an observation segment is whatever the template adds between the end of that action and the
  start of the next one: the closing of the assistant message (if the action did not already end
  with it), the new message holding the environment's text (role ``user``, or ``tool`` for
  templates that have tool turns), and the next assistant header.

The observation segment is computed by rendering the conversation with and without the new user
message and taking the suffix, so any template that renders conversations append-only works.
Sampled tokens are never re-tokenized: the segment boundaries are found in text with a sentinel
standing in for the last action.
"""

from __future__ import annotations

from typing import Any, get_args

from transformers import PreTrainedTokenizerBase

from sao_online.config import ObservationRole

OBSERVATION_ROLES: tuple[str, ...] = get_args(ObservationRole)
# Stands in for the last action's text so the template's rendering around it can be located.
_ACTION_SENTINEL = "\u2063SAO-ACTION-SENTINEL\u2063"


class ChatLayout:
    """Renders prompts and observation segments as token ids for one tokenizer.

    Args:
        tokenizer: a tokenizer with a ``chat_template``.
        system_prompt: an optional system message put before the first user message.
        observation_role: the role of the messages holding observations after the first (the
            first observation is the task, always a user message): ``"user"`` or ``"tool"``.

    Raises:
        ValueError: the tokenizer has no chat template, or its template does not render
            ``observation_role`` messages.

    Example:
        >>> layout = ChatLayout(tokenizer)
        >>> prompt = layout.prompt_tokens("Write a haiku.")
        >>> history = [{"role": "user", "content": "Write a haiku."},
        ...            {"role": "assistant", "content": "old pond"}]
        >>> segment = layout.observation_tokens(history, "Too short.", action_end="<|im_end|>")
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        system_prompt: str | None = None,
        observation_role: str = "user",
    ) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("ChatLayout: the tokenizer has no chat_template")
        if observation_role not in OBSERVATION_ROLES:
            raise ValueError(
                f"ChatLayout: observation_role must be one of {OBSERVATION_ROLES}, "
                f"got {observation_role!r}"
            )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.observation_role = observation_role
        self._check_observation_role()

    def _check_observation_role(self) -> None:
        """Fails early when the template rejects or silently drops observation messages."""
        probe = "\u2063SAO-OBSERVATION-PROBE\u2063"
        messages = [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "action"},
            {"role": self.observation_role, "content": probe},
        ]
        try:
            rendered = self.render(messages, add_generation_prompt=True)
        except Exception as error:  # jinja raises its own error types (raise_exception, ...)
            raise ValueError(
                f"ChatLayout: the chat template cannot render a {self.observation_role!r} "
                f"message ({error}); use observation_role='user'"
            ) from error
        if probe not in rendered:
            raise ValueError(
                f"ChatLayout: the chat template drops {self.observation_role!r} messages; "
                "use observation_role='user'"
            )

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        """The template's text for ``messages`` (the system prompt prepended when set)."""
        if self.system_prompt is not None:
            messages = [{"role": "system", "content": self.system_prompt}, *messages]
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=add_generation_prompt, tokenize=False
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of template text (its special tokens are already written out in it)."""
        return self.tokenizer.encode(text, add_special_tokens=False)

    def prompt_tokens(self, first_observation: str) -> list[int]:
        """The episode's prompt: ``[user: first_observation]`` plus the generation prompt."""
        return self.encode(self.render([{"role": "user", "content": first_observation}], True))

    def observation_text(
        self, history: list[dict[str, Any]], observation: str, action_end: str | None
    ) -> str:
        """Template text between the end of the last action and the start of the next one.

        Args:
            history: the conversation so far, ending with the assistant message of the last
                action (its content is not used; the sentinel takes its place).
            observation: the environment's answer, rendered as a new ``observation_role``
                message.
            action_end: text of the stop token the last action ended with (it is already in
                the episode, so it is dropped from the segment when the template writes it right
                after the assistant content); None when the action was cut by a length cap.

        Raises:
            ValueError: ``history`` does not end with an assistant message.
        """
        if not history or history[-1].get("role") != "assistant":
            raise ValueError("observation_text: history must end with the assistant's action")
        marked = [*history[:-1], {"role": "assistant", "content": _ACTION_SENTINEL}]
        without = self.render(marked, add_generation_prompt=False)
        with_observation = self.render(
            [*marked, self.observation_message(observation)], add_generation_prompt=True
        )
        if with_observation.startswith(without):
            suffix_start = without.rindex(_ACTION_SENTINEL) + len(_ACTION_SENTINEL)
            segment = without[suffix_start:] + with_observation[len(without) :]
        else:
            # Templates that rewrite earlier turns (e.g. dropping reasoning) are not append-only;
            # the episode keeps the tokens it already has, so take what follows the action.
            segment = with_observation[
                with_observation.rindex(_ACTION_SENTINEL) + len(_ACTION_SENTINEL) :
            ]
        if action_end and segment.startswith(action_end):
            segment = segment[len(action_end) :]
        return segment

    def observation_message(self, observation: str) -> dict[str, str]:
        """The chat message holding an observation after the first."""
        return {"role": self.observation_role, "content": observation}

    def observation_tokens(
        self, history: list[dict[str, Any]], observation: str, action_end: str | None
    ) -> list[int]:
        """Token ids of ``observation_text``."""
        return self.encode(self.observation_text(history, observation, action_end))
