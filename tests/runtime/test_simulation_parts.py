"""The simulated runtime's parts, each against hand-computed values: the cost model and its
presets, the fit, env calls answered on a virtual clock, and weights readable from a moment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from sao_online.config import ConfigError, SimCostConfig, load_config
from sao_online.rollout import EnvError
from sao_online.runtime.simulation.clock import VirtualClock
from sao_online.runtime.simulation.costs import PRESETS, CostModel, resolve_costs
from sao_online.runtime.simulation.env_calls import VirtualEnvCalls
from sao_online.runtime.simulation.fit import (
    fit_decode,
    fit_env,
    fit_learner,
    nonnegative_least_squares,
)
from sao_online.runtime.simulation.weights import VirtualWeights

COSTS = CostModel(
    decode_step_seconds=0.01,
    decode_slot_seconds=0.001,
    decode_cached_token_seconds=1e-5,
    prefill_token_seconds=1e-4,
    env_call_seconds=0.05,
    learner_update_seconds=2.0,
    learner_policy_token_seconds=1e-3,
    learner_critic_token_seconds=2e-4,
    publish_seconds=0.5,
)


def test_the_cost_model_prices_by_hand():
    # 0.01 + 0.001 * 4 + 1e-5 * 1000 + 1e-4 * (40 - 4) = 0.01 + 0.004 + 0.01 + 0.0036
    assert COSTS.decode_step(4, 40, 1000) == pytest.approx(0.0276)
    assert COSTS.decode_step(4, 3, 0) == pytest.approx(0.014)  # never negative prefill
    assert COSTS.env_call(1.25) == pytest.approx(1.3)
    # policy 1e-3 * 1000 = 1 s; critic 2e-4 * 1000 * 2 = 0.4 s; side by side: 2 + 1
    lanes = COSTS.learner_lanes(1000, critic_updates=2, trains_policy=True)
    assert lanes == pytest.approx((1.0, 0.4))
    assert COSTS.learner_update(lanes) == pytest.approx(3.0)
    warm_up = COSTS.learner_lanes(1000, critic_updates=2, trains_policy=False)
    assert COSTS.learner_update(warm_up) == pytest.approx(2.4)


def test_a_config_overrides_its_preset_field_by_field():
    base = PRESETS["gpu-fleet"].costs
    assert resolve_costs(SimCostConfig()) == base
    costs = resolve_costs(SimCostConfig(publish_seconds=7.0))
    assert costs.publish_seconds == 7.0
    assert costs.decode_step_seconds == base.decode_step_seconds


def test_every_preset_makes_progress_and_names_its_source():
    for name, preset in PRESETS.items():
        assert preset.costs.decode_step_seconds > 0 and preset.costs.learner_update_seconds > 0
        assert preset.source, name
        load_config(None, ["runtime.backend=simulated", f"runtime.sim.preset={name}"])


def test_the_sim_section_is_recorded_only_where_it_is_read():
    assert "sim" not in load_config(None, ["runtime.backend=local"]).to_dict()["runtime"]
    simulated = load_config(None, ["runtime.backend=simulated"]).to_dict()["runtime"]
    assert simulated["sim"]["preset"] == "gpu-fleet"
    with pytest.raises(
        ConfigError, match=r"^runtime\.sim\.preset: must be .*gpu-fleet.*, got 'cpu-huge'"
    ):
        load_config(None, ["runtime.sim.preset=cpu-huge"])


def test_nonnegative_least_squares_drops_a_negative_column():
    design = np.column_stack([np.ones(4), [0.0, 1, 2, 3], [0.0, 0, 1, 1]])
    exact = nonnegative_least_squares(design, design @ np.array([1.0, 0.5, 2.0]))
    assert exact == pytest.approx([1.0, 0.5, 2.0])
    # A decreasing target: the slope would be negative, so it is 0 and the mean is the rest.
    assert nonnegative_least_squares(design[:, :2], np.array([3.0, 2, 1, 0])) == pytest.approx(
        [1.5, 0.0]
    )


def test_the_decoding_fit_recovers_known_costs_and_leaves_out_a_stall():
    rng = np.random.default_rng(0)
    rounds = pd.DataFrame(
        {
            "slots": rng.integers(1, 32, 400),
            "cached_tokens": rng.integers(0, 4000, 400),
        }
    )
    rounds["fed_tokens"] = rounds["slots"] + rng.integers(0, 200, 400) * (rng.random(400) < 0.2)
    rounds["seconds"] = (
        0.002
        + 1e-4 * rounds["slots"]
        + 2e-6 * rounds["cached_tokens"]
        + 5e-5 * (rounds["fed_tokens"] - rounds["slots"])
    )
    rounds.loc[7, "seconds"] += 3.0  # the process was descheduled for 3 s
    costs, diagnostics = fit_decode(rounds)
    assert costs["decode_step_seconds"] == pytest.approx(0.002, rel=1e-6)
    assert costs["decode_slot_seconds"] == pytest.approx(1e-4, rel=1e-6)
    assert costs["decode_cached_token_seconds"] == pytest.approx(2e-6, rel=1e-6)
    assert costs["prefill_token_seconds"] == pytest.approx(5e-5, rel=1e-6)
    assert diagnostics["rounds_left_out"] == 1


def test_the_learner_fit_charges_the_process_overhead_to_the_fixed_cost():
    # Two runs, updates every 2.0 s (run a) or 3.0 s (run b): lanes 1.0 / 0.4 s for 1000 tokens
    # with K = 2, publish 0.1 s, a 0.2 s wait: 2.0 - 0.2 - 0.1 - 1.0 = 0.7 s left per update.
    rows = []
    for run, cycle, wait in (("a", 2.0, 0.2), ("b", 3.0, 1.2)):
        for version in range(1, 6):
            rows.append(
                {
                    "run": run,
                    "version": version,
                    "wall_time": 10.0 + cycle * version,
                    "charts/batch_tokens": 1000.0,
                    "charts/critic_only_step": 0.0,
                    "charts/learner_policy_seconds": 1.0,
                    "charts/learner_critic_seconds": 0.4,
                    "charts/learner_wait_episodes_seconds": wait,
                    "charts/learner_wait_bound_seconds": 0.0,
                    "charts/publish_seconds": 0.1,
                    "critic_updates": 2,
                }
            )
    fitted = fit_learner(pd.DataFrame(rows))
    assert fitted["learner_update_seconds"] == pytest.approx(0.7)
    assert fitted["learner_policy_token_seconds"] == pytest.approx(1e-3)
    assert fitted["learner_critic_token_seconds"] == pytest.approx(2e-4)
    assert fitted["publish_seconds"] == pytest.approx(0.1)


def test_the_env_fit_leaves_out_the_simulated_latency():
    episodes = pd.DataFrame(
        {
            "env_seconds": [1.02, 0.53, 9.9],
            "env_latency_seconds": [1.0, 0.5, 0.0],
            "env_steps": [1, 2, 1],
            "dropped": [False, False, True],
        }
    )
    # (1.02 - 1.0) / 2 calls = 0.01, (0.53 - 0.5) / 3 calls = 0.01; the dropped row is left out.
    assert fit_env(episodes) == pytest.approx(0.01)


class _Answers:
    """What a simulated worker's engine sees of its env calls."""

    def __init__(self, timeout: float | None = 10.0) -> None:
        self.time = 0.0
        self.calls = VirtualEnvCalls(lambda: self.time, COSTS, timeout)
        self.done: list[tuple[str, float]] = []

    def call(self, slot: int, latency: float, name: str, on_timeout=None) -> None:
        result = ("observation", {"latency": latency})
        self.calls.call(
            slot,
            lambda: result,
            lambda _result, seconds, finished: finished.append((name, seconds)),
            self.done,
            f"call {name}",
            on_timeout,
        )


