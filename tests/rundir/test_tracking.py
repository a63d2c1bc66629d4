"""TensorBoard event files, episode transcripts and ``sao-online show``, from real runs."""

from __future__ import annotations

import json
import os

import pytest
import torch
import wandb_records
from tiny_model import model_section

from sao_online.cli import main
from sao_online.config import load_config
from sao_online.learning.types import Trajectory
from sao_online.models import build_tiny_policy
from sao_online.rundir.runlog import RunLog
from sao_online.rundir.tracking import (
    TranscriptLog,
    format_transcript,
    read_transcripts,
    transcript,
)
from sao_online.runtime.launch import run_experiment


def tiny_config(**logging):
    return load_config(
        {
            "experiment": "track",
            "schedule": {
                "parameters": {
                    "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": [0, 16]}
                }
            },
            "model": model_section(),
            "rollout": {
                "batch_size": 8,
                "num_slots": 8,
                "max_turns": 1,
                "max_action_tokens": 12,
                "max_episode_tokens": 96,
            },
            "runtime": {"backend": "sync"},
            "budget": {"episodes": 32},
            "logging": {"checkpoint_every": 2, **logging},
        }
    )


def test_tensorboard_event_files_hold_update_and_episode_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_experiment(tiny_config(tensorboard=True), out=tmp_path / "run", threads=1)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"episodes/reward", "episodes/truncated", "losses/value"} <= set(tags), tags
    updates = RunLog(tmp_path / "run").read("updates")
    episodes = RunLog(tmp_path / "run").read("episodes")
    rewards = events.Scalars("episodes/reward")
    assert [event.step for event in rewards] == [1, 2, 3, 4]  # the learner version after each
    # Each update's reward is the mean over the episodes it trained on (8 per update).
    expected = episodes["reward"].to_numpy().reshape(4, 8).mean(axis=1)
    assert [event.value for event in rewards] == pytest.approx(expected, abs=1e-6)
    assert [e.value for e in events.Scalars("losses/value")] == pytest.approx(
        updates["losses/value"].to_numpy(), abs=1e-6
    )


def test_the_smoke_config_with_tensorboard_true_writes_event_files(tmp_path, capsys):
    assert (
        main(
            [
                "run",
                "configs/smoke.yaml",
                "--set",
                "logging.tensorboard=true",
                "--set",
                "model.warm_start=false",
                "--set",
                "budget.episodes=32",
                "--out",
                str(tmp_path / "smoke"),
                "--threads",
                "1",
            ]
        )
        == 0
    )
    assert list((tmp_path / "smoke" / "tensorboard").glob("events.out.tfevents.*"))


def test_transcripts_sample_every_nth_episode_and_show_prints_them(tmp_path, capsys):
    run_experiment(tiny_config(transcripts_every=8), out=tmp_path / "run", threads=1)
    records = read_transcripts(tmp_path / "run")
    assert [r["episode"] for r in records] == [0, 8, 16, 24]
    episodes = RunLog(tmp_path / "run").read("episodes").set_index("episode")
    for record in records:
        row = episodes.loc[record["episode"]]
        assert record["phase"] == row["phase"] == (record["episode"] >= 16)
        assert record["reward"] == pytest.approx(row["reward"])
        assert record["theta"] == json.loads(row["theta"])
        assert record["prompt"].startswith("Write one short line about")
        assert len(record["turns"]) == row["num_turns"] or row["truncated"]
    assert main(["show", str(tmp_path), "-n", "2", "--phase", "1"]) == 0
    out = capsys.readouterr().out
    assert "episode 16 | phase 1 (pool=" in out and "episode 24 | phase 1" in out
    assert "episode 0 |" not in out and "prompt: Write one short line" in out
    assert main(["show", str(tmp_path / "nothing")]) == 2


def test_a_resumed_run_keeps_no_duplicate_transcript(tmp_path):
    config = tiny_config(transcripts_every=4)
    run_experiment(config, out=tmp_path / "run", threads=1)
    path = tmp_path / "run" / "transcripts.jsonl"
    # A session killed after its last checkpoint (at 24 episodes) had written later lines too.
    lines = path.read_text().splitlines()
    TranscriptLog(tmp_path / "run", tokenizer=None, every=4, keep_before=24)
    assert [json.loads(line)["episode"] for line in path.read_text().splitlines()] == [
        json.loads(line)["episode"] for line in lines if json.loads(line)["episode"] < 24
    ]


