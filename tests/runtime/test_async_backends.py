"""Both asynchronous backends end to end: ``local`` (worker processes) and ``ray`` (actors).

One local Ray instance with two CPUs serves the module's Ray tests (starting one takes seconds;
they share an xdist group, so ``make test`` starts it once, on one worker, and not at all for
the local tests); the runtime uses an already initialised Ray as it is and leaves it running.
Every Ray run starts its actors afresh (a few seconds of imports), so each test checks several
things on one run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pandas as pd
import pytest
import ray
from tiny_model import tiny_overrides

from sao_online.config import ConfigError, load_config
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.launch import run_experiment

pytestmark = pytest.mark.e2e

TINY = tiny_overrides(
    "runtime.num_workers=2",
    "algorithm.critic_warmup_steps=0",
    "logging.checkpoint_every=0",
)
#: The module's Ray tests run on one xdist worker, the one whose Ray instance they use.
ON_THE_MODULES_RAY = pytest.mark.xdist_group("async-backends-ray")
BACKENDS = ["local", pytest.param("ray", marks=ON_THE_MODULES_RAY)]
#: Workers of the fault tests (kill, interrupt), which start every worker twice. A Ray actor
#: imports torch and transformers afresh (about 5 s); the local backend's workers come from a
#: preloaded forkserver. Several actors at once are exercised by the tests before them.
FAULT_TEST_WORKERS = {"local": 2, "ray": 1}


@pytest.fixture(scope="module")
def local_ray():
    # address="local": a new instance even where another process's cluster is up (a bare
    # ray.init() joins the last cluster `ray start` or cluster_utils announced).
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def backend(request):
    """The backend under test (parametrized); the module's Ray is started for ``ray``."""
    if request.param == "ray":
        request.getfixturevalue("local_ray")
    return request.param


def tiny(backend: str, *overrides: str):
    return load_config(None, TINY + [f"runtime.backend={backend}", *overrides])


def read_table(run_dir: str | Path, table: str) -> pd.DataFrame:
    return RunLog(run_dir).read(table)


def parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:  # the command may hold spaces and parentheses
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def descends_from_this_process(pid: int) -> bool:
    try:
        while pid > 1:
            pid = parent_pid(pid)
            if pid == os.getpid():
                return True
    except OSError:  # a process on the way up ended
        return False
    return False


def rollout_worker_pids(backend: str) -> list[int]:
    """The live rollout workers: our child processes, or the processes Ray titled after our
    actor under this process (the Ray instance it started). Other Ray instances on the machine,
    e.g. those of tests running beside this one, keep their actors."""
    if backend == "local":
        return [
            p.pid for p in multiprocessing.active_children() if p.name.startswith("sao-rollout")
        ]
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if not handle.read().startswith(b"ray::RolloutActor"):
                    continue
        except OSError:
            continue
        if descends_from_this_process(int(entry)):
            pids.append(int(entry))
    return pids


def assert_workers_stopped(backend: str) -> None:
    if backend == "local":  # Ray reaps killed actors in its own time
        assert not rollout_worker_pids(backend)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_sao_spends_its_budget_within_the_staleness_bound(tmp_path, backend):
    summary = run_experiment(
        tiny(backend, "budget.episodes=48", "runtime.max_staleness=1"), tmp_path, threads=1
    )
    episodes, updates = read_table(tmp_path, "episodes"), read_table(tmp_path, "updates")
    assert summary["updates"] == 6 and updates["version"].tolist() == [1, 2, 3, 4, 5, 6]
    assert len(episodes) == 48 and not episodes["dropped"].any()
    assert episodes["episode"].tolist() == list(range(48))
    # Every planned episode was trained exactly once (SAO: one plan per prompt).
    assert sorted(episodes["prompt_id"]) == list(range(48))
    assert episodes["staleness"].between(0, 1).all() and updates["staleness/max"].max() <= 1
    # Asynchrony happened: with max_staleness 1 the workers run ahead by a version.
    assert (episodes["staleness"] == 1).any()
    # The run's staleness histogram: per update in updates.parquet, whole run in a CSV.
    histogram = pd.read_csv(Path(tmp_path) / "staleness_histogram.csv")
    expected = episodes["staleness"].value_counts().sort_index()
    assert histogram["staleness"].tolist() == [0, 1]
    assert histogram["episodes"].tolist() == expected.tolist()
    assert [updates[f"staleness/count_{k}"].sum() for k in (0, 1)] == expected.tolist()
    assert_workers_stopped(backend)
    if backend == "ray":
        assert ray.is_initialized()  # a Ray the run did not start is left running


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_group_method_trains_whole_groups_only(tmp_path, backend):
    run_experiment(
        tiny(
            backend,
            "algorithm.name=grpo",
            "algorithm.group_size=4",
            "budget.episodes=32",
            "runtime.max_staleness=2",
        ),
        tmp_path,
        threads=1,
    )
    episodes = read_table(tmp_path, "episodes")
    assert len(episodes) == 32
    # Rows are logged in training order, B = 8 per update: each update holds whole groups.
    for update in range(4):
        rows = episodes.iloc[8 * update : 8 * (update + 1)]
        assert rows.groupby("group_id").size().tolist() == [4, 4], rows["group_id"].tolist()
    assert episodes["staleness"].between(0, 2).all()


