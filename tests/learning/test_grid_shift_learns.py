"""GridShift: with the goal hidden at the NE corner, reward rises as the policy learns to walk
N and E.

The warm start is 50 SFT steps on demonstrations that look for a hidden goal at a corner drawn
per episode (NE or SW), so it writes single moves in every direction, undecided between the
corners. Nothing in the observation says where the goal is; only reward does, one move at a
time. The margin is set from the rises measured over several seeds, and the test fails with
the learning rate at 1e-12 (``docs/families/learning_tests.md``).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.learning, pytest.mark.xdist_group("learning-grid-shift")]

SETTING = {
    "config": "configs/grid_shift.yaml",
    "overrides": [
        "schedule={parameters: {moves: {kind: stationary, value: compass}, "
        "slip: {kind: stationary, value: 0.0}, goal: {kind: stationary, value: hidden_ne}}}",
    ],
    "demonstrations": 256,
    "sft_steps": 50,
    "sft_lr": 0.005,
    "sft_batch_size": 16,
    "run": ["budget.episodes=256"],
}
MARGIN = 0.15


@pytest.mark.parametrize("method", ["sao", "grpo"])
def test_reward_rises_within_256_episodes(method, learned):
    result = learned(method)
    assert result.rise >= MARGIN, result
