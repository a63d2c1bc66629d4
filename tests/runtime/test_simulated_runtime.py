"""The simulated runtime: deterministic, the same system as the real ones, and its invariants.

- The same config and seed give the same run (episodes, updates, parameters), also when another
  process keeps a core busy: time is virtual, threads are fixed, evaluation is inline.
- With ``max_staleness`` 0 and free environments it trains exactly as ``sync`` does: one worker
  seeded with the run seed admits one batch per version, so its engine takes the same requests
  in the same rounds as the synchronous engine (bit for bit: same process, same kernels).
- Over random cost models: no trained token is older than the bound, no episode is trained
  before its virtual end, the learner is never in two updates at once, and virtual time never
  runs backwards.
- A run killed with SIGKILL and resumed from its last checkpoint is the run that never stopped.
"""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_model import tiny_overrides

from sao_online.config import ConfigError, load_config
from sao_online.rundir.checkpoints import read_checkpoint
from sao_online.rundir.layout import checkpoint_folders
from sao_online.rundir.runlog import RunLog
from sao_online.runtime.launch import run_experiment

SIMULATED = tiny_overrides(
    "runtime.backend=simulated",
    "runtime.num_workers=2",
    "runtime.max_staleness=2",
    "rollout.max_turns=2",
    "rollout.max_action_tokens=6",
    "rollout.on_action_cap=submit",
    "algorithm.critic_warmup_steps=1",
    "env.latency_mean=0.3",
    "budget.episodes=48",
    "eval.every_updates=2",
    "eval.episodes_per_phase=2",
    "logging.checkpoint_every=0",
)
# Every row of these tables but the real seconds the run took.
REAL_TIME_COLUMNS = (
    "sim/real_seconds",
    "sim/learner_real_seconds",
    "sim/learner_policy_real_seconds",
    "sim/learner_critic_real_seconds",
)


def tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    log = RunLog(run_dir)
    updates = log.read("updates").drop(columns=list(REAL_TIME_COLUMNS))
    return {"episodes": log.read("episodes"), "updates": updates, "evals": log.read("evals")}


def final_parameters(run_dir: Path) -> dict[str, torch.Tensor]:
    state, _ = read_checkpoint(checkpoint_folders(run_dir)[0])
    return state["learner"]["policy"]