#: With these settings the simulated latency of the first env step of each of the run's 16
#: plans is under 1 s, except plan 1's: 232 s (its re-run's: 0.001 s). Checked by the test.
STRAGGLER_RUN = [
    "seed=46220",
    "budget.episodes=16",
    "rollout.batch_size=4",
    "runtime.max_staleness=1",
    "runtime.num_workers=1",
    "env.latency_mean=0.1",
    "env.latency_sigma=2.5",
    "rollout.on_action_cap=submit",  # every episode steps its env once
    "runtime.stragglers=requeue",
]


def first_step_latencies(config) -> dict[tuple[int, int], float]:
    """(plan, attempt) -> the simulated latency of its first env step."""
    from sao_online.config.run_schedule import resolve_schedule
    from sao_online.runtime.envs import make_env
    from sao_online.runtime.scheduling.planner import EpisodePlanner

    planner = EpisodePlanner(resolve_schedule(config), group_size=1, seed=config.seed)
    latencies = {}
    while planner.can_start_group(config.budget.episodes):
        [plan] = planner.next_group()
        for attempt in (0, 1):
            env = make_env(config, seed=plan.seed, attempt=attempt)
            latencies[plan.prompt_id, attempt] = env.sample_latency()
    return latencies


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_straggler_the_learner_would_wait_for_is_stopped_logged_and_run_again(tmp_path, backend):
    config = tiny(backend, *STRAGGLER_RUN)
    latencies = first_step_latencies(config)
    assert latencies.pop((1, 0)) > 200 and max(latencies.values()) < 1, "pick another seed"
    summary = run_experiment(config, tmp_path, threads=1)
    episodes, updates = read_table(tmp_path, "episodes"), read_table(tmp_path, "updates")
    dropped, trained = episodes[episodes["dropped"]], episodes[~episodes["dropped"]]
    # Waiting would have held the learner for minutes; plan 1 was stopped and run again.
    assert 1 in set(dropped["prompt_id"]) and (dropped["dropped_reason"] == "stale").all()
    straggler = dropped[dropped["prompt_id"] == 1].iloc[0]
    # Its row holds what it spent before it was stopped: its action, but no env step.
    assert straggler["num_action_tokens"] > 0 and straggler["env_steps"] == 0
    assert dropped["reward"].isna().all() and (trained["dropped_reason"] == "").all()
    # The budget is exact: every plan trained once; no trained token older than the bound.
    assert summary["episodes"] == 16 and summary["dropped_episodes"] == len(dropped)
    assert sorted(trained["prompt_id"]) == list(range(16))
    assert trained["staleness"].between(0, 1).all()
    assert updates["charts/requeued_stale_total"].iloc[-1] == len(dropped)
    assert episodes["episode"].tolist() == list(range(len(episodes)))
    assert_workers_stopped(backend)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_killed_workers_are_replaced_and_their_episodes_logged_as_dropped(
    tmp_path, backend, caplog
):
    # Latency keeps episodes in flight for a while, so the kill finds plans to drop.
    config = tiny(
        backend,
        f"runtime.num_workers={FAULT_TEST_WORKERS[backend]}",
        "budget.episodes=32",
        "env.latency_mean=0.15",
        "env.latency_sigma=0.5",
        "runtime.max_staleness=1",
    )
    killed: list[int] = []

    def kill_every_worker_after_the_first_update(episodes: int) -> None:
        # After one update of B = 8 the gate has admitted up to 2 B: the workers hold episodes.
        if not killed:
            for pid in rollout_worker_pids(backend):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    summary = run_experiment(
        config, tmp_path, threads=1, progress_callback=kill_every_worker_after_the_first_update
    )
    assert killed, "the test never found a worker to kill"
    episodes, updates = read_table(tmp_path, "episodes"), read_table(tmp_path, "updates")
    dropped, trained = episodes[episodes["dropped"]], episodes[~episodes["dropped"]]
    assert len(dropped) >= 1 and dropped["reward"].isna().all()
    # The summary counts trained episodes (the budget) and dropped rows apart.
    assert summary["episodes"] == 32 and summary["dropped_episodes"] == len(dropped)
    # The budget is still met: every plan trained exactly once, dropped ones included.
    assert sorted(trained["prompt_id"]) == list(range(32))
    assert set(dropped["prompt_id"]) <= set(trained["prompt_id"])
    assert updates["charts/worker_restarts"].max() >= 1
    assert episodes["episode"].tolist() == list(range(len(episodes)))
    assert_workers_stopped(backend)
    if backend == "ray":
        assert "rollout actor" in caplog.text and "died" in caplog.text  # and why is logged


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_interrupted_run_resumes_without_losing_or_repeating_episodes(tmp_path, backend):
    config = tiny(
        backend,
        f"runtime.num_workers={FAULT_TEST_WORKERS[backend]}",
        "budget.episodes=32",
        "runtime.max_staleness=2",
    )
    updates_done = []

    def interrupt_after_first_update(episodes: int) -> None:
        updates_done.append(episodes)
        if len(updates_done) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, mid-run

    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, tmp_path, threads=1, progress_callback=interrupt_after_first_update)
    assert updates_done == [8]
    assert_workers_stopped(backend)
    summary = run_experiment(config, tmp_path, resume=True, threads=1)
    episodes, updates = read_table(tmp_path, "episodes"), read_table(tmp_path, "updates")
    assert summary["updates"] == 4 and updates["version"].tolist() == [1, 2, 3, 4]
    # Plans admitted before the interrupt but not trained were issued again after it.
    assert sorted(episodes["prompt_id"]) == list(range(32))
    assert episodes["episode"].tolist() == list(range(32))