def test_a_transcript_splits_prompt_actions_observations_and_turn_rewards():
    _, tokenizer = build_tiny_policy(num_layers=1, hidden_size=32)
    prompt = tokenizer.encode("Compute 2*3.")
    action_1 = tokenizer.encode("CALL calc(2*3)") + [tokenizer.eos_token_id]
    observation = tokenizer.encode("RESULT 6")
    action_2 = tokenizer.encode("ANSWER 6") + [tokenizer.eos_token_id]
    tokens = prompt + action_1 + observation + action_2
    mask = (
        [False] * len(prompt)
        + [True] * len(action_1)
        + [False] * len(observation)
        + [True] * len(action_2)
    )
    rewards = [0.0] * len(tokens)
    rewards[len(prompt) + len(action_1) - 1] = -0.05
    rewards[-1] = 1.0
    turn_ids = [-1] * len(tokens)
    trajectory = Trajectory(
        tokens=torch.tensor(tokens),
        action_mask=torch.tensor(mask),
        behavior_logprobs=torch.zeros(len(tokens)),
        versions=torch.zeros(len(tokens), dtype=torch.long),
        rewards=torch.tensor(rewards),
        turn_ids=torch.tensor(turn_ids),
        prompt_id=0,
        group_id=0,
        env_id="x",
        phase=1,
        theta={"tool_name": "calc"},
        world_time=5.0,
        seed=0,
        terminated=True,
        truncated=False,
        behavior="calc/v1",
        final_observation="Correct: 6.",  # the answer to the last action: in no token
    )
    record = transcript(trajectory, tokenizer, episode=7)
    assert record["prompt"] == "Compute 2*3."
    assert record["turns"] == [
        {"action": "CALL calc(2*3)", "observation": "RESULT 6", "reward": pytest.approx(-0.05)},
        {"action": "ANSWER 6", "observation": "Correct: 6.", "reward": 1.0},
    ]
    assert record["reward"] == pytest.approx(0.95)
    text = format_transcript(record)
    assert text.startswith(
        "episode 7 | phase 1 (tool_name=calc) | reward +0.950 | behaviour calc/v1 | terminated"
    )
    assert "action 1: 'CALL calc(2*3)'  (reward -0.050)\n    env: RESULT 6" in text
    assert text.endswith("action 2: 'ANSWER 6'  (reward +1.000)\n    env: Correct: 6.")


def tool_shift_config(**logging):
    """ToolShift with a numeric drift parameter (the tool failure rate rising over the run)
    and a rename at episode 16: the drift series have something to show."""
    return load_config(
        {
            "experiment": "drifting",
            "schedule": {
                "parameters": {
                    "tool_name": {"kind": "abrupt", "values": ["calc", "compute"], "at": [0, 16]},
                    "failure": {"kind": "linear", "from": 0.0, "to": 0.4, "start": 0, "end": 32},
                }
            },
            "env": {"id": "sao_online/ToolShift-v0"},
            "model": model_section(),
            "rollout": {
                "batch_size": 8,
                "num_slots": 8,
                "max_turns": 2,
                "max_action_tokens": 8,
                "max_episode_tokens": 160,
            },
            "runtime": {"backend": "sync"},
            "budget": {"episodes": 32},
            "logging": {"checkpoint_every": 2, **logging},
        }
    )


def batch_means_of_theta(run_dir, name):
    episodes = RunLog(run_dir).read("episodes").sort_values("episode")
    values = [json.loads(theta)[name] for theta in episodes["theta"]]
    return [sum(values[k : k + 8]) / 8 for k in range(0, len(values), 8)]


def test_tensorboard_shows_the_phase_and_each_numeric_drift_parameter(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_experiment(tool_shift_config(tensorboard=True), out=tmp_path / "run", threads=1)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"drift/phase", "drift/failure"} <= tags, tags
    assert not any(tag.startswith(("drift/tool_name", "drift/schema")) for tag in tags)  # text
    # The rename at episode 16 is a step from 0 to 1 between the second and third update.
    assert [(e.step, e.value) for e in events.Scalars("drift/phase")] == [
        (1, 0.0),
        (2, 0.0),
        (3, 1.0),
        (4, 1.0),
    ]
    # The failure rate is each update's mean over the 8 episodes it trained on.
    assert [e.value for e in events.Scalars("drift/failure")] == pytest.approx(
        batch_means_of_theta(tmp_path / "run", "failure"), abs=1e-6
    )


def wandb_or_skip():
    try:
        import wandb  # noqa: F401
    except ImportError as error:
        if os.environ.get("CI"):  # CI installs it (make venv): missing there is a failure
            raise
        pytest.skip(f"wandb not installed ({error}); pip install 'sao-online[wandb]'")


def test_wandb_logs_the_tensorboard_series_and_the_config_offline(tmp_path, monkeypatch):
    wandb_or_skip()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # No key and no mode given: the run must go offline by itself, whatever the network.
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc key either
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "home" / "wandb"))
    run_dir = tmp_path / "run"
    run_experiment(tool_shift_config(tensorboard=True, wandb=True), out=run_dir, threads=1)

    [offline] = list((run_dir / "wandb").glob("offline-run-*"))
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    assert offline.name.endswith(run_id)
    run_file = offline / f"run-{run_id}.wandb"
    rows = wandb_records.history(run_file)
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert [row["_step"] for row in rows] == [1, 2, 3, 4]  # learner versions
    for row in rows:
        logged = {key: value for key, value in row.items() if not key.startswith("_")}
        assert set(logged) == tags  # the same series as TensorBoard ...
        for tag in ("drift/phase", "drift/failure", "episodes/reward", "losses/value"):
            [event] = [e for e in events.Scalars(tag) if e.step == row["_step"]]
            assert logged[tag] == pytest.approx(event.value, abs=1e-6)  # ... the same values
    config = wandb_records.config(run_file)
    saved = RunLog(run_dir).config()
    assert config["experiment"] == "drifting" and config["method"] == "sao"
    assert config["schedule"] == saved["schedule"] and config["rollout"] == saved["rollout"]


def test_wandb_goes_offline_without_a_key_and_respects_wandb_mode(monkeypatch, tmp_path):
    from sao_online.rundir import tracking

    for name in ("WANDB_MODE", "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tracking.wandb_mode() == "offline"  # no key: no network attempt at all
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setattr(tracking, "_reachable", lambda host, **kw: False)
    assert tracking.wandb_mode() == "offline"  # a key, but no server
    monkeypatch.setattr(tracking, "_reachable", lambda host, **kw: True)
    assert tracking.wandb_mode() == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert tracking.wandb_mode() == "disabled"