def _burn(stop: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@pytest.mark.e2e
def test_a_simulated_run_is_the_same_run_twice_also_under_load(tmp_path):
    config = load_config(None, SIMULATED)
    run_experiment(config, tmp_path / "quiet")
    stop = multiprocessing.get_context("spawn").Event()
    burner = multiprocessing.get_context("spawn").Process(target=_burn, args=(stop,))
    burner.start()
    try:
        run_experiment(config, tmp_path / "loaded")
    finally:
        stop.set()
        burner.join()
    quiet, loaded = tables(tmp_path / "quiet"), tables(tmp_path / "loaded")
    for name in quiet:
        pd.testing.assert_frame_equal(quiet[name], loaded[name], check_exact=True)
    assert (quiet["episodes"]["staleness"] > 0).any()  # it was asynchronous
    assert len(quiet["evals"]) > 0
    for name, tensor in final_parameters(tmp_path / "quiet").items():
        assert torch.equal(tensor, final_parameters(tmp_path / "loaded")[name]), name


def test_max_staleness_zero_trains_exactly_as_sync(tmp_path):
    common = tiny_overrides(
        "runtime.num_workers=1",
        "runtime.max_staleness=0",
        "runtime.torch_threads=1",
        "runtime.sim.env_call_seconds=0",
        "rollout.max_turns=2",
        "rollout.max_action_tokens=6",
        "rollout.on_action_cap=submit",
        "algorithm.critic_warmup_steps=1",
        "budget.episodes=32",
        "eval.every_updates=0",
        "logging.checkpoint_every=0",
    )
    run_experiment(load_config(None, [*common, "runtime.backend=sync"]), tmp_path / "sync")
    run_experiment(load_config(None, [*common, "runtime.backend=simulated"]), tmp_path / "sim")
    sync, simulated = RunLog(tmp_path / "sync"), RunLog(tmp_path / "sim")
    columns = ["reward", "num_tokens", "num_action_tokens", "prompt_id", "policy_version"]
    pd.testing.assert_frame_equal(
        sync.read("episodes")[columns], simulated.read("episodes")[columns], check_exact=True
    )
    losses = [c for c in sync.read("updates") if c.startswith("losses/")]
    pd.testing.assert_frame_equal(
        sync.read("updates")[losses], simulated.read("updates")[losses], check_exact=True
    )
    expected = final_parameters(tmp_path / "sync")
    for name, tensor in final_parameters(tmp_path / "sim").items():
        assert torch.equal(tensor, expected[name]), name


costs = st.fixed_dictionaries(
    {
        "decode_step_seconds": st.floats(1e-4, 0.05),
        "decode_slot_seconds": st.floats(0, 0.01),
        "decode_cached_token_seconds": st.floats(0, 1e-4),
        "prefill_token_seconds": st.floats(0, 1e-3),
        "env_call_seconds": st.floats(0, 0.5),
        "learner_update_seconds": st.floats(1e-3, 2.0),
        "learner_policy_token_seconds": st.floats(0, 1e-3),
        "learner_critic_token_seconds": st.floats(0, 1e-3),
        "publish_seconds": st.floats(0, 0.5),
    }
)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(costs=costs, staleness=st.integers(0, 3), method=st.sampled_from(["sao", "grpo"]))
def test_invariants_hold_under_any_cost_model(tmp_path, costs, staleness, method):
    overrides = [
        *SIMULATED,
        f"runtime.max_staleness={staleness}",
        f"algorithm.name={method}",
        "rollout.batch_size=8",
        "budget.episodes=40" if method == "sao" else "budget.episodes=48",
        "eval.every_updates=0",
        *(f"runtime.sim.{field}={value!r}" for field, value in costs.items()),
    ]
    out = tmp_path / f"{method}-{staleness}-{abs(hash(tuple(costs.values())))}"
    run_experiment(load_config(None, overrides), out)
    log = RunLog(out)
    episodes, updates = log.read("episodes"), log.read("updates")
    trained = episodes[~episodes["dropped"]]
    assert (trained["staleness"] <= staleness).all()
    assert (trained["finished_time"] <= trained["wall_time"] + 1e-9).all()
    times = updates["wall_time"].to_numpy()
    assert (times[1:] >= times[:-1]).all()
    starts = times - updates["charts/learner_seconds"].to_numpy()
    assert (starts[1:] >= times[:-1] - 1e-9).all()  # one update at a time


def test_a_cost_model_that_cannot_move_time_is_refused():
    for field in ("decode_step_seconds", "learner_update_seconds"):
        with pytest.raises(ConfigError, match=rf"^runtime\.sim\.{field}: must be in \(0, "):
            load_config(None, [*SIMULATED, f"runtime.sim.{field}=0"])
    with pytest.raises(ConfigError, match=r"^runtime\.sim\.publish_seconds: must be in \[0, "):
        load_config(None, [*SIMULATED, "runtime.sim.publish_seconds=-1"])


def test_workers_beyond_memory_are_refused_with_the_estimate(tmp_path):
    config = load_config(
        None,
        [
            *SIMULATED,
            "runtime.num_workers=4096",
            "rollout.num_slots=4096",
            "rollout.batch_size=4096",
            "rollout.max_episode_tokens=2048",
            "budget.episodes=8192",
        ],
    )
    with pytest.raises(ConfigError, match=r"^runtime\.num_workers: 4096 simulated workers .* GiB"):
        run_experiment(config, tmp_path / "run")


KILLED_RUN = """
import sys
from sao_online.config import load_config
from sao_online.runtime.launch import run_experiment

if __name__ == "__main__":
    run_experiment(load_config(None, sys.argv[2:]), sys.argv[1])
"""


@pytest.mark.e2e
def test_a_run_killed_and_resumed_goes_on_as_the_run_never_stopped(tmp_path):
    overrides = [
        *SIMULATED,
        "budget.episodes=400",
        "eval.every_updates=10",
        "logging.checkpoint_every=5",
    ]
    run_experiment(load_config(None, overrides), tmp_path / "whole")
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    killed = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, str(script), str(killed), *overrides])
    try:
        deadline = time.monotonic() + 300
        while not (killed / "checkpoints" / "step-000010").exists():
            assert child.poll() is None, "the run ended before its second checkpoint"
            assert time.monotonic() < deadline, "no second checkpoint within 300 s"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    assert len(RunLog(killed).read("updates")) < 50  # it was stopped before its end
    run_experiment(load_config(None, overrides), killed, resume=True)
    whole, resumed = tables(tmp_path / "whole"), tables(killed)
    for name in whole:
        pd.testing.assert_frame_equal(whole[name], resumed[name], check_exact=True)
    for name, tensor in final_parameters(tmp_path / "whole").items():
        assert torch.equal(tensor, final_parameters(killed)[name]), name


def test_a_run_stopped_by_ctrl_c_and_resumed_is_the_run_never_stopped(tmp_path):
    overrides = [*SIMULATED, "budget.episodes=96", "logging.checkpoint_every=4"]
    run_experiment(load_config(None, overrides), tmp_path / "whole")
    seen = [0]

    def press_ctrl_c(episodes: int) -> None:
        seen[0] += episodes
        if seen[0] == 6 * 8:  # after the sixth update: two past the checkpoint at version 4
            signal.raise_signal(signal.SIGINT)

    stopped = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(load_config(None, overrides), stopped, progress_callback=press_ctrl_c)
    assert [p.name for p in checkpoint_folders(stopped)] == ["step-000004"]  # none of its own
    run_experiment(load_config(None, overrides), stopped, resume=True)
    whole, resumed = tables(tmp_path / "whole"), tables(stopped)
    for name in whole:
        pd.testing.assert_frame_equal(whole[name], resumed[name], check_exact=True)
