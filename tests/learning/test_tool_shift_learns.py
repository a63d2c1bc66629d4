"""ToolShift: with the calculator live as ``calc``, reward rises as the policy learns to call it.

The warm start is the config's own (the project's warm-start cache; ``sao-online pretrain
configs/tool_shift.yaml`` builds the same one): demonstrations from both phases of the rename,
half calling ``calc`` and half ``compute``, so its first call is a coin flip, and a call to
the dead name gets an error that derails it. Only reward says which name pays. Measured with
``docs/families/learning_tests.py`` (seeds 0, 1, 2; the warm start's mean reward 0.27 on the
paired episodes): rises 0.38, 0.38, 0.39 for sao and 0.31, 0.32, 0.30 for grpo; with the
learning rate at 1e-12 both rise 0.00 and the test fails. The warm start takes about 90 s of
CPU once per machine (then cached); each run about 21 s (sao) and 12 s (grpo) on one thread.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("learning-tool-shift")

SETTING = {
    "config": "configs/tool_shift.yaml",
    "overrides": ["schedule={parameters: {tool_name: {kind: stationary, value: calc}}}"],
    "cached_warm_start": True,
    "run": ["budget.episodes=512"],
}
MARGIN = 0.20


@pytest.mark.parametrize("method", ["sao", "grpo"])
def test_reward_rises_within_512_episodes(method, learned):
    result = learned(method)
    assert result.rise >= MARGIN, result
