"""``run`` then ``compare`` of one config: the run ``compare`` finds in its place is the same run
(the same config and code) and is continued, said so; a folder that holds another run is refused
before any run starts."""

from __future__ import annotations

import pytest

from sao_online.commands.compare_checks import continue_same_runs
from sao_online.config import ConfigError, load_config
from sao_online.jobs.methods import method_overrides
from sao_online.runtime.launch import run_experiment

CONFIG = {
    "experiment": "again",
    "model": {"num_layers": 1, "hidden_size": 32, "warm_start": False},
    "algorithm": {"name": "sao_running_mean"},
    "rollout": {"batch_size": 8, "num_slots": 8, "max_turns": 1, "max_action_tokens": 8},
    "runtime": {"backend": "sync", "torch_threads": 1},
    "budget": {"episodes": 16},
    "logging": {"checkpoint_every": 0, "transcripts_every": 0},
}


def _job(run_dir, overrides=()):
    return {
        "name": "sao_running_mean/seed-0",
        "config": CONFIG,
        "overrides": [*overrides, *method_overrides("sao_running_mean"), "seed=0"],
        "out": str(run_dir),
        "overwrite": False,
        "resume": False,
    }


def test_the_same_run_is_continued_and_another_is_refused_up_front(tmp_path, capsys):
    run_dir = tmp_path / "runs" / "again" / "sao_running_mean" / "seed-0"
    run_experiment(load_config(CONFIG), out=run_dir)  # what `sao-online run` left
    same = _job(run_dir)
    continue_same_runs([same], progress=True)
    assert same["resume"] is True
    assert "run(s) of this config already there, continued" in capsys.readouterr().err
    other = _job(run_dir, ["budget.episodes=24"])
    with pytest.raises(ConfigError, match=r"seed-0 holds another run \(its config differs"):
        continue_same_runs([other], progress=False)
    assert other["resume"] is False
