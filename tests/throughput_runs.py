"""Synthetic runs of ``bench throughput`` for the tests of its summary and of its page table."""

from __future__ import annotations


def throughput_run(
    rate: float,
    generation: float,
    learner: float,
    other: float,
    completions: int = 1280,
    updates: int = 20,
) -> dict:
    """One side's run at ``rate`` completions per second, split per update into ``generation``,
    0.01 s of environment, ``learner`` seconds as forward 1/4, backward 1/2 and optimizer 1/4,
    and ``other``."""
    return {
        "completions_per_second": rate,
        "seconds": completions / rate,
        "updates": updates,
        "split": {
            "generation": generation,
            "environment": 0.01,
            "forward": learner / 4,
            "backward": learner / 2,
            "optimizer": learner / 4,
            "other": other,
        },
        "prompt_tokens": 73.31,
        "mean_completion_tokens": 30.6,
    }
