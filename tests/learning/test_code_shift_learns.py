"""CodeShift: with kit 2.0 live and the range's top excluded, reward rises as the policy learns
to call ``kit.clip`` and to stop below the top.

One submission per episode, scored by the fraction of hidden tests it passes. The warm start
writes a program for the task with the helper API and the boundary reading each drawn
uniformly (the family's own demonstrations), so about a quarter of its programs pass every
test and a call to the dead ``kit.clamp`` passes none; only reward says which API and which
reading pay. The margin is set from the rises measured over several seeds on two CPUs
(``docs/families/learning_tests.md``): the same seed takes another path on another CPU, and
``grpo``'s lowest rise on one was half its lowest on the other. The test fails with the
learning rate at 1e-12.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("learning-code-shift")

SETTING = {
    "config": "configs/code_shift.yaml",
    "overrides": [
        "schedule={parameters: {helper_version: {kind: stationary, value: v2}, "
        "boundary: {kind: stationary, value: exclusive}}}",
        "env.kwargs={sandbox: subprocess, max_turns: 1}",
        "rollout.max_turns=1",
        "rollout.on_action_cap=submit",
    ],
    "demonstrations": 256,
    "sft_steps": 800,
    "sft_lr": 0.005,
    "sft_batch_size": 16,
    "run": ["budget.episodes=768", "optim.lr=5e-4"],
    "eval_episodes": 96,
}
MARGIN = 0.08


@pytest.mark.parametrize("method", ["sao", "grpo"])
def test_reward_rises_within_768_episodes(method, learned):
    result = learned(method)
    assert result.rise >= MARGIN, result
