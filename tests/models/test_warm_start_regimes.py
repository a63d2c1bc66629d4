"""Where the warm start's demonstrations take their regimes from (model.warm_start_regimes)."""

from __future__ import annotations

from collections import Counter

import gymnasium
import numpy as np
import pytest

from sao_online.config import ConfigError, load_config
from sao_online.learning.warm_start import (
    collect_demonstrations,
    regime_sampler,
    schedule_phases,
    warm_start_path,
)


def test_the_tool_shift_config_draws_both_phases_of_its_schedule_and_nothing_else():
    config = load_config("configs/tool_shift.yaml")
    assert schedule_phases(config) == [(0.0, 500.0), (500.0, 1500.0)]
    env = gymnasium.make(config.env.id)
    draw = regime_sampler(config, env)
    rng = np.random.default_rng(0)
    drawn = Counter(tuple(sorted(draw(rng).items())) for _ in range(400))
    # Phases are picked uniformly (not by length), so each regime is about half the draws.
    assert set(drawn) == {(("tool_name", "calc"),), (("tool_name", "compute"),)}
    assert 150 < drawn[(("tool_name", "calc"),)] < 250


def test_space_draws_every_parameter_of_the_drift_space():
    config = load_config("configs/tool_shift.yaml", ["model.warm_start_regimes=space"])
    draw = regime_sampler(config, gymnasium.make(config.env.id))
    rng = np.random.default_rng(0)
    thetas = [draw(rng) for _ in range(200)]
    assert {t["schema"] for t in thetas} == {"v1", "v2"}
    assert all(0.0 <= t["failure"] <= 0.5 for t in thetas)


def test_the_regime_source_is_part_of_the_cache_key_and_seconds_clocks_are_refused():
    config = load_config("configs/tool_shift.yaml")
    other = load_config("configs/tool_shift.yaml", ["model.warm_start_regimes=space"])
    assert warm_start_path(config) != warm_start_path(other)
    seconds = load_config(
        {
            "schedule": {
                "clock": "seconds",
                "parameters": {
                    "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": [0, 60]}
                },
            },
            "model": {"warm_start_regimes": "schedule"},
        }
    )
    with pytest.raises(ConfigError, match="model.warm_start_regimes: 'schedule' needs a schedule"):
        schedule_phases(seconds)
    with pytest.raises(ConfigError, match="model.warm_start_regimes"):
        load_config({"model": {"warm_start_regimes": "everything"}})


def test_phase_weights_set_each_phases_share_of_the_demonstrations():
    config = load_config("configs/tool_shift.yaml", ["model.warm_start_phase_weights=[3, 1]"])
    draw = regime_sampler(config, gymnasium.make(config.env.id))
    rng = np.random.default_rng(0)
    drawn = Counter(draw(rng)["tool_name"] for _ in range(2000))
    # 3:1 -> 1,500 of 2,000 expected from the first phase; binomial sd ~19.
    assert set(drawn) == {"calc", "compute"}
    assert 1420 < drawn["calc"] < 1580
    only_first = load_config("configs/tool_shift.yaml", ["model.warm_start_phase_weights=[1, 0]"])
    draw = regime_sampler(only_first, gymnasium.make(config.env.id))
    assert {draw(rng)["tool_name"] for _ in range(200)} == {"calc"}
    # The weights shape the demonstrations, so they are part of the cache key.
    assert warm_start_path(config) != warm_start_path(only_first)
    assert warm_start_path(config) != warm_start_path(load_config("configs/tool_shift.yaml"))


def test_phase_weights_name_what_is_wrong():
    two_phases = "configs/tool_shift.yaml"
    with pytest.raises(ConfigError, match=r"one weight per phase .*\(2\), got 3"):
        regime_sampler(
            load_config(two_phases, ["model.warm_start_phase_weights=[1, 1, 1]"]),
            gymnasium.make("sao_online/ToolShift-v0"),
        )
    with pytest.raises(ConfigError, match="needs warm_start_regimes 'schedule'"):
        load_config(
            two_phases,
            ["model.warm_start_regimes=space", "model.warm_start_phase_weights=[1, 1]"],
        )
    with pytest.raises(ConfigError, match="at least one must be positive"):
        load_config(two_phases, ["model.warm_start_phase_weights=[0, 0]"])


def _styles(config, count: int = 60) -> Counter:
    from sao_online.models.tokenizer import build_byte_tokenizer

    demos = collect_demonstrations(config, build_byte_tokenizer(), count, np.random.default_rng(3))
    return Counter(behavior for _, _, behavior in demos)


def test_an_oracle_share_makes_the_warm_start_lean_to_the_regimes_it_is_shown():
    first_phase_only = [
        "model.warm_start_regimes=schedule",
        "model.warm_start_phase_weights=[1, 0, 0]",
    ]
    undecided = _styles(load_config("configs/demo.yaml", first_phase_only))
    oracle = _styles(
        load_config("configs/demo.yaml", [*first_phase_only, "model.warm_start_oracle_share=1"])
    )
    half = _styles(
        load_config("configs/demo.yaml", [*first_phase_only, "model.warm_start_oracle_share=0.5"])
    )
    # Phase 0 prefers cute and offers academic, cute and chuunibyou: undecided demonstrations
    # write in each offered style (a third each), the oracle's only in cute, half of them
    # the oracle's about 1/2 + 1/6 = 2/3 cute.
    assert set(undecided) == {"academic", "cute", "chuunibyou"}
    assert oracle == Counter({"cute": 60})
    assert 30 <= half["cute"] <= 50 and set(half) == {"academic", "cute", "chuunibyou"}
    assert warm_start_path(load_config("configs/demo.yaml", first_phase_only)) != warm_start_path(
        load_config("configs/demo.yaml", [*first_phase_only, "model.warm_start_oracle_share=0.5"])
    )
