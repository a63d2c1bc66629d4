"""TensorBoard event files, episode transcripts and ``sao-online show``, from real runs."""

from __future__ import annotations

import json

import pytest
import torch

from sao_online.cli import main
from sao_online.config import load_config
from sao_online.models import build_tiny_policy
from sao_online.runlog import RunLog
from sao_online.runtime.launch import run_experiment
from sao_online.tracking import TranscriptLog, format_transcript, read_transcripts, transcript
from sao_online.types import Trajectory


def tiny_config(**logging):
    return load_config(
        {
            "experiment": "track",
            "schedule": {
                "parameters": {
                    "preferred": {"kind": "abrupt", "values": ["cute", "classical"], "at": [0, 16]}
                }
            },
            "model": {"num_layers": 1, "hidden_size": 32, "warm_start": False},
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
    )
    record = transcript(trajectory, tokenizer, episode=7)
    assert record["prompt"] == "Compute 2*3."
    assert record["turns"] == [
        {"action": "CALL calc(2*3)", "observation": "RESULT 6", "reward": pytest.approx(-0.05)},
        {"action": "ANSWER 6", "observation": "", "reward": 1.0},
    ]
    assert record["reward"] == pytest.approx(0.95)
    text = format_transcript(record)
    assert text.startswith(
        "episode 7 | phase 1 (tool_name=calc) | reward +0.950 | behaviour calc/v1 | terminated"
    )
    assert "action 1: 'CALL calc(2*3)'  (reward -0.050)\n    env: RESULT 6" in text