@ON_THE_MODULES_RAY
def test_more_ray_workers_than_ray_cpus_is_a_named_error(local_ray, tmp_path):
    with pytest.raises(ConfigError, match=r"runtime.num_workers: 3 actors need one CPU each"):
        run_experiment(
            tiny("ray", "budget.episodes=8", "runtime.num_workers=3"), tmp_path, threads=1
        )


@ON_THE_MODULES_RAY
def test_ray_actor_the_cluster_cannot_place_stops_the_run_with_a_named_error(
    local_ray, tmp_path, monkeypatch
):
    import sao_online.runtime.workers.ray_backend as ray_backend

    monkeypatch.setattr(ray_backend, "_SCHEDULE_SECONDS", 3.0)

    @ray.remote(num_cpus=1)
    class Squatter:  # holds one of the two CPUs, so the second rollout actor cannot be placed
        pass

    squatter = Squatter.remote()
    ray.get(squatter.__ray_ready__.remote())
    try:
        # One CPU is free for two actors: Ray places one of them (not always the first), the
        # other never starts; the placed one may also still be importing at the short deadline.
        with pytest.raises(
            RuntimeError,
            match=r"rollout actors \[(0|1|0, 1)\] were not placed "
            r"and started .* 0 CPUs free",
        ):
            run_experiment(tiny("ray", "budget.episodes=16"), tmp_path, threads=1)
    finally:
        ray.kill(squatter)
