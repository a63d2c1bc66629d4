"""The env's prompt keys (task, difficulty, ...) reach episodes.parquet as typed columns."""

from __future__ import annotations

import re

import gymnasium
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tiny_model import TINY_MODEL, merge_overrides

from sao_online.analysis import load_runs
from sao_online.analysis.loading import PROMPT_COLUMN_PREFIX
from sao_online.config import load_config
from sao_online.environments.base import (
    PROMPT_KEY_PREFIX,
    DriftingTextEnv,
    TurnResult,
    check_prompt_keys,
    prompt_key_value,
)
from sao_online.rollout.episode import prompt_info
from sao_online.rundir.episode_rows import (
    dropped_episode_record,
    episode_column_types,
    prompt_columns,
)
from sao_online.rundir.runlog import RunLog
from sao_online.rundir.tracking import read_transcripts
from sao_online.runtime.context import RunContext
from sao_online.runtime.launch import run_experiment

TINY = merge_overrides(
    TINY_MODEL,
    [
        "rollout.batch_size=8",
        "rollout.num_slots=8",
        "runtime.backend=sync",
        "algorithm.critic_warmup_steps=0",
        "logging.checkpoint_every=100",
    ],
)
_PROMPT = re.compile(r"Level (\d)\. (Reverse|Sort the digits|Add|Count)")
_TASK_OF_VERB = {"Reverse": "reverse", "Sort the digits": "sort", "Add": "add", "Count": "count"}


@pytest.mark.filterwarnings("ignore:budget.episodes")
def test_a_reason_shift_run_records_task_and_level_of_every_episode(tmp_path):
    config = load_config(
        "configs/reason_shift.yaml",
        TINY + ["budget.episodes=24", "logging.flush_every=8", "logging.transcripts_every=1"],
    )
    run_experiment(config, out=tmp_path / "run")
    parts = sorted((tmp_path / "run" / "episodes.parquet").glob("part-*.parquet"))
    assert len(parts) == 3
    schemas = [pq.read_schema(part) for part in parts]
    assert all(schema == schemas[0] for schema in schemas)  # the same schema in every chunk
    assert pa.types.is_large_string(schemas[0].field("prompt/task").type) or pa.types.is_string(
        schemas[0].field("prompt/task").type
    )
    assert schemas[0].field("prompt/difficulty").type == pa.int64()
    episodes = load_runs(tmp_path / "run").set_index("episode")
    assert len(episodes) == 24
    # The prompt text of each episode names its level and task: the columns must agree with it.
    for record in read_transcripts(tmp_path / "run"):
        level, verb = _PROMPT.search(record["prompt"]).groups()
        row = episodes.loc[record["episode"]]
        assert row["prompt/difficulty"] == int(level)
        assert row["prompt/task"] == _TASK_OF_VERB[verb]
    assert episodes["prompt/difficulty"].between(1, 5).all()


def test_envs_without_prompt_keys_add_no_columns():
    config = load_config(None, TINY)  # StyleShift declares none
    assert episode_column_types(config) == {}
    assert prompt_columns(config, {"topic": "cats"}) == {}


def test_a_dropped_episode_records_null_prompt_keys():
    config = load_config("configs/grid_shift.yaml", TINY)
    ctx = RunContext.build(config)
    plan = ctx.planner.next_group()[0]
    row = dropped_episode_record(config, plan, 0, wall_time=0.0)
    assert "prompt/difficulty" in row and row["prompt/difficulty"] is None


def test_prompt_key_values_outside_the_declared_type_become_null():
    config = load_config("configs/reason_shift.yaml", TINY)
    assert prompt_columns(config, {"task": "sort", "difficulty": 3}) == {
        "prompt/task": "sort",
        "prompt/difficulty": 3,
    }
    assert prompt_columns(config, {"task": ["sort"], "difficulty": "3"}) == {
        "prompt/task": None,
        "prompt/difficulty": None,
    }
    assert prompt_columns(config, {}) == {"prompt/task": None, "prompt/difficulty": None}
    assert prompt_key_value(2, float) == 2.0 and isinstance(prompt_key_value(2, float), float)
    assert prompt_key_value(True, int) is None and prompt_key_value(1, bool) is None
    assert prompt_key_value(False, bool) is False


class _Keyed(DriftingTextEnv):
    prompt_keys = {"size": int}

    def _begin_episode(self):
        return "go", {"size": [1, 2], "other": 1}

    def _respond(self, action):
        return TurnResult("done", 0.0, terminated=True, behavior="x")

    def oracle_action(self, observation, info):
        return "x"

    def oracle_reward(self, theta):
        return 0.0


def test_rollout_keeps_only_the_declared_keys_of_the_reset_info():
    env = _Keyed()
    _, info = env.reset(seed=0)
    assert prompt_info(env, info) == {"size": [1, 2]}  # typed (to null) when the row is made
    assert prompt_info(gymnasium.make("CartPole-v1"), {"size": 1}) == {}


def test_bad_prompt_key_declarations_fail_naming_the_key():
    with pytest.raises(TypeError, match=r"Bad.prompt_keys\['size'\]: type must be one of"):

        class Bad(_Keyed):
            prompt_keys = {"size": list}

    with pytest.raises(TypeError, match="expected a mapping"):
        check_prompt_keys(["size"])


def test_runlog_column_types_keep_an_all_null_chunk_in_the_column_type(tmp_path):
    types = {"episodes": {"prompt/difficulty": "Int64", "prompt/task": "string"}}
    log = RunLog(tmp_path, flush_every=2, column_types=types)
    log.log("episodes", [{"episode": 0, "prompt/difficulty": 3, "prompt/task": "add"}] * 2)
    log.log("episodes", [{"episode": 1, "prompt/difficulty": None, "prompt/task": None}] * 2)
    schemas = [pq.read_schema(part) for part in log._part_files("episodes")]
    assert [str(s.field("prompt/difficulty").type) for s in schemas] == ["int64", "int64"]
    assert schemas[0].field("prompt/task").type == schemas[1].field("prompt/task").type
    assert pa.types.is_large_string(schemas[1].field("prompt/task").type) or pa.types.is_string(
        schemas[1].field("prompt/task").type
    )
    table = log.read("episodes")
    assert table["prompt/difficulty"].isna().tolist() == [False, False, True, True]
    assert pd.api.types.is_integer_dtype(table["prompt/difficulty"])


def test_the_analysis_reads_the_prefix_the_runtime_writes():
    assert PROMPT_COLUMN_PREFIX == PROMPT_KEY_PREFIX
