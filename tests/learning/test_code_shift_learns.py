"""CodeShift: with kit 2.0 live and the range's top excluded, reward rises as the policy learns
to call ``kit.clip`` and to stop below the top.

One submission per episode, scored by the fraction of hidden tests it passes. The warm start
writes a program for the task with the helper API and the boundary reading each drawn
uniformly (the family's own demonstrations), so a minority of its programs pass every test and
a call to the dead ``kit.clamp`` passes none; only reward says which API and which reading pay.

The most expensive learning test (every program of its runs and evaluations runs in the
``subprocess`` sandbox), so its setting was made cheaper: 400 SFT steps at 0.01 instead of 800
at 0.005, and runs of 512 episodes instead of 768; ``docs/families/learning_tests.md`` gives the
CPU and wall seconds of this setting and the CPU seconds and rises of the earlier one. The
margin is about half the lowest rise measured over seeds 0, 1 and 2 for both methods: the same
seed takes another path on another CPU, and with the earlier setting ``grpo``'s seed 0 rose far
less on one CPU than on another. The test fails with the learning rate at 1e-12.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.learning, pytest.mark.xdist_group("learning-code-shift")]

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
    "sft_steps": 400,
    "sft_lr": 0.01,
    "sft_batch_size": 16,
    "run": ["budget.episodes=512", "optim.lr=5e-4"],
    "eval_episodes": 96,
}
MARGIN = 0.07


@pytest.mark.parametrize("method", ["sao", "grpo"])
def test_reward_rises_within_512_episodes(method, learned):
    result = learned(method)
    assert result.rise >= MARGIN, result
