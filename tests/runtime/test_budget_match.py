"""The budget as a declared choice: ``budget.match: prompts`` gives a group method the prompts
(and regimes) a single-rollout method sees, and ``budget.start`` starts a run at a clock reading
on the prompts a run from 0 reaches there (the benchmark's re-adaptation controls)."""

from __future__ import annotations

import pandas as pd
import pytest
from tiny_model import tiny_overrides

from sao_online.config import ConfigError, load_config
from sao_online.drift_schedules import load_schedule
from sao_online.runtime.launch import run_experiment
from sao_online.runtime.scheduling.planner import EpisodePlanner

PREFERRED = {"kind": "abrupt", "values": ["cute", "chuunibyou"], "at": [0, 6]}
SCHEDULE = load_schedule({"parameters": {"preferred": PREFERRED}})


def _plans(planner: EpisodePlanner, budget: int) -> list:
    plans = []
    while planner.can_start_group(budget):
        plans.extend(planner.next_group())
    return plans


def test_prompts_matching_gives_a_group_the_single_rollouts_prompts_and_regimes():
    single = _plans(EpisodePlanner(SCHEDULE, group_size=1, seed=3), budget=8)
    group = EpisodePlanner(SCHEDULE, group_size=4, seed=3, per_prompt=True)
    assert group.episodes_to_run(8) == 32
    grouped = _plans(group, budget=8)
    assert len(single) == 8 and len(grouped) == 32  # 8 prompts each, 4 rollouts of each here
    for k, plan in enumerate(single):
        members = grouped[4 * k : 4 * k + 4]
        assert {m.seed for m in members} == {plan.seed}
        assert {m.world_time for m in members} == {plan.world_time} == {float(k)}
        assert {m.state.phase for m in members} == {plan.state.phase}
        assert not any(m.straddles_change for m in members)  # one reading per group
    # Matched in episodes, the same group method sees a quarter of the prompts, and its
    # second prompt already reads t = 4.
    by_episodes = _plans(EpisodePlanner(SCHEDULE, group_size=4, seed=3), budget=8)
    assert len(by_episodes) == 8 and by_episodes[4].world_time == 4.0


def test_a_run_started_at_a_reading_takes_the_prompts_a_run_from_zero_takes_there():
    whole = _plans(EpisodePlanner(SCHEDULE, group_size=1, seed=5), budget=10)
    late = EpisodePlanner(SCHEDULE, group_size=1, seed=5)
    late.start_at(6)
    assert late.episodes_to_run(10) == 4
    assert [(p.seed, p.world_time, p.state) for p in _plans(late, 10)] == [
        (p.seed, p.world_time, p.state) for p in whole[6:]
    ]
    groups = EpisodePlanner(SCHEDULE, group_size=2, seed=5)
    groups.start_at(6)
    assert groups.next_group()[0].group_id == 3
    with pytest.raises(ValueError, match=r"budget.start: 5 falls inside a group of 2"):
        EpisodePlanner(SCHEDULE, group_size=2, seed=5).start_at(5)
    prompts = EpisodePlanner(SCHEDULE, group_size=4, seed=5, per_prompt=True)
    prompts.start_at(6)
    assert prompts.episodes_to_run(8) == 8  # prompts 6 and 7, four rollouts each
    assert prompts.next_group()[0].world_time == 6.0


def test_other_clocks_refuse_prompts_matching_and_a_start():
    steps = load_schedule({"clock": "steps", "parameters": {}})
    with pytest.raises(ValueError, match=r"budget.match: 'prompts' needs a schedule on the"):
        EpisodePlanner(steps, group_size=4, seed=0, clock=steps.make_clock(), per_prompt=True)
    with pytest.raises(ValueError, match=r"budget.start: needs the episodes clock, not steps"):
        EpisodePlanner(steps, group_size=1, seed=0, clock=steps.make_clock()).start_at(2)
    with pytest.raises(ConfigError, match=r"start: must be below budget.episodes \(8\), got 8"):
        load_config(None, ["budget.episodes=8", "budget.start=8"])


RUN = tiny_overrides(
    "runtime.backend=sync",
    "rollout.batch_size=4",
    "rollout.num_slots=4",
    "logging.checkpoint_every=0",
    "schedule={parameters: {preferred: {kind: abrupt, values: [cute, chuunibyou], at: [0, 4]}}}",
)


def _episodes(tmp_path, name: str, *changes: str) -> pd.DataFrame:
    run_experiment(load_config(None, [*RUN, *changes]), out=tmp_path / name, threads=1)
    return pd.read_parquet(tmp_path / name / "episodes.parquet")


def test_runs_keep_to_the_declared_budget(tmp_path):
    sao = _episodes(tmp_path, "sao", "algorithm.name=sao_running_mean", "budget.episodes=8")
    grpo = _episodes(
        tmp_path,
        "grpo",
        "algorithm.name=grpo",
        "algorithm.group_size=4",
        "budget.episodes=8",
        "budget.match=prompts",
    )
    assert len(sao) == 8 and len(grpo) == 32
    # A prompt's seed is drawn from (run seed, prompt id): equal ids, the same prompts.
    per_prompt = grpo.groupby("prompt_id").agg(t=("world_time", "first"), n=("episode", "size"))
    assert list(per_prompt.index) == list(sao["prompt_id"]) == list(range(8))
    assert list(per_prompt["t"]) == list(sao["world_time"]) and set(per_prompt["n"]) == {4}
    late = _episodes(
        tmp_path, "late", "algorithm.name=sao_running_mean", "budget.episodes=8", "budget.start=4"
    )
    assert list(late["world_time"]) == [4.0, 5.0, 6.0, 7.0] and set(late["phase"]) == {1}
    assert list(late["prompt_id"]) == [4, 5, 6, 7]


def test_the_scorecard_says_what_the_budgets_match():
    from sao_online.benchmark.protocol import budget_matching

    def protocol(**matches):
        return {"tasks": {n: {"config": {"budget": {"match": m}}} for n, m in matches.items()}}

    assert budget_matching(protocol(A="prompts", B="prompts")).startswith(
        "Budgets are matched in prompts (a group method runs G times the episodes"
    )
    assert budget_matching({"tasks": {"A": {"config": {"budget": {}}}}}).startswith(
        "Budgets are matched in episodes (a group method, G rollouts to a prompt, sees 1/G"
    )  # recorded before budget.match existed
    assert budget_matching(protocol(B="prompts", A="episodes", C="episodes")) == (
        "Budgets are matched in episodes on A, C; in prompts on B."
    )
