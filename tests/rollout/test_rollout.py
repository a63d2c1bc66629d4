"""The rollout engine: equivalence with an uncached reference, caps, versions, continuous
batching."""

import json
import threading
import time

import gymnasium as gym
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from sao_online.models import ChatLayout, build_tiny_policy, token_logprobs
from sao_online.perf.rollout import run_rollout_benchmark
from sao_online.rollout import TRUNCATED_BY_KEY, EnvError, EpisodeRequest, RolloutEngine

# Actions end at the end-of-turn token or at any byte divisible by 7, so greedy actions of a
# random model still end at varied lengths.
STOP_BYTES = [byte for byte in range(256) if byte % 7 == 0]


class CountingEnv(gym.Env[str, str]):
    """A multi-turn text env: ``turns`` actions per episode (1 + seed % 3 unless given).

    Observations repeat the action's length with a seed-dependent tail, so observation segments
    have varied lengths; the reward of turn k is k.
    """

    metadata = {}
    observation_space = gym.spaces.Text(max_length=512)
    action_space = gym.spaces.Text(max_length=4096)

    def __init__(self, turns=None):
        self.fixed_turns = turns
        self.seen_actions = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode = seed or 0
        self.turns = (options or {}).get("turns", self.fixed_turns or 1 + self.episode % 3)
        self.turn = 0
        return f"Count to {self.turns} (episode {self.episode}).", {
            "phase": self.episode % 2,
            "theta": {"turns": self.turns},
        }

    def step(self, action):
        self.turn += 1
        self.seen_actions.append(action)
        done = self.turn >= self.turns
        observation = f"turn {self.turn}: {len(action)} chars" + "." * (self.episode % 5)
        info = {"turn": self.turn}
        if done:
            info.update(behavior="finished", not_json=object())
        return observation, float(self.turn), done, False, info


class SlowEnv(CountingEnv):
    """A ``CountingEnv`` whose ``step`` sleeps ``delay`` seconds (a slow tool or simulator)."""

    def __init__(self, turns=None, delay=0.2):
        super().__init__(turns)
        self.delay = delay

    def step(self, action):
        time.sleep(self.delay)
        return super().step(action)


