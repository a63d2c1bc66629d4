"""Pieces of the asynchronous runtime: shared weights, in-flight updates, engines under latency,
the learner's wait for stragglers, and the worker loop's ticket bookkeeping.

End-to-end runs of both asynchronous backends are in ``test_async_backends.py``.
"""

from __future__ import annotations

import multiprocessing
from types import SimpleNamespace

import pytest
import torch
from tiny_model import tiny_overrides

from sao_online.config import load_config
from sao_online.learning.warm_start import base_policy
from sao_online.rollout import TRUNCATED_BY_KEY, EpisodeRequest
from sao_online.runtime.engines import build_engine
from sao_online.runtime.envs import make_env
from sao_online.runtime.workers.weights import SharedWeights

TINY = tiny_overrides(
    "runtime.backend=local",
    "runtime.num_workers=2",
    "algorithm.critic_warmup_steps=0",
)


def test_shared_weights_round_trip_and_refuse_going_back():
    config = load_config(None, TINY)
    torch.manual_seed(0)
    learner_policy, _ = base_policy(config)
    worker_policy, _ = base_policy(load_config(None, TINY + ["seed=1"]))
    weights = SharedWeights(learner_policy, multiprocessing.get_context("spawn"), version=0)
    with torch.no_grad():
        for parameter in learner_policy.parameters():
            parameter.add_(0.5)
    weights.publish(learner_policy, version=3)
    assert weights.version == 3
    assert weights.load_into(worker_policy) == 3
    for name, tensor in worker_policy.state_dict().items():
        assert torch.equal(tensor, learner_policy.state_dict()[name]), name
    with pytest.raises(ValueError, match="version went back"):
        weights.publish(learner_policy, version=2)


def test_in_flight_update_changes_the_version_within_an_episode():
    # The worker's hook (load newer shared weights between decoding steps) on a real engine:
    # the hook runs before each decoding step; the learner publishes version 1 before the second.
    config = load_config(None, TINY + ["rollout.max_action_tokens=12"])
    policy, tokenizer = base_policy(config)
    weights = SharedWeights(policy, multiprocessing.get_context("spawn"), version=0)
    engine = build_engine(config, policy, tokenizer, seed=0, num_slots=2)
    learner_copy, _ = base_policy(load_config(None, TINY + ["seed=1"]))  # other weights
    steps = 0

    def on_decode_step(current):
        nonlocal steps
        steps += 1
        if steps == 2:
            weights.publish(learner_copy, version=1)
        if weights.version > current.policy_version:
            current.policy_version = weights.load_into(policy)

    engine.on_decode_step = on_decode_step
    requests = iter([EpisodeRequest(make_env(config, seed=0), seed=0, prompt_id=0)])
    (trajectory,) = list(engine.run(lambda: next(requests, None)))
    versions = trajectory.versions[trajectory.action_mask].tolist()
    assert len(versions) >= 2  # an untrained byte-level model rarely stops after one token
    assert versions[0] == 0 and set(versions[1:]) == {1}
    # The loaded weights are the published ones, not the engine's first ones.
    assert torch.equal(
        policy.state_dict()["lm_head.weight"], learner_copy.state_dict()["lm_head.weight"]
    )


def test_engines_step_environments_in_threads_only_under_simulated_latency():
    # Sync runs and workers share build_engine: both get the pool exactly when env latency is on.
    config = load_config(None, TINY)
    policy, tokenizer = base_policy(config)
    assert build_engine(config, policy, tokenizer, seed=0, num_slots=4).env_workers == 0
    slow = load_config(None, TINY + ["env.latency_mean=0.1"])
    engine = build_engine(slow, policy, tokenizer, seed=0, num_slots=4)
    assert engine.env_workers == 4
    engine.close()


def test_worker_pairs_each_trajectory_with_its_own_ticket_when_group_members_finish_out_of_order():
    # One group of four, each member with its own env seed (so a trajectory tells whose it is)
    # and env latency, so members finish in an order unrelated to their tickets.
    from sao_online.runtime.scheduling.planner import EpisodePlan
    from sao_online.runtime.workers.rollout_worker import run_rollout_worker

    config = load_config(
        None,
        TINY + ["env.latency_mean=0.05", "env.latency_sigma=1.5", "rollout.on_action_cap=submit"],
    )
    policy, _ = base_policy(config)
    weights = SharedWeights(policy, multiprocessing.get_context("spawn"), version=0)
    state = SimpleNamespace(theta={}, phase=0)
    tasks = [
        (
            ticket,
            EpisodePlan(prompt_id=3, group_id=3, seed=100 + ticket, world_time=0.0, state=state),
            0,
        )
        for ticket in (10, 11, 12, 13)
    ]
    inbox = [tasks]
    emitted = []
    run_rollout_worker(
        config_dict=config.to_dict(),
        seed=0,
        num_slots=4,
        in_flight=True,
        weights=weights,
        receive=lambda timeout: inbox.pop() if inbox else None,
        emit=emitted.append,
        should_stop=lambda: sum(message[0] == "done" for message in emitted) == 4,
    )
    done = [message for message in emitted if message[0] == "done"]
    assert sorted(message[1] for message in done) == [10, 11, 12, 13]
    # The env latencies are seeded per episode: the members really finished out of order.
    assert [message[1] for message in done] != [10, 11, 12, 13]
    for _, ticket, trajectory in done:
        assert trajectory.seed == 100 + ticket
    # Each was announced when it went into the engine, on the weights it started with.
    started = [message for message in emitted if message[0] == "started"]
    assert sorted(ticket for _, ticket, _ in started) == [10, 11, 12, 13]
    assert {version for _, _, version in started} == {0}


def test_worker_stops_a_queued_and_a_running_episode_when_told_to_and_reports_what_they_spent():
    # Every env step sleeps 600 s (sigma 0), so the running episode can only end by its
    # interrupt; ticket 12 waits for weights of version 5 that never come, so it stays queued.
    from sao_online.runtime.scheduling.planner import EpisodePlan
    from sao_online.runtime.workers.rollout_worker import Interrupt, run_rollout_worker

    config = load_config(
        None,
        TINY + ["env.latency_mean=600", "env.latency_sigma=0", "rollout.on_action_cap=submit"],
    )
    policy, _ = base_policy(config)
    weights = SharedWeights(policy, multiprocessing.get_context("spawn"), version=0)
    state = SimpleNamespace(theta={}, phase=0)

    def plan(ticket):
        return EpisodePlan(
            prompt_id=ticket, group_id=ticket, seed=ticket, world_time=0.0, state=state
        )

    emitted = []
    orders = [[(10, plan(10), 0), (12, plan(12), 5)]]

    def receive(timeout):
        if orders:
            return orders.pop()
        if ("started", 10, 0) in emitted and not any(m[0] == "interrupted" for m in emitted):
            return [Interrupt(12), Interrupt(10), Interrupt(99)]  # 99: unknown, ignored
        return None

    run_rollout_worker(
        config_dict=config.to_dict(),
        seed=0,
        num_slots=2,
        in_flight=True,
        weights=weights,
        receive=receive,
        emit=emitted.append,
        should_stop=lambda: sum(message[0] == "interrupted" for message in emitted) == 2,
    )
    interrupted = {message[1]: message[2] for message in emitted if message[0] == "interrupted"}
    assert set(interrupted) == {10, 12}
    assert interrupted[12] is None  # never started
    spent = interrupted[10]
    assert spent.tag == 10 and spent.info[TRUNCATED_BY_KEY] == "interrupted"
    assert spent.env_steps == 0 and not spent.terminated
    assert not [message for message in emitted if message[0] in ("done", "error")]
