"""A plan's time and memory come from the plan (runs x budget x model size), checked against
hand-computed numbers, and a plan beyond the machine is refused naming the option."""

from __future__ import annotations

import pytest

from sao_online.config import ConfigError, load_config
from sao_online.runtime.host.plan_fit import (
    BASE_PROCESS_BYTES,
    MAX_PLAN_SECONDS,
    Bootstrap,
    PlanFlags,
    RunGroup,
    check_count,
    check_plan_fits,
    estimate_plan,
    model_shape,
    run_memory_bytes,
)
from sao_online.util.units import format_bytes, format_duration

FLAGS = PlanFlags(runs="--seeds", size="--set", parallel="--parallel", reps="--reps")


def _config(**sections):
    base = {
        "model": {"num_layers": 2, "hidden_size": 64},
        "rollout": {"batch_size": 16, "num_slots": 16, "max_episode_tokens": 128},
        "runtime": {"backend": "sync"},
        "regularizers": {"kl_coef": 0.0},
        "budget": {"episodes": 64},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return load_config(base)


def test_the_tiny_models_memory_by_hand():
    config = _config()
    assert model_shape(config).parameters == 2 * 16 * 64**2 + 259 * 64 == 147_648
    weights = 147_648 * 4
    learner = weights * 4  # weights, gradients, Adam's two moments; no critic, no KL copy
    caches = 16 * 128 * 2 * 64 * 2 * 4  # slots x tokens x layers x hidden x (k, v) x 4 bytes
    logits = 16 * 128 * 259 * 4 * 2
    assert run_memory_bytes(config, uses_critic=False) == BASE_PROCESS_BYTES + learner + (
        caches + logits
    )
    assert run_memory_bytes(config, uses_critic=True) == BASE_PROCESS_BYTES + 2 * learner + (
        caches + logits
    )
    assert run_memory_bytes(config, uses_critic=True, updates_policy=False) == (
        BASE_PROCESS_BYTES + weights + caches + logits
    )
    local = _config(runtime={"backend": "local", "num_workers": 2})
    assert run_memory_bytes(local, uses_critic=False) == run_memory_bytes(
        config, uses_critic=False
    ) + 2 * (BASE_PROCESS_BYTES + weights + caches)


def test_time_is_runs_times_budget_times_model_size():
    config = _config()
    # episodes x tokens x (1.9e-5 + 5.7e-10 x layers x hidden^2) x weight, plus 6 s per run
    one = 64 * 128 * (1.9e-5 + 5.7e-10 * 2 * 64**2) * 2 + 6.0
    group = RunGroup("T sao_running_mean", config, 2, False, True, runs=3)
    estimate = estimate_plan([group], cores=2, machine_memory=2**40)
    assert estimate.runs == 3
    assert estimate.cpu_seconds == pytest.approx(3 * one)
    assert estimate.wall_seconds == pytest.approx(3 * one / 2)
    bigger = estimate_plan(
        [RunGroup("T", _config(budget={"episodes": 640}), 2, False, True, runs=3)],
        cores=2,
        machine_memory=2**40,
    )
    assert bigger.cpu_seconds - 3 * 6.0 == pytest.approx(10 * (estimate.cpu_seconds - 3 * 6.0))
    # a run that spends a quarter of the budget (a control from a late shift) costs a quarter
    quarter = RunGroup("T control", config, 2, False, True, runs=3, share=0.25)
    part = estimate_plan([quarter], cores=2, machine_memory=2**40)
    assert part.cpu_seconds == pytest.approx(3 * ((one - 6.0) / 4 + 6.0))


def test_the_runs_at_once_are_the_largest_the_cores_hold():
    small, large = _config(), _config(model={"hidden_size": 128})
    groups = [
        RunGroup("small", small, 2, False, True, runs=5),
        RunGroup("large", large, 2, False, True, runs=1),
    ]
    estimate = estimate_plan(groups, cores=2, machine_memory=2**40)
    assert estimate.at_once == 2
    assert estimate.runs_memory == run_memory_bytes(small, False) + run_memory_bytes(large, False)
    assert estimate.largest_run == ("large", run_memory_bytes(large, False))
    wide = [RunGroup("wide", small, 2, False, True, runs=4, cpus=2)]
    assert estimate_plan(wide, cores=4, machine_memory=2**40).at_once == 2


def test_the_bootstrap_follows_reps_and_scores():
    # per replication: 61 thresholds per score, two stratum x stratum win-rate arrays, resamples
    assert Bootstrap(reps=100, scores=30, stratum=6).bytes() == 100 * (30 * 61 + 2 * 36 + 60) * 8


def test_a_plan_beyond_the_machine_names_the_option():
    config = _config()
    one = RunGroup("T sao", config, 4, True, True, runs=1)
    fits = estimate_plan([one], cores=2, machine_memory=2**40)
    check_plan_fits(fits, FLAGS)  # nothing to refuse
    many = estimate_plan([RunGroup("T sao", config, 4, True, True, runs=10**6)], cores=2)
    with pytest.raises(ConfigError, match=r"^--seeds: the plan \(1000000 runs\) takes about"):
        check_plan_fits(many, FLAGS)
    huge = _config(budget={"episodes": 10**9}, model={"hidden_size": 4096, "num_layers": 64})
    long_run = estimate_plan([RunGroup("T sao", huge, 4, True, True, runs=1)], cores=2)
    with pytest.raises(ConfigError, match=r"^--set: one run of T sao takes about .* years"):
        check_plan_fits(long_run, FLAGS)
    small_machine = estimate_plan([one], cores=2, machine_memory=BASE_PROCESS_BYTES)
    with pytest.raises(ConfigError, match=r"^--set: one run of T sao needs about 6\d\d MB"):
        check_plan_fits(small_machine, FLAGS)
    memory = run_memory_bytes(config, True)
    two_at_once = estimate_plan(
        [RunGroup("T sao", config, 4, True, True, runs=2)],
        cores=2,
        machine_memory=int(1.5 * memory),
    )
    with pytest.raises(ConfigError, match=r"^--parallel: 2 runs at once need about"):
        check_plan_fits(two_at_once, FLAGS)
    bootstrap = estimate_plan(
        [one], cores=2, machine_memory=2**33, bootstrap=Bootstrap(10**6, 10**3, 10**3)
    )
    with pytest.raises(ConfigError, match=r"^--reps: the bootstrap needs about .* GB"):
        check_plan_fits(bootstrap, FLAGS)
    assert MAX_PLAN_SECONDS == 30 * 86400


def test_counts_and_units_in_words():
    assert check_count("--seeds", 3, 1, 10) == 3
    for bad in (0, 11, 2.5, True, "3"):
        with pytest.raises(ConfigError, match=r"^--seeds: must be an integer in \[1, 10\], got"):
            check_count("--seeds", bad, 1, 10)
    assert format_duration(45) == "45 s"
    assert format_duration(600) == "10 min"
    assert format_duration(4 * 3600) == "4.0 h"
    assert format_duration(5 * 86400) == "5.0 days"
    assert format_duration(1000 * 365.25 * 86400) == "1e+03 years"
    assert format_bytes(580 * 2**20) == "580 MB"
    assert format_bytes(3.1 * 2**30) == "3.1 GB"
