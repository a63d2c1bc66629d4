"""ReasonShift: with ``<x>`` the live answer format, reward rises as the policy learns to use it.

Easy letter tasks (reverse or count, levels 1-2), one answer per episode. The warm start
answers in a format drawn uniformly from the three, so at most a third of its correct answers
pay; only reward says which format does. Measured with ``docs/families/learning_tests.py``
(seeds 0, 1, 2; the warm start's mean reward 0.18 on the paired episodes): rises 0.20, 0.17,
0.17 for sao and 0.17, 0.16, 0.14 for grpo; with the learning rate at 1e-12 both rise 0.00
and the test fails. About 37 s of CPU for the warm start and 10 s (sao) and 7 s (grpo) per
run, on one thread. With two turns (a wrong format retried for half the reward) and 300 SFT
steps the rises in 1,024 episodes were 0.05-0.11: too close to any margin worth asserting.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.learning, pytest.mark.xdist_group("learning-reason-shift")]

SETTING = {
    "config": "configs/reason_shift.yaml",
    "overrides": [
        "schedule={parameters: {answer_format: {kind: stationary, value: tags}, "
        "mix: {kind: stationary, value: letters}, difficulty: {kind: stationary, value: easy}}}",
        "env.kwargs={max_turns: 1}",
        "rollout.max_turns=1",
    ],
    "demonstrations": 512,
    "sft_steps": 800,
    "sft_lr": 0.005,
    "sft_batch_size": 32,
    "run": ["budget.episodes=1536"],
}
MARGIN = 0.10


@pytest.mark.parametrize("method", ["sao", "grpo"])
def test_reward_rises_within_1536_episodes(method, learned):
    result = learned(method)
    assert result.rise >= MARGIN, result
