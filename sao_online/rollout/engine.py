"""Batched multi-turn rollouts with a KV cache and continuous batching.

``RolloutEngine`` runs up to ``num_slots`` episodes at once on one model. Every decoding step
feeds one token per decoding slot through the model in a single batch, reusing each slot's keys
and values from a ``SlotKVCache`` (the model side lives in ``SlotDecoder``). Slots that must
first read several tokens (a new prompt, or an environment observation after an action) are fed
together in one left-padded chunk in the same step. When an episode ends its slot takes the next
episode from the source right away, so a long episode never holds the others back.

On CPU, give each rollout process one torch thread (``torch.set_num_threads(1)``): the tiny
models' ops are too small to split, and on a busy machine a second OpenMP thread waiting for a
core can make them many times slower.

Token layout, logprobs and caps:

- An episode is one token sequence: the chat-template prompt ``[user: first observation]`` with
  the assistant header, then actions and observation segments (see ``ChatLayout``).
- The caps (``max_action_tokens``, ``max_turns``, ``max_episode_tokens``) and what each
  event of a turn does to the episode are ``TurnRules`` (``sao_online.rollout.turns``); a cap
  or the environment's own ``truncated`` ends the episode with ``truncated=True``, what
  truncated it recorded in ``trajectory.info[TRUNCATED_BY_KEY]``.
- Every episode in flight needs its own env instance (the engine steps them independently).
- Environment calls (``sao_online.rollout.env_calls``) run inline in the decoding loop by
  default (``env_workers=0``: deterministic for a seed, but a slow ``env.step`` stalls every
  slot), else each in a thread of its own while the other slots keep decoding. A step past
  ``env_step_timeout`` ends its episode, truncated by ``"step_timeout"``
  (``on_env_step_timeout="end"``), or stops the run with an ``EnvError`` (``"stop"``); so does
  an environment that raises or breaks the ``reset`` / ``step`` contract, naming the field.
- Behavior logprobs are under ``softmax(logits / temperature)`` without top-p truncation (see
  ``sao_online.models.sampling``); the learner must evaluate with the same temperature.
- ``interrupt(tag)``, called from the request source, stops a running episode at once (its
  environment call, if any, finishes unheard) and returns what it did so far as a trajectory
  truncated by ``"interrupted"``, so a caller can account for the tokens it spent.
- ``run`` drives the loop itself; a caller that keeps its own time (the simulated runtime, on a
  virtual clock) turns it one round at a time with ``reset_slots`` and ``advance``, gives the
  engine its own ``env_calls`` (when environment answers arrive) and ``clock`` (the episode
  timestamps), and reads ``pending_work`` before each decoding step to price it.
- Each action token is stamped with ``engine.policy_version`` read when it was sampled. The
  ``on_decode_step`` hook runs between decoding steps; it may load new weights into the model
  in place and bump ``policy_version``. Keys and values already cached stay those of the weights
  that computed them (the usual in-flight weight update).

Example:
    >>> engine = RolloutEngine(model, tokenizer, num_slots=32, max_turns=4,
    ...                        max_action_tokens=64, max_episode_tokens=512, seed=0)
    >>> requests = iter([EpisodeRequest(env, seed=k, prompt_id=k) for k in range(100)])
    >>> for trajectory in engine.run(lambda: next(requests, None)):
    ...     print(trajectory.total_reward, trajectory.num_turns)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from sao_online.config import ActionCapPolicy
from sao_online.learning.types import Trajectory
from sao_online.models.chat import ChatLayout
from sao_online.models.sampling import sample_tokens, validate_sampling
from sao_online.models.slot_decoder import SlotDecoder, text_config
from sao_online.rollout.env_calls import EnvCalls
from sao_online.rollout.env_results import env_label
from sao_online.rollout.episode import INTERRUPTED, EpisodeRequest, EpisodeState, RolloutStats
from sao_online.rollout.prompt_sharing import step_sharing_prompts
from sao_online.rollout.turns import ActionEnd, EpisodeEnd, TurnRules, default_stop_token_ids

# How long the loop waits for an environment call when idle slots might get new requests.
_ENV_POLL_SECONDS = 0.01


class EnvCallStrategy(Protocol):
    """How the engine runs its environment calls: ``EnvCalls`` (inline or on threads, with
    deadlines), or a simulation's calls answered on its own clock. See ``EnvCalls`` for what
    each method promises."""

    def call(
        self,
        slot: int,
        fn: Callable[[], Any],
        on_done: Callable[[Any, float, list], None],
        finished: list,
        what: str,
        on_timeout: Callable[[float, list], None] | None = None,
    ) -> None: ...

    def apply_ready(self, finished: list) -> None: ...

    def wait(self, timeout: float | None) -> None: ...

    def forget(self, slot: int) -> None: ...

    def abandon(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class EngineRound:
    """What one round of the engine's loop (``RolloutEngine.advance``) did.

    Attributes:
        finished: trajectories completed in this round, in completion order.
        running: whether any episode was in flight after the slots took new requests and the
            returned environment calls were applied (False: the engine is idle).
        decoded: whether a decoding step ran (False with ``running``: every running episode
            waits for its environment).
        idle_slots: whether a slot is free (it asked the source and got nothing).
    """

    finished: list[Trajectory] = field(default_factory=list)
    running: bool = False
    decoded: bool = False
    idle_slots: bool = False


@dataclass(frozen=True)
class PendingWork:
    """What the next decoding step will compute (read before it, e.g. to price it).

    Attributes:
        slots: slots that feed tokens in the step.
        fed_tokens: tokens fed in all (one per decoding slot, a whole segment per prefilling
            one).
        cached_tokens: keys and values already cached for those slots (what attention reads).
    """

    slots: int
    fed_tokens: int
    cached_tokens: int


class RolloutEngine:
    """Samples many multi-turn episodes at once with a KV cache and continuous batching.

    Args:
        model: a Hugging Face causal LM with full (non-sliding) attention and the ``sdpa`` or
            ``eager`` attention implementation.
        tokenizer: its tokenizer, with a chat template.
        num_slots: episodes in flight at once (the decoding batch size).
        temperature: sampling temperature; 0 decodes greedily.
        top_p: nucleus mass kept when sampling (1 keeps all).
        max_turns: actions per episode before it is truncated.
        max_action_tokens: tokens per action before the action is cut.
        max_episode_tokens: tokens per episode (prompt, actions, observations).
        seed: seed of the sampling stream; the same seed and the same requests give the same
            episodes.
        device: where the model runs; the model's own device when None.
        on_action_cap: ``"truncate"`` ends the episode when an action reaches
            ``max_action_tokens``; ``"submit"`` hands the cut action to the environment.
        system_prompt: an optional system message rendered before the first observation.
        observation_role: chat role of the observations after the first: ``"user"`` or
            ``"tool"`` (see ``ChatLayout``).
        stop_token_ids: tokens that end an action; when None, the tokenizer's eos plus the
            model's ``generation_config.eos_token_id`` (instruct models often end a turn with
            a token other than the tokenizer's eos, e.g. Llama 3's ``<|eot_id|>``).
        fast_attention: run attention with plain matmuls during the engine's own forwards (2-3x
            faster than SDPA on CPU); False keeps the model's own (see ``SlotDecoder``).
        lean_forward: decode with ``LeanLlamaForward``: None where the architecture is
            supported and ``fast_attention`` is on, True requires it (see ``SlotDecoder``).
        banded_cache: the key/value cache in bands of similar length (``BandedKVCache``);
            None: whenever the lean forward runs.
        env_workers: threads that run ``env.reset`` / ``env.step`` concurrently while the other
            slots keep decoding (worth it when environments are slow, e.g. ``LatencyWrapper``);
            0 calls them inline in the decoding loop (deterministic for a seed).
        share_prompt_prefill: when several slots start the same prompt in one step (the
            members of a group), run it through the model once and copy its keys and values to
            the others. Tokens are drawn in the same order from the same logits, so episodes
            are those of separate prefills up to float rounding.
        env_step_timeout: seconds an ``env.reset`` or ``env.step`` may take (None: no limit;
            then inline calls run in the decoding thread itself).
        on_env_step_timeout: ``"stop"`` raises ``EnvError`` for a step past the timeout;
            ``"end"`` ends its episode (truncated, behaviour ``"step_timeout"``). A reset past
            it always raises.
        env_calls: runs the environment calls; None builds ``EnvCalls(env_workers,
            env_step_timeout)`` (the simulated runtime passes calls answered on its clock).
        clock: the seconds stamped on episodes (``started_at``, ``finished_at``).

    Raises:
        ValueError: an argument is out of range, or the model cannot be served (attention
            implementation, sliding-window layers, episodes longer than its positions).

    Attributes:
        policy_version: stamped on every action token sampled from now on.
        on_decode_step: None or ``hook(engine)``, called before every decoding step.
        round_timings: None, or a list to which every round that decodes appends ``(slots,
            fed tokens, cached tokens, seconds)``: what its step computed (``PendingWork``)
            and how long the whole round took (taking requests, applying env answers,
            decoding, bookkeeping; not the waits between rounds). The simulated runtime's cost
            model is fitted to these.
        stats: ``RolloutStats`` counters since the engine was built.
        decoder: the ``SlotDecoder`` (its ``decode_forwards`` / ``prefill_forwards`` count
            model calls, ``cache.resizes`` the cache resizes).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        num_slots: int = 32,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_turns: int = 8,
        max_action_tokens: int = 256,
        max_episode_tokens: int = 1024,
        seed: int = 0,
        device: str | torch.device | None = None,
        on_action_cap: ActionCapPolicy = "truncate",
        system_prompt: str | None = None,
        observation_role: str = "user",
        stop_token_ids: list[int] | None = None,
        fast_attention: bool = True,
        lean_forward: bool | None = None,
        banded_cache: bool | None = None,
        env_workers: int = 0,
        share_prompt_prefill: bool = True,
        env_step_timeout: float | None = None,
        on_env_step_timeout: str = "stop",
        env_calls: EnvCallStrategy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        validate_sampling(temperature, top_p)
        if not isinstance(num_slots, int) or num_slots < 1:
            raise ValueError(f"RolloutEngine: num_slots must be an int >= 1, got {num_slots!r}")
        if on_env_step_timeout not in ("stop", "end"):
            raise ValueError(
                "RolloutEngine: on_env_step_timeout must be 'stop' or 'end', got "
                f"{on_env_step_timeout!r}"
            )
        if tokenizer.pad_token_id is None and tokenizer.eos_token_id is None:
            raise ValueError("RolloutEngine: the tokenizer has neither a pad nor an eos token")
        self.layout = ChatLayout(
            tokenizer, system_prompt=system_prompt, observation_role=observation_role
        )
        self.turns = TurnRules(
            tokenizer,
            self.layout,
            max_turns=max_turns,
            max_action_tokens=max_action_tokens,
            max_episode_tokens=max_episode_tokens,
            on_action_cap=on_action_cap,
            stop_token_ids=(
                default_stop_token_ids(tokenizer, model)
                if stop_token_ids is None
                else stop_token_ids
            ),
        )
        longest = getattr(text_config(model), "max_position_embeddings", None)
        if isinstance(longest, int) and max_episode_tokens > longest:
            raise ValueError(
                f"RolloutEngine: max_episode_tokens {max_episode_tokens} exceeds the model's "
                f"max_position_embeddings {longest}"
            )
        self.device = (
            torch.device(device) if device is not None else next(model.parameters()).device
        )
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        self.num_slots = num_slots
        self.temperature = temperature
        self.top_p = top_p
        self.stop_token_ids = self.turns.stop_token_ids
        self.pad_token_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        self.policy_version = 0
        self.on_decode_step: Callable[[RolloutEngine], None] | None = None
        self.round_timings: list[tuple[int, int, int, float]] | None = None
        self.stats = RolloutStats()
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.env_workers = env_workers
        self.share_prompt_prefill = share_prompt_prefill
        self.on_env_step_timeout = on_env_step_timeout
        self.clock = clock
        try:
            self._env = (
                EnvCalls(env_workers, timeout=env_step_timeout) if env_calls is None else env_calls
            )
            self.decoder = SlotDecoder(
                self.model,
                num_slots,
                pad_token_id=self.pad_token_id,
                device=self.device,
                fast_attention=fast_attention,
                lean_forward=lean_forward,
                banded_cache=banded_cache,
            )
        except ValueError as error:
            raise ValueError(f"RolloutEngine: {error}") from error
        self.reset_slots()

    def close(self) -> None:
        """Stops the environment threads (calls already running finish on their own)."""
        self._env.close()

    def __enter__(self) -> RolloutEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def reset_slots(self) -> None:
        """Empties every slot (episodes in flight are dropped); ``run`` starts with this."""
        self._env.abandon()  # calls of an abandoned run
        self.decoder.reset()
        self._episodes: list[EpisodeState | None] = [None] * self.num_slots
        # Tokens each slot must feed before its next sample: the last sampled token, or a prompt
        # or the last action's stop token followed by an observation segment.
        self._pending: list[list[int]] = [[] for _ in range(self.num_slots)]

    # ----------------------------------------------------------------------------- main loop

    def run(
        self, source: Callable[[], EpisodeRequest | None], max_episodes: int | None = None
    ) -> Iterator[Trajectory]:
        """Runs episodes from ``source`` and yields each trajectory as soon as it completes.

        Idle slots ask ``source()`` for a request before every decoding step; ``None`` means
        nothing may start right now (the caller's admission control) and is asked again at the
        next step. The run returns when every slot is idle and ``source()`` gives None, or when
        ``max_episodes`` episodes were started and all have finished. Abandoning the iterator
        drops the episodes in flight; the next ``run`` starts with empty slots. With
        ``env_workers`` a slot waiting for its environment counts as busy; when every busy slot
        waits, the loop sleeps until an environment call returns.

        Args:
            source: called with no arguments, returns an ``EpisodeRequest`` or None.
            max_episodes: stop admitting after this many episodes (None: until source is dry).

        Yields:
            ``Trajectory`` records in completion order.
        """
        if max_episodes is not None and max_episodes < 0:
            raise ValueError(f"run: max_episodes must be >= 0, got {max_episodes}")
        self.reset_slots()
        if max_episodes is not None:
            source = _at_most(source, max_episodes)
        while True:
            turn = self.advance(source)
            if not turn.running:
                yield from turn.finished
                return
            if not turn.decoded and not turn.finished:
                # Every running episode waits for its environment: nothing to decode.
                self._env.wait(_ENV_POLL_SECONDS if turn.idle_slots else None)
            yield from turn.finished

    def advance(self, source: Callable[[], EpisodeRequest | None]) -> EngineRound:
        """One round of the loop: idle slots take requests from ``source`` (until it gives
        None), returned environment calls are applied, and one decoding step runs for every slot
        that has tokens to feed (``on_decode_step`` first).

        ``run`` is this in a loop, after ``reset_slots``, waiting for the environments when no
        slot can decode; a caller that keeps its own time calls it directly.
        """
        began = time.perf_counter()
        turn = EngineRound()
        for slot in range(self.num_slots):
            if self._episodes[slot] is not None:
                continue
            request = source()
            if request is None:
                turn.idle_slots = True
                break
            if any(
                episode is not None and episode.request.env is request.env
                for episode in self._episodes
            ):
                raise ValueError(
                    "run: the request's env is already running an episode in another slot; "
                    "give every concurrent episode its own env instance"
                )
            self._start_episode(slot, request, turn.finished)
        self._env.apply_ready(turn.finished)
        turn.running = any(episode is not None for episode in self._episodes)
        if turn.running and any(self._pending):
            if self.on_decode_step is not None:
                self.on_decode_step(self)
            work = self.pending_work() if self.round_timings is not None else None
            self._decode_step(turn.finished)
            turn.decoded = True
            if work is not None:
                seconds = time.perf_counter() - began
                self.round_timings.append(
                    (work.slots, work.fed_tokens, work.cached_tokens, seconds)
                )
        return turn

    def pending_work(self) -> PendingWork:
        """What the next decoding step computes (see ``PendingWork``)."""
        fed = [slot for slot, tokens in enumerate(self._pending) if tokens]
        return PendingWork(
            slots=len(fed),
            fed_tokens=sum(len(self._pending[slot]) for slot in fed),
            cached_tokens=sum(self.decoder.lengths[slot] for slot in fed),
        )

    def _start_episode(
        self, slot: int, request: EpisodeRequest, finished: list[Trajectory]
    ) -> None:
        self.stats.episodes_started += 1
        self._episodes[slot] = EpisodeState(request=request)
        self._pending[slot] = []
        self.decoder.restart(slot)
        reset = functools.partial(request.env.reset, seed=request.seed, options=request.options)
        what = f"{env_label(request.env)}: reset (seed {request.seed})"
        self._env.call(slot, reset, functools.partial(self._apply_reset, slot), finished, what)

    def _apply_reset(
        self,
        slot: int,
        result: tuple[Any, dict[str, Any]],
        seconds: float,
        finished: list[Trajectory],
    ) -> None:
        """Lays out the first observation as the prompt of the slot's new episode."""
        self.stats.env_seconds += seconds
        outcome = self.turns.open(self._episodes[slot], result, seconds)
        self._episodes[slot].started_at = self.clock()
        self._feed_or_finish(slot, outcome, finished)

    def _feed_or_finish(
        self, slot: int, outcome: list[int] | EpisodeEnd, finished: list[Trajectory]
    ) -> None:
        """Queues the tokens a turn event left the slot to feed, or finishes its episode."""
        if isinstance(outcome, EpisodeEnd):
            self._finish(slot, finished, outcome)
        else:
            self._pending[slot] = outcome

    def interrupt(self, tag: Any) -> Trajectory | None:
        """Stops the running episode started with ``tag`` and frees its slot.

        Call it from the request source (``run`` calls the source between decoding steps). The
        episode's environment call, if one is running, finishes unheard.

        Returns:
            What the episode did so far (tokens, logprobs, versions, env seconds), truncated by
            ``"interrupted"``; None when no running episode has that tag.

        Raises:
            ValueError: ``tag`` is None (untagged episodes cannot be told apart).
        """
        if tag is None:
            raise ValueError("interrupt: episodes are found by their tag; got None")
        for slot, episode in enumerate(self._episodes):
            if episode is not None and episode.request.tag == tag:
                self._env.forget(slot)
                trajectory = episode.to_trajectory(
                    terminated=False, truncated_by=INTERRUPTED, finished_at=self.clock()
                )
                self.stats.episodes_interrupted += 1
                self._free(slot)
                return trajectory
        return None

    # ---------------------------------------------------------------------------- decoding

    def _decode_step(self, finished: list[Trajectory]) -> None:
        """Samples one token for every active slot and records it (environments step here)."""
        began = time.perf_counter()
        sampled_slots, tokens, logprobs = self._sample_next_tokens()
        self.stats.decode_steps += 1
        self.stats.sampled_tokens += len(tokens)
        self.stats.model_seconds += time.perf_counter() - began
        version = self.policy_version
        # Outside inference mode: the trajectories built here must be usable with autograd.
        for slot, token, logprob in zip(sampled_slots, tokens, logprobs):
            self._record(slot, token, logprob, version, finished)

    @torch.inference_mode()
    def _sample_next_tokens(self) -> tuple[list[int], list[int], list[float]]:
        """Runs the model over every active slot; returns (slots, tokens, logprobs) in order."""
        if self.share_prompt_prefill:
            sampled_slots, logits = step_sharing_prompts(self.decoder, self._pending)
        else:
            sampled_slots, logits = self.decoder.step(self._pending)
        tokens, logprobs = sample_tokens(
            logits, temperature=self.temperature, top_p=self.top_p, generator=self.generator
        )
        return sampled_slots, tokens.tolist(), logprobs.tolist()

    # ------------------------------------------------------------------------ bookkeeping

    def _record(
        self, slot: int, token: int, logprob: float, version: int, finished: list[Trajectory]
    ) -> None:
        episode = self._episodes[slot]
        episode.append_action_token(token, logprob, version)
        self._pending[slot] = [token]
        outcome = self.turns.after_token(episode, token)
        if isinstance(outcome, EpisodeEnd):
            self._finish(slot, finished, outcome)
        elif isinstance(outcome, ActionEnd):
            self._end_action(slot, outcome.stop_token, finished)

    def _end_action(self, slot: int, stop_token: int | None, finished: list[Trajectory]) -> None:
        """Hands the finished action to the environment (inline or to the pool)."""
        episode = self._episodes[slot]
        action_text = self.turns.action_text(episode, stop_token)
        step = functools.partial(episode.request.env.step, action_text)
        # The slot waits for the answer; its last token is fed with the observation.
        self._pending[slot] = []
        what = (
            f"{env_label(episode.request.env)}: step {episode.turn + 1} of the episode with "
            f"seed {episode.request.seed}"
        )
        on_timeout = (
            functools.partial(self._end_timed_out_step, slot)
            if self.on_env_step_timeout == "end"
            else None
        )
        self._env.call(
            slot,
            step,
            functools.partial(self._apply_step, slot, action_text, stop_token),
            finished,
            what,
            on_timeout,
        )

    def _end_timed_out_step(self, slot: int, seconds: float, finished: list[Trajectory]) -> None:
        """Ends the episode whose env step ran past the timeout (its reward stays what the
        earlier steps earned)."""
        self.stats.env_seconds += seconds
        self._finish(slot, finished, self.turns.time_out(self._episodes[slot], seconds))

    def _apply_step(
        self,
        slot: int,
        action_text: str,
        stop_token: int | None,
        result: tuple[Any, float, bool, bool, dict[str, Any]],
        seconds: float,
        finished: list[Trajectory],
    ) -> None:
        """Records the environment's answer to an action and lays out the next observation."""
        self.stats.env_seconds += seconds
        outcome = self.turns.answer(self._episodes[slot], action_text, stop_token, result, seconds)
        self._feed_or_finish(slot, outcome, finished)

    def _finish(self, slot: int, finished: list[Trajectory], end: EpisodeEnd) -> None:
        """Builds the slot's trajectory, appends it to ``finished`` and frees the slot."""
        episode = self._episodes[slot]
        finished.append(
            episode.to_trajectory(
                terminated=end.terminated, truncated_by=end.truncated_by, finished_at=self.clock()
            )
        )
        self.stats.episodes_finished += 1
        self._free(slot)

    def _free(self, slot: int) -> None:
        self._episodes[slot] = None
        self._pending[slot] = []
        self.decoder.restart(slot)


def _at_most(
    source: Callable[[], EpisodeRequest | None], count: int
) -> Callable[[], EpisodeRequest | None]:
    """``source`` that gives None once it has given ``count`` requests (and is not asked again)."""
    given = 0

    def capped() -> EpisodeRequest | None:
        nonlocal given
        if given >= count:
            return None
        request = source()
        if request is not None:
            given += 1
        return request

    return capped