def _policy(seed=0, spread=0.25):
    """A 2-layer, 64-wide policy with weights wide enough that greedy choices are clear-cut."""
    model, tokenizer = build_tiny_policy(num_layers=2, hidden_size=64, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.normal_(0.0, spread, generator=generator)
    return model, tokenizer


def _requests(count, turns=None):
    return [
        EpisodeRequest(CountingEnv(turns), seed=index, prompt_id=index) for index in range(count)
    ]


def _source(requests):
    iterator = iter(requests)
    return lambda: next(iterator, None)


def _reference_greedy_episode(model, tokenizer, request, stop_ids, max_action_tokens):
    """One episode, unbatched and uncached: a full forward over all tokens for every token."""
    layout = ChatLayout(tokenizer)
    env = CountingEnv(request.env.fixed_turns)
    observation, _ = env.reset(seed=request.seed, options=request.options)
    tokens = layout.prompt_tokens(observation)
    action_logprobs, action_positions, rewards = [], [], {}
    history = [{"role": "user", "content": observation}]
    while True:
        action = []
        while True:
            with torch.no_grad():
                logits = model(torch.tensor([tokens])).logits[0, -1]
            token = int(logits.argmax())
            action_logprobs.append(float(torch.log_softmax(logits, dim=-1)[token]))
            action_positions.append(len(tokens))
            tokens.append(token)
            action.append(token)
            if token in stop_ids or len(action) == max_action_tokens:
                break
        stopped = action[-1] in stop_ids
        text = tokenizer.decode(action[:-1] if stopped else action, skip_special_tokens=True)
        observation, reward, terminated, _, _ = env.step(text)
        rewards[len(tokens) - 1] = reward
        if terminated:
            return tokens, action_positions, action_logprobs, rewards
        history.append({"role": "assistant", "content": text})
        tokens += layout.observation_tokens(
            history, observation, tokenizer.decode([action[-1]]) if stopped else None
        )
        history.append({"role": "user", "content": observation})


@pytest.mark.parametrize(
    ("fast_attention", "lean_forward"),
    [(True, True), (True, False), (False, False)],
    ids=["lean_forward", "hf_forward_slot_attention", "hf_forward_model_attention"],
)
def test_greedy_tokens_and_logprobs_equal_an_uncached_unbatched_reference(
    make_engine, fast_attention, lean_forward
):
    model, tokenizer = _policy()
    stop_ids = {tokenizer.eos_token_id, *STOP_BYTES}
    engine = make_engine(
        policy=(model, tokenizer),
        num_slots=3,
        temperature=0.0,
        max_turns=5,
        max_action_tokens=12,
        max_episode_tokens=600,
        stop_token_ids=sorted(stop_ids),
        fast_attention=fast_attention,
        lean_forward=lean_forward,
    )
    assert (engine.decoder.lean is not None) == lean_forward
    requests = _requests(8)
    trajectories = list(engine.run(_source(requests)))
    # 8 episodes through 3 slots: most started in a slot another episode vacated.
    assert sorted(trajectory.prompt_id for trajectory in trajectories) == list(range(8))
    assert engine.decoder.prefill_forwards > 3  # later prompts and observations were prefilled
    assert sum(trajectory.num_turns for trajectory in trajectories) == sum(
        1 + k % 3 for k in range(8)
    )
    for trajectory in trajectories:
        tokens, positions, logprobs, rewards = _reference_greedy_episode(
            model, tokenizer, requests[trajectory.prompt_id], stop_ids, max_action_tokens=12
        )
        assert trajectory.tokens.tolist() == tokens
        assert torch.nonzero(trajectory.action_mask).squeeze(-1).tolist() == positions
        torch.testing.assert_close(
            trajectory.behavior_logprobs[positions], torch.tensor(logprobs), atol=1e-4, rtol=0
        )
        assert {
            index: value for index, value in enumerate(trajectory.rewards.tolist()) if value
        } == rewards
        assert trajectory.terminated and not trajectory.truncated


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_behavior_logprobs_equal_teacher_forced_logprobs(make_engine, temperature):
    model, tokenizer = build_tiny_policy(num_layers=2, hidden_size=64, seed=1)
    engine = make_engine(
        policy=(model, tokenizer),
        num_slots=4,
        temperature=temperature,
        max_turns=3,
        max_action_tokens=16,
        max_episode_tokens=400,
        seed=5,
    )
    trajectories = list(engine.run(_source(_requests(9))))
    assert len(trajectories) == 9
    for trajectory in trajectories:
        assert not trajectory.tokens.is_inference()  # usable in the learner's autograd graph
        with torch.no_grad():
            reference = token_logprobs(model, trajectory.tokens[None], temperature=temperature)[0]
        mask = trajectory.action_mask
        torch.testing.assert_close(
            trajectory.behavior_logprobs[mask], reference[mask], atol=1e-4, rtol=0
        )
        assert torch.all(trajectory.behavior_logprobs[~mask] == 0)


def test_long_episode_survives_cache_resizes_with_grouped_query_attention(make_engine):
    # Grouped-query attention (4 query heads sharing 2 key/value heads), a long episode in one
    # slot while short ones come and go in the other: the cache grows past several granules and
    # shrinks back, and every logprob must still match a teacher-forced full forward.
    config = LlamaConfig(
        vocab_size=262,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    _, tokenizer = build_tiny_policy(num_layers=1, hidden_size=8, num_heads=1)
    engine = make_engine(
        policy=(model, tokenizer),
        max_turns=12,
        max_action_tokens=24,
        max_episode_tokens=1000,
        stop_token_ids=[],
        seed=1,
    )
    long_episode = EpisodeRequest(CountingEnv(), seed=0, options={"turns": 12}, prompt_id=0)
    short_episodes = [
        EpisodeRequest(CountingEnv(), seed=k, options={"turns": 1}, prompt_id=k)
        for k in range(1, 10)
    ]
    queue = [long_episode, *short_episodes]

    def offset_source():
        # Short episodes start 3 steps out of phase with the long one's turns, so their prompts
        # are prefilled while the long episode's cache row is not part of the call.
        if queue and (queue[0] is long_episode or engine.stats.decode_steps >= 3):
            return queue.pop(0)
        return None

    trajectories = list(engine.run(offset_source))
    assert len(trajectories[-1].tokens) > 300 and trajectories[-1].prompt_id == 0
    assert engine.decoder.cache.resizes >= 4
    for trajectory in trajectories:
        with torch.no_grad():
            reference = token_logprobs(model, trajectory.tokens[None])[0]
        mask = trajectory.action_mask
        torch.testing.assert_close(
            trajectory.behavior_logprobs[mask], reference[mask], atol=1e-4, rtol=0
        )


def test_trajectory_fields_rewards_turns_and_info(make_engine):
    engine = make_engine(
        max_turns=4, max_action_tokens=5, max_episode_tokens=300, stop_token_ids=[]
    )
    requests = [
        EpisodeRequest(
            CountingEnv(),
            seed=2,
            options={"turns": 3},
            prompt_id=41,
            group_id=7,
            world_time=12.5,
            tag=("ticket", 9),
        )
    ]
    (trajectory,) = engine.run(_source(requests))
    assert trajectory.tag == ("ticket", 9)
    assert (trajectory.prompt_id, trajectory.group_id, trajectory.world_time, trajectory.seed) == (
        41,
        7,
        12.5,
        2,
    )
    assert (trajectory.env_id, trajectory.phase, trajectory.theta) == (
        "CountingEnv",
        0,
        {"turns": 3},
    )
    assert trajectory.terminated and not trajectory.truncated and trajectory.behavior == "finished"
    assert trajectory.info == {"turn": 3, "behavior": "finished"}  # the object() entry is dropped
    json.dumps(trajectory.info)
    assert trajectory.num_turns == 3 and trajectory.num_action_tokens == 15
    assert trajectory.env_steps == 3
    turn_ids = trajectory.turn_ids[trajectory.action_mask].tolist()
    assert turn_ids == [0] * 5 + [1] * 5 + [2] * 5
    assert torch.all(trajectory.turn_ids[~trajectory.action_mask] == -1)
    assert torch.all(trajectory.versions[~trajectory.action_mask] == -1)
    # Turn k's reward (k) sits on its last action token.
    action_positions = torch.nonzero(trajectory.action_mask).squeeze(-1)
    last_of_turn = action_positions[[4, 9, 14]]
    assert trajectory.rewards[last_of_turn].tolist() == [1.0, 2.0, 3.0]
    assert trajectory.total_reward == 6.0
    assert trajectory.finished_at >= trajectory.started_at > 0 and trajectory.env_seconds > 0
    # The environment saw each action as text.
    assert len(requests[0].env.seen_actions) == 3


def test_action_cap_truncates_by_default_and_submits_when_asked(make_engine, tiny_policy):
    model, tokenizer = tiny_policy
    common = dict(max_turns=4, max_action_tokens=6, max_episode_tokens=300, stop_token_ids=[])
    # The engine's own default, so not make_engine (whose engines submit a cut action).
    truncating = RolloutEngine(model, tokenizer, num_slots=2, **common)
    for trajectory in truncating.run(_source(_requests(3, turns=2))):
        assert trajectory.truncated and not trajectory.terminated
        assert trajectory.info[TRUNCATED_BY_KEY] == "action_tokens"
        assert trajectory.num_action_tokens == 6 and trajectory.num_turns == 1
        assert trajectory.env_steps == 0  # the cut action never reached the environment
    submitting = make_engine(on_action_cap="submit", **common)
    for trajectory in submitting.run(_source(_requests(3, turns=2))):
        assert trajectory.terminated and not trajectory.truncated
        assert trajectory.num_action_tokens == 12 and trajectory.num_turns == 2
        assert trajectory.env_steps == 2
        # A cut action gets the end-of-turn token from the template, as context.
        second_turn_start = torch.nonzero(trajectory.turn_ids == 1)[0].item()
        assert tokenizer.eos_token_id in trajectory.tokens[6:second_turn_start].tolist()


def test_turn_and_episode_token_caps_truncate(make_engine):
    by_turns = make_engine(max_turns=2, max_action_tokens=4, max_episode_tokens=300)
    for trajectory in by_turns.run(_source(_requests(2, turns=5))):
        assert trajectory.truncated and not trajectory.terminated and trajectory.num_turns == 2
        assert trajectory.info[TRUNCATED_BY_KEY] == "turns"
    by_tokens = make_engine(max_turns=10, max_action_tokens=20, max_episode_tokens=70)
    for trajectory in by_tokens.run(_source(_requests(3, turns=9))):
        assert trajectory.truncated and len(trajectory.tokens) <= 70
        assert trajectory.info[TRUNCATED_BY_KEY] == "episode_tokens"
    tiny_budget = make_engine(num_slots=1, max_turns=1, max_episode_tokens=10)
    (too_long,) = tiny_budget.run(_source(_requests(1)))
    assert too_long.truncated and too_long.num_action_tokens == 0  # the prompt alone is too long


def test_versions_are_read_when_each_token_is_sampled(make_engine):
    engine = make_engine(
        num_slots=1, max_turns=3, max_action_tokens=5, max_episode_tokens=300, stop_token_ids=[]
    )
    engine.policy_version = 100

    def publish_new_weights(current):
        current.policy_version += 1

    engine.on_decode_step = publish_new_weights
    first, second = engine.run(_source(_requests(2, turns=3)))
    # One slot samples one token per decoding step, and the hook bumps the version before each.
    for trajectory, start in ((first, 101), (second, 116)):
        versions = trajectory.versions[trajectory.action_mask].tolist()
        assert versions == list(range(start, start + 15))
        assert trajectory.oldest_version == start


def test_continuous_batching_refills_a_slot_while_a_long_episode_runs(make_engine):
    engine = make_engine(
        max_turns=8, max_action_tokens=5, max_episode_tokens=400, stop_token_ids=[]
    )
    long_episode = EpisodeRequest(CountingEnv(), seed=0, options={"turns": 5}, prompt_id=0)
    short_episodes = [
        EpisodeRequest(CountingEnv(), seed=k, options={"turns": 1}, prompt_id=k)
        for k in range(1, 5)
    ]
    order = [
        trajectory.prompt_id for trajectory in engine.run(_source([long_episode, *short_episodes]))
    ]
    assert order == [1, 2, 3, 4, 0]
    # Each action is exactly 5 tokens and a slot samples one token per step: the long episode
    # takes 25 steps while the other slot runs the four short ones back to back (20 steps).
    # Batches that wait for their slowest member would take 25 + 5 + 5 steps.
    assert engine.stats.decode_steps == 25


def test_admission_control_and_max_episodes(make_engine):
    engine = make_engine(num_slots=3)
    pending = _requests(4, turns=2)
    calls = []

    def gated_source():
        # Lets one episode in at a time: "nothing may start now" while one is running.
        calls.append(engine.stats.episodes_started - engine.stats.episodes_finished)
        if calls[-1] >= 1 or not pending:
            return None
        return pending.pop(0)

    trajectories = list(engine.run(gated_source))
    assert [trajectory.prompt_id for trajectory in trajectories] == [0, 1, 2, 3]
    assert max(calls) == 1 and not pending
    limited = list(engine.run(_source(_requests(6, turns=1)), max_episodes=4))
    assert len(limited) == 4


class RendezvousEnv(CountingEnv):
    """A one-turn ``CountingEnv`` whose step waits at ``meeting`` (a barrier) until that many
    steps are in flight at once, then takes ``delay`` seconds: stepped one at a time, it fails."""

    def __init__(self, meeting, delay):
        super().__init__(turns=1)
        self.meeting = meeting
        self.delay = delay

    def step(self, action):
        self.meeting.wait()  # BrokenBarrierError once the barrier's timeout passes
        time.sleep(self.delay)
        return super().step(action)


def test_env_workers_step_slow_environments_concurrently(make_engine):
    # Every step waits until all eight are being stepped at the same time, which only a pool
    # that runs them concurrently achieves; stepped inline (or by fewer threads) the barrier
    # times out and the run raises. The timeout only turns that failure into an error instead
    # of a hang: it bounds no speed.
    meeting = threading.Barrier(8, timeout=120)
    engine = make_engine(num_slots=8, max_turns=1, stop_token_ids=[], env_workers=8)
    requests = [
        EpisodeRequest(RendezvousEnv(meeting, delay=0.2), seed=k, prompt_id=k) for k in range(8)
    ]
    trajectories = list(engine.run(_source(requests)))
    assert not meeting.broken
    assert sorted(trajectory.prompt_id for trajectory in trajectories) == list(range(8))
    for trajectory in trajectories:
        assert trajectory.terminated and trajectory.num_turns == 1
        assert trajectory.num_action_tokens == 4 and trajectory.total_reward == 1.0
        assert trajectory.env_seconds >= 0.2
    assert engine.stats.env_seconds >= 8 * 0.2  # per-call seconds, summed across threads


class BlockingEnv(CountingEnv):
    """A one-turn ``CountingEnv`` whose step waits for ``release`` (a tool call that hangs)."""

    def __init__(self):
        super().__init__(turns=1)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.returned = False

    def step(self, action):
        self.entered.set()
        self.release.wait(timeout=300)
        self.returned = True
        return super().step(action)


def test_interrupt_stops_an_episode_waiting_for_its_environment_and_frees_its_slot(make_engine):
    engine = make_engine(max_turns=1, stop_token_ids=[], env_workers=2)
    blocked = BlockingEnv()
    pending = [EpisodeRequest(blocked, seed=0, prompt_id=0, tag="slow")]
    pending += [EpisodeRequest(CountingEnv(turns=1), seed=k, prompt_id=k, tag=k) for k in (1, 2, 3)]
    finished, stopped = [], []

    def source():
        # Episode 1 runs beside the slow one. Their resets run in threads, so which one starts
        # decoding first is up to the machine: once 1 is done, the freed slot is held (None:
        # ask again) until the slow episode has sampled its 4 tokens and waits in its step.
        if not stopped and blocked.entered.is_set():
            stopped.append(engine.interrupt("slow"))
        if finished and not stopped:
            return None
        return pending.pop(0) if pending else None

    for trajectory in engine.run(source):
        finished.append(trajectory)
    [spent] = stopped
    assert spent.tag == "slow" and spent.info[TRUNCATED_BY_KEY] == "interrupted"
    assert spent.num_action_tokens == 4 and spent.env_steps == 0 and spent.truncated
    assert spent.total_reward == 0.0
    # The others ran to their end, 2 and 3 in the freed slot and the other one, while the slow
    # step never returned: the run did not wait for it, and its answer is never applied.
    assert sorted(trajectory.tag for trajectory in finished) == [1, 2, 3]
    assert not blocked.returned
    assert engine.stats.episodes_interrupted == 1
    assert engine.interrupt("slow") is None  # nothing with that tag runs any more
    with pytest.raises(ValueError, match="found by their tag"):
        engine.interrupt(None)
    blocked.release.set()


def test_env_workers_give_the_same_greedy_episodes_as_inline_stepping(make_engine):
    # Steps of different lengths finish out of order and the slots' batches differ, but greedy
    # episodes depend only on their own tokens: every field must match the inline run.
    model, tokenizer = _policy()
    stop_ids = sorted({tokenizer.eos_token_id, *STOP_BYTES})

    def run(env_workers):
        engine = make_engine(
            policy=(model, tokenizer),
            num_slots=3,
            temperature=0.0,
            max_turns=5,
            max_action_tokens=12,
            max_episode_tokens=600,
            stop_token_ids=stop_ids,
            env_workers=env_workers,
        )
        requests = [
            EpisodeRequest(SlowEnv(delay=0.01 * (k % 4)), seed=k, prompt_id=k) for k in range(8)
        ]
        return {trajectory.prompt_id: trajectory for trajectory in engine.run(_source(requests))}

    inline, pooled = run(0), run(3)
    assert sorted(pooled) == sorted(inline) == list(range(8))
    for prompt_id, expected in inline.items():
        trajectory = pooled[prompt_id]
        assert torch.equal(trajectory.tokens, expected.tokens)
        assert torch.equal(trajectory.action_mask, expected.action_mask)
        assert torch.equal(trajectory.rewards, expected.rewards)
        assert torch.equal(trajectory.turn_ids, expected.turn_ids)
        torch.testing.assert_close(
            trajectory.behavior_logprobs, expected.behavior_logprobs, atol=1e-4, rtol=0
        )
        assert trajectory.terminated == expected.terminated
        assert (trajectory.phase, trajectory.theta) == (expected.phase, expected.theta)


def test_env_errors_raised_in_the_pool_reach_the_caller(make_engine):
    class BrokenEnv(CountingEnv):
        def step(self, action):
            raise RuntimeError("simulator crashed")

    engine = make_engine(env_workers=2)
    with pytest.raises(
        EnvError,
        match=r"env BrokenEnv \(test_rollout.py\): step 1 of the episode with seed 0 raised "
        r"RuntimeError: simulator crashed \(at test_rollout.py:\d+\)",
    ):
        list(engine.run(_source([EpisodeRequest(BrokenEnv(turns=2), seed=0)])))


def test_one_env_instance_cannot_run_two_episodes_at_once(make_engine):
    engine = make_engine()
    shared = CountingEnv(turns=2)
    requests = [EpisodeRequest(shared, seed=0), EpisodeRequest(shared, seed=1)]
    with pytest.raises(ValueError, match="own env instance"):
        list(engine.run(_source(requests)))


def test_same_seed_same_episodes_different_seed_different(make_engine):
    def sample(seed):
        engine = make_engine(
            num_slots=3, max_turns=3, max_action_tokens=8, max_episode_tokens=300, seed=seed
        )
        return {
            trajectory.prompt_id: trajectory for trajectory in engine.run(_source(_requests(5)))
        }

    first, again, other = sample(3), sample(3), sample(4)
    for prompt_id, trajectory in first.items():
        assert torch.equal(trajectory.tokens, again[prompt_id].tokens)
        assert torch.equal(trajectory.behavior_logprobs, again[prompt_id].behavior_logprobs)
    assert any(not torch.equal(first[k].tokens, other[k].tokens) for k in first)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_slots": 0}, "num_slots"),
        ({"max_turns": 0}, "max_turns"),
        ({"max_episode_tokens": 5000}, "max_position_embeddings"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 2.0}, "top_p"),
        ({"on_action_cap": "drop"}, "on_action_cap"),
        ({"env_workers": -1}, "env_workers"),
    ],
)
def test_bad_settings_raise(make_engine, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_engine(**kwargs)


def test_unsupported_attention_implementation_is_refused(make_engine, tiny_policy):
    model, _ = tiny_policy
    model.config._attn_implementation = "flex_attention"
    with pytest.raises(ValueError, match="attention implementation"):
        make_engine()


def test_quick_benchmark_reports_both_sides_as_json():
    report = run_rollout_benchmark(quick=True)
    json.dumps(report)
    assert report["workload"]["batch_size"] == 8 and report["workload"]["quick"]
    for side in ("engine", "generate"):
        assert report[side]["tokens"] > 0 and report[side]["tokens_per_second"] > 0
        assert report[side]["tokens_per_cpu_second"] > 0
    assert report["speedup"] == pytest.approx(
        report["engine"]["tokens_per_second"] / report["generate"]["tokens_per_second"]
    )