def test_env_answers_arrive_when_their_virtual_time_has_passed():
    answers = _Answers()
    answers.call(0, 1.0, "slow")  # 0.05 + 1.0
    answers.time = 0.5
    answers.call(1, 0.1, "fast")  # due at 0.5 + 0.15
    assert answers.calls.next_ready() == pytest.approx(0.65)
    answers.calls.apply_ready(answers.done)
    assert answers.done == []
    answers.time = 1.05
    answers.calls.apply_ready(answers.done)
    assert answers.done == [("slow", pytest.approx(1.05)), ("fast", pytest.approx(0.15))]
    assert answers.calls.next_ready() is None


def test_an_env_call_past_the_timeout_ends_its_episode_or_stops_the_run():
    answers = _Answers(timeout=2.0)
    answers.call(0, 5.0, "ends", on_timeout=lambda s, f: f.append(("timed out", s)))
    assert answers.calls.next_ready() == pytest.approx(2.0)
    answers.time = 2.0
    answers.calls.apply_ready(answers.done)
    assert answers.done == [("timed out", 2.0)]
    with pytest.raises(EnvError, match=r"call stops took 5\.05 virtual s, past env\.step_timeout"):
        answers.call(1, 5.0, "stops")


def test_weights_are_readable_from_their_moment_and_old_ones_are_freed():
    model = torch.nn.Linear(2, 1, bias=False)
    weights = VirtualWeights(model, version=0, readable_at=0.0)
    with torch.no_grad():
        model.weight.fill_(1.0)
    weights.publish(model, version=1, readable_at=5.0)
    copy = torch.nn.Linear(2, 1, bias=False)
    assert weights.load_into(copy, at=4.9) == 0
    assert weights.load_into(copy, at=5.0) == 1 and bool((copy.weight == 1.0).all())
    assert weights.readable_at(1) == 5.0 and weights.readable_at(2) is None
    weights.forget_before(4.0)
    assert weights.kept == 2
    weights.forget_before(5.0)
    assert weights.kept == 1
    with pytest.raises(ValueError, match="version 1 at 6 s after version 1"):
        weights.publish(model, version=1, readable_at=6.0)


def test_virtual_time_never_runs_backwards():
    clock = VirtualClock(3.0)
    clock.advance_to(3.0)
    with pytest.raises(ValueError, match="cannot run backwards: 3 -> 2.5"):
        clock.advance_to(2.5)
