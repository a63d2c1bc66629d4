"""``sao-online sim fit`` and ``sim compare`` on real runs: a local run's timings give a cost
model the simulated runtime runs on, and the two runs are described side by side (the steps of
docs/guides/simulated-runtime.md, on a smaller config than the demo)."""

from __future__ import annotations

import json

import pytest
import yaml
from tiny_model import tiny_overrides

from sao_online.cli import main
from sao_online.config import load_config
from sao_online.runtime.launch import run_experiment

RUN = tiny_overrides(
    "runtime.num_workers=2",
    "runtime.max_staleness=2",
    "env.latency_mean=0.02",
    "rollout.max_turns=2",
    "rollout.max_action_tokens=6",
    "rollout.on_action_cap=submit",
    "budget.episodes=40",
    "eval.every_updates=0",
)


@pytest.mark.e2e
def test_a_cost_model_fitted_to_a_local_run_runs_the_same_config_simulated(tmp_path, capsys):
    run_experiment(load_config(None, [*RUN, "runtime.backend=local"]), tmp_path / "local")
    assert main(["sim", "fit", str(tmp_path / "local")]) == 0
    printed = capsys.readouterr()
    assert "decoding step fitted to" in printed.err
    costs = yaml.safe_load(printed.out)["runtime"]["sim"]
    assert costs["decode_step_seconds"] > 0 and costs["learner_update_seconds"] > 0
    fitted = tmp_path / "fitted.yaml"
    assert main(["sim", "fit", str(tmp_path / "local"), "--out", str(fitted)]) == 0
    config = load_config(fitted)
    assert config.runtime.backend == "simulated" and config.runtime.sim.model_dump() == {
        "preset": "gpu-fleet",
        **costs,
    }
    assert config.budget == load_config(None, RUN).budget
    run_experiment(config, tmp_path / "simulated")
    assert main(["sim", "compare", str(tmp_path / "local"), str(tmp_path / "simulated")]) == 0
    local, simulated = json.loads(capsys.readouterr().out)
    assert (local["backend"], simulated["backend"]) == ("local", "simulated")
    for profile in (local, simulated):
        assert profile["episodes"] == 40 and profile["updates"] == 5
        assert sum(profile["staleness_shares"].values()) == pytest.approx(1.0)
        assert 0 < profile["learner_busy_share"] <= 1 and profile["episodes_per_second"] > 0


def test_fitting_a_run_without_worker_timings_names_the_run(tmp_path, capsys):
    run_experiment(
        load_config(None, [*RUN, "runtime.backend=sync", "budget.episodes=16"]), tmp_path / "s"
    )
    assert main(["sim", "fit", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"sao-online sim: error: sim fit: {tmp_path / 's'} has no ")
    assert "fit to runs of the local or ray backend" in error and "\n" not in error
    assert main(["sim", "fit", str(tmp_path / "nothing")]) == 2
    assert "is not a run directory" in capsys.readouterr().err
