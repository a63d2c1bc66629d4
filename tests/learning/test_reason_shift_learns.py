"""ReasonShift: with ``<x>`` the live answer format, reward rises as the policy learns to use it.

Easy letter tasks (reverse or count, levels 1-2), one answer per episode. The warm start
answers in a format drawn uniformly from the three, so at most a third of its correct answers
pay; only reward says which format does. GRPO trains on groups of 8, so per episode it sees an
eighth of the prompts SAO sees: it gets 3,072 episodes, SAO 1,536. Measured over six draws (the
kept warm start and the one kept before it, seeds 0, 1, 2; warm-start mean reward 0.17 and
0.22): SAO rises 0.13-0.27 in 1,536 episodes; GRPO 0.03-0.13 in 1,536 (too close to any margin
worth asserting) and 0.09-0.24 in 3,072. With the learning rate at 1e-12 both rise 0.00 and the
test fails. About 10 s (sao) and 15 s (grpo) per run, on one thread. With two turns (a wrong
format retried for half the reward) and 300 SFT steps the rises in 1,024 episodes were
0.05-0.11.
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
MARGIN = 0.08


@pytest.mark.parametrize(("method", "run"), [("sao", []), ("grpo", ["budget.episodes=3072"])])
def test_reward_rises(method, run, learned):
    result = learned(method, run=run)
    assert result.rise >= MARGIN, result
