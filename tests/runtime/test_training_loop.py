"""Staleness bookkeeping of the shared training loop, against hand-counted values."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from sao_online.runtime.loop import batch_metrics, staleness_histogram


def trajectory(oldest_version: int, behavior: str = "cute", info=None) -> SimpleNamespace:
    return SimpleNamespace(oldest_version=oldest_version, behavior=behavior, info=info or {})


def test_batch_counts_every_staleness_up_to_the_bound_zeros_included():
    # Trained at version 5: oldest versions 5, 4, 4, 2 are 0, 1, 1 and 3 versions stale.
    batch = [trajectory(5), trajectory(4), trajectory(4, "academic"), trajectory(2)]
    metrics = batch_metrics(batch, trained_version=5, max_staleness=4)
    counts = {k: metrics[f"staleness/count_{k}"] for k in range(5)}
    assert counts == {0: 1.0, 1: 2.0, 2: 0.0, 3: 1.0, 4: 0.0}
    assert "staleness/count_5" not in metrics
    assert metrics["staleness/mean"] == 5 / 4 and metrics["staleness/max"] == 3.0
    assert metrics["charts/behavior_share/cute"] == 0.75


def test_batch_counts_the_episodes_an_env_step_timeout_ended():
    timed_out = {"rollout/truncated_by": "step_timeout"}
    batch = [trajectory(1, "step_timeout", timed_out), trajectory(1), trajectory(1, "x", {})]
    batch.append(trajectory(1, "cute", {"rollout/truncated_by": "turns"}))
    metrics = batch_metrics(batch, trained_version=1)
    assert metrics["charts/env_step_timeouts"] == 1.0
    assert metrics["charts/behavior_share/step_timeout"] == 0.25
    assert batch_metrics([trajectory(1)], trained_version=1)["charts/env_step_timeouts"] == 0.0


def test_batch_counts_extend_past_the_bound_when_seen():
    metrics = batch_metrics([trajectory(0)], trained_version=3, max_staleness=1)
    assert [metrics[f"staleness/count_{k}"] for k in range(4)] == [0.0, 0.0, 0.0, 1.0]


def test_run_histogram_leaves_out_dropped_and_untrained_episodes():
    episodes = pd.DataFrame(
        {
            "staleness": [0, 2, 2, -1, 0, 2, -1],
            "dropped": [False, False, False, True, False, True, False],
        }
    )
    # Dropped rows (index 3 and 5) and the untrained row 6 are left out: {0: 2, 1: 0, 2: 2}.
    histogram = staleness_histogram(episodes)
    assert histogram["staleness"].tolist() == [0, 1, 2]
    assert histogram["episodes"].tolist() == [2, 0, 2]
    assert histogram["share"].tolist() == [0.5, 0.0, 0.5]
    empty = staleness_histogram(pd.DataFrame({"staleness": [-1], "dropped": [True]}))
    assert len(empty) == 0 and list(empty.columns) == ["staleness", "episodes", "share"]
