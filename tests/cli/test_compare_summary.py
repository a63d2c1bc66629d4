"""What ``compare`` ends with: a results table per method and phase, and the next command."""

from __future__ import annotations

import pandas as pd
import pytest

from sao_online.cli import main
from sao_online.commands.compare_summary import phase_rewards


def test_phase_rewards_average_each_phase_and_its_last_quarter_over_seeds():
    rows = []
    for seed, rewards in ((0, [0, 0, 0, 1, 1, 1, 1, 1]), (1, [0, 0, 1, 1, 0, 0, 0, 0])):
        for episode, reward in enumerate(rewards):
            rows.append(
                {
                    "method": "sao",
                    "seed": seed,
                    "phase": episode // 4,
                    "world_time": float(episode),
                    "reward": float(reward),
                    "dropped": False,
                }
            )
    rows.append({**rows[-1], "reward": 100.0, "dropped": True})  # never counted
    table = phase_rewards(pd.DataFrame(rows)).set_index("phase")
    # phase 0: seed 0 mean 0.25 (last quarter: the 4th episode, 1), seed 1 mean 0.5 (1)
    assert table.loc[0, "mean"] == pytest.approx((0.25 + 0.5) / 2)
    assert table.loc[0, "end"] == pytest.approx(1.0)
    # phase 1: seed 0 mean 1 (end 1), seed 1 mean 0 (end 0)
    assert table.loc[1, "mean"] == pytest.approx(0.5) and table.loc[1, "end"] == pytest.approx(0.5)
    assert (table["seeds"] == 2).all()


@pytest.mark.e2e
def test_compare_without_out_uses_logging_out_and_ends_with_results_and_the_next_step(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    args = ["compare", "smoke", "--methods", "sao_running_mean,grpo", "--seeds", "1"]
    args += ["--parallel", "1", "--set", "model.warm_start=false"]
    args += ["--set", "budget.episodes=32", "--set", "schedule.parameters.preferred.at=[0, 16]"]
    assert main(args) == 0
    out = capsys.readouterr().out
    experiment = tmp_path / "runs" / "smoke"  # logging.out of the config: runs
    assert (experiment / "grpo" / "seed-0" / "episodes.parquet").is_dir()
    lines = out.splitlines()
    assert lines[0] == "runs in runs/smoke"
    header = next(line for line in lines if line.startswith("method"))
    assert header.split() == [
        "method",
        "seeds",
        "phase",
        "0:",
        "preferred=cute",
        "phase",
        "1:",
        "preferred=chuunibyou",
    ]
    rows = {line.split()[0]: line for line in lines[lines.index(header) + 1 :] if line.strip()}
    assert {"sao_running_mean", "grpo"} <= set(rows)
    assert rows["grpo"].split()[1] == "1" and "(end " in rows["grpo"]
    assert lines[-1].startswith("Next: sao-online report runs/smoke ")
