"""The ``ray`` backend end to end on a local Ray instance with two CPUs.

One Ray instance serves the whole module (starting one takes seconds); the runtime uses an
already initialised Ray as it is and leaves it running. Each run starts its actors afresh, so
every test checks several things on one run.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
import ray

from sao_online.config import ConfigError, load_config
from sao_online.runtime.launch import run_experiment

TINY = ["model.warm_start=false", "model.num_layers=2", "model.hidden_size=64",
        "rollout.max_turns=1", "rollout.max_action_tokens=12", "rollout.max_episode_tokens=128",
        "rollout.batch_size=8", "runtime.backend=ray", "runtime.num_workers=2",
        "algorithm.critic_warmup_steps=0", "logging.checkpoint_every=0"]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def read_table(run_dir: str | Path, table: str) -> pd.DataFrame:
    parts = sorted((Path(run_dir) / f"{table}.parquet").glob("part-*.parquet"))
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def rollout_actor_pids() -> list[int]:
    """Processes whose title Ray set to one of our actors' (``ray::RolloutActor...``)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if handle.read().startswith(b"ray::RolloutActor"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def test_sao_on_ray_spends_its_budget_within_the_staleness_bound(tmp_path):
    config = load_config(None, TINY + ["budget.episodes=48", "runtime.max_staleness=1"])
    summary = run_experiment(config, tmp_path, threads=1)
    episodes, updates = read_table(tmp_path, "episodes"), read_table(tmp_path, "updates")
    assert summary["updates"] == 6 and updates["version"].tolist() == [1, 2, 3, 4, 5, 6]
    assert len(episodes) == 48 and not episodes["dropped"].any()
    assert sorted(episodes["prompt_id"]) == list(range(48))  # every plan trained exactly once
    assert episodes["staleness"].between(0, 1).all()
    assert (episodes["staleness"] == 1).any()  # the actors ran ahead of the learner
    assert ray.is_initialized()  # a Ray the run did not start is left running
    assert not rollout_actor_pids() or _gone_soon()


def _gone_soon(seconds: float = 5.0) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not rollout_actor_pids():
            return True
        time.sleep(0.1)
    return False


def test_group_method_on_ray_trains_whole_groups(tmp_path):
    config = load_config(None, TINY + ["algorithm.name=grpo", "algorithm.group_size=4",
                                       "budget.episodes=32", "runtime.max_staleness=2"])
    run_experiment(config, tmp_path, threads=1)
    episodes = read_table(tmp_path, "episodes")
    assert len(episodes) == 32
    for update in range(4):  # rows are logged in training order, B = 8 per update
        rows = episodes.iloc[8 * update: 8 * (update + 1)]
        assert rows.groupby("group_id").size().tolist() == [4, 4], rows["group_id"].tolist()
    assert episodes["staleness"].between(0, 2).all()


def test_killed_actor_is_replaced_and_its_episodes_are_logged_as_dropped(tmp_path, caplog):
    # Latency keeps episodes in flight for a while, so the kill finds plans to drop.
    config = load_config(None, TINY + ["budget.episodes=32", "env.latency_mean=0.15",
                                       "env.latency_sigma=0.5", "runtime.max_staleness=1"])
    killed: list[int] = []

    def kill_every_actor_after_the_first_update(episodes: int) -> None:
        # After one update of B = 8 the gate has admitted up to 2 B: the actors hold episodes.
        if not killed:
            for pid in rollout_actor_pids():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    run_experiment(config, tmp_path, threads=1,
                   progress_callback=kill_every_actor_after_the_first_update)
    assert killed, "the test never found an actor to kill"
    episodes, updates = read_table(tmp_path, "episodes"), read_table(tmp_path, "updates")
    dropped, trained = episodes[episodes["dropped"]], episodes[~episodes["dropped"]]
    assert len(dropped) >= 1 and dropped["reward"].isna().all()
    assert sorted(trained["prompt_id"]) == list(range(32))  # the budget is still met
    assert set(dropped["prompt_id"]) <= set(trained["prompt_id"])
    assert updates["charts/worker_restarts"].max() >= 1
    assert episodes["episode"].tolist() == list(range(len(episodes)))
    assert "rollout actor" in caplog.text and "died" in caplog.text  # and why is logged


def test_interrupted_ray_run_resumes_without_losing_or_repeating_episodes(tmp_path):
    config = load_config(None, TINY + ["budget.episodes=32", "runtime.max_staleness=2"])
    updates_done = []

    def interrupt_after_first_update(episodes: int) -> None:
        updates_done.append(episodes)
        if len(updates_done) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, mid-run

    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, tmp_path, threads=1, progress_callback=interrupt_after_first_update)
    assert updates_done == [8]
    summary = run_experiment(config, tmp_path, resume=True, threads=1)
    episodes, updates = read_table(tmp_path, "episodes"), read_table(tmp_path, "updates")
    assert summary["updates"] == 4 and updates["version"].tolist() == [1, 2, 3, 4]
    assert sorted(episodes["prompt_id"]) == list(range(32))
    assert episodes["episode"].tolist() == list(range(32))


def test_more_workers_than_ray_cpus_is_a_named_error(tmp_path):
    config = load_config(None, TINY + ["budget.episodes=8", "runtime.num_workers=3"])
    with pytest.raises(ConfigError, match=r"runtime.num_workers: 3 actors need one CPU each"):
        run_experiment(config, tmp_path, threads=1)
