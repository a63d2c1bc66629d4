"""Where the warm start's demonstrations take their regimes from (model.warm_start_regimes)."""

from __future__ import annotations

from collections import Counter

import gymnasium
import numpy as np
import pytest

from sao_online.config import ConfigError, load_config
from sao_online.pretrain import regime_sampler, schedule_phases, warm_start_path


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
