"""StyleShift: with cute the rewarded style, reward rises as the policy learns to write cute.

The warm start writes competent lines in a style drawn uniformly from the offered pool
(academic, cute, chuunibyou) and earns about a fifth of the oracle (some lines are
malformed, most of the rest are in a style that does not pay); only reward says which style
pays. Measured with ``docs/families/learning_tests.py`` (seeds 0, 1, 2; the warm start's mean
reward 0.20 on the paired episodes): rises 0.25, 0.24, 0.27 for sao and 0.28, 0.23, 0.17 for
grpo; with the learning rate at 1e-12 both rise 0.00 and the test fails. About 33 s of CPU for
the warm start and 7 s (sao) and 4 s (grpo) per run, on one thread.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.learning, pytest.mark.xdist_group("learning-style-shift")]

SETTING = {
    "config": "configs/smoke.yaml",
    "overrides": [
        "schedule={parameters: {preferred: {kind: stationary, value: cute}, "
        "pool: {kind: stationary, value: academic_cute_chuunibyou}}}",
    ],
    "demonstrations": 512,
    "sft_steps": 400,
    "sft_lr": 0.006,
    "sft_batch_size": 32,
    "run": ["budget.episodes=512"],
}
MARGIN = 0.10


@pytest.mark.parametrize("method", ["sao", "grpo"])
def test_reward_rises_within_512_episodes(method, learned):
    result = learned(method)
    assert result.rise >= MARGIN, result
