"""Re-adaptation controls: one per learning run and shift, started from the warm start at the
shift on the run's own prompts; re-adaptation = the run's post-shift score minus its control's,
checked against hand-computed values and carried through the scorecard, merge and tables."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml
from benchmark_synthetic import protocol, record, write_results
from tiny_model import tiny_overrides

from sao_online.algorithms import build_method
from sao_online.benchmark import merge_results, plan_tier
from sao_online.benchmark.controls import CONTROL_COLUMNS, control_jobs, shift_starts
from sao_online.benchmark.prepare import warn_about_budgets
from sao_online.benchmark.readaptation import readaptation_scores
from sao_online.benchmark.scorecard import compute, read_tables, write_scorecard
from sao_online.benchmark.tables import render_block
from sao_online.benchmark.tune import write_suite
from sao_online.config import ConfigError, load_config
from sao_online.runtime.envs import BudgetWarning

ROOT = Path(__file__).resolve().parents[2]

SCHEDULE = (
    "schedule={parameters: {preferred: {kind: abrupt, values: [cute, chuunibyou, classical], "
    "at: [0, 16, 40]}}}"
)


def _job(method: str, *changes: str) -> dict:
    overrides = [*tiny_overrides("budget.episodes=64", SCHEDULE, *changes), "seed=3"]
    return {
        "name": f"T/{method}/seed-3",
        "config": {"env": {"id": "sao_online/StyleShift-v0"}},
        "overrides": [*overrides, f"algorithm.name={method}"],
        "out": f"/nowhere/T/{method}/seed-3",
        "key": {"task": "T", "family": "F", "method": method, "method_spec": method, "seed": 3},
        "cpus": 1,
        "budget": 64,
    }


def test_a_control_per_learning_run_and_shift_starting_at_the_shift():
    jobs = [_job("frozen"), _job("sao_running_mean"), _job("grpo", "algorithm.group_size=8")]
    controls = control_jobs(jobs)
    assert [(c["key"]["method"], c["key"]["control"], c["key"]["start"]) for c in controls] == [
        ("sao_running_mean", 1, 16),
        ("sao_running_mean", 2, 40),
        ("grpo", 1, 16),
        ("grpo", 2, 40),
    ]  # frozen's policy at a shift is the warm start: its control would be itself
    first = controls[0]
    assert first["overrides"][-1] == "budget.start=16" and first["budget"] == 48
    assert first["out"] == "/nowhere/T/sao_running_mean/seed-3/control-1"
    assert first["name"] == "T/sao_running_mean/seed-3/control-1"


def test_the_plan_counts_the_controls_and_their_shorter_budgets(tmp_path):
    from sao_online.benchmark.prepare import prepare_benchmark
    from sao_online.runtime.host.plan_fit import RUN_START_SECONDS, method_weight, run_prior_seconds

    path = tmp_path / "suite.yaml"
    path.write_text(
        "suite: s\nmethods: [sao_running_mean]\n"
        "tasks: {T: {config: {env: {id: sao_online/StyleShift-v0}}}}\ntiers: {smoke: {seeds: 2}}\n"
    )
    overrides = tiny_overrides("budget.episodes=64", SCHEDULE)

    def plan(controls: bool):
        return prepare_benchmark(
            out=tmp_path / "b",
            suite=path,
            overrides=overrides,
            parallel=1,
            reps=10,
            controls=controls,
        ).estimate

    without, with_controls = plan(False), plan(True)
    assert without.runs == 2 * 2  # frozen and sao_running_mean, two seeds
    assert with_controls.runs == 2 * 2 + 2 * 2  # a control per shift (16, 40) of each sao run
    config = load_config(
        {"env": {"id": "sao_online/StyleShift-v0"}},
        [*overrides, "algorithm.name=sao_running_mean"],
    )
    run = run_prior_seconds(config, method_weight(build_method(config)))
    # per seed, the controls spend the 48 and 24 of the run's 64 episodes, each started anew
    assert with_controls.cpu_seconds - without.cpu_seconds == pytest.approx(
        2 * (run * (48 + 24) / 64 + 2 * RUN_START_SECONDS)
    )


def test_the_lite_protocols_re_run_has_a_control_for_every_shift_and_method(tmp_path):
    """``docs/data/lite_protocol``'s tier adds controls to the lite tier: every shift of every
    task must be where each method's group starts, or its script fails after hours of tuning."""
    edit = yaml.safe_load((ROOT / "docs/data/lite_protocol/tier.yaml").read_text())["lite"]
    plan = plan_tier(write_suite(plan_tier("core", "lite"), tmp_path / "suite.yaml", edit), "lite")
    assert plan.controls
    for task in plan.tasks:
        for method in plan.methods:
            config = task.load([f"algorithm.name={method}"])
            assert shift_starts(config, build_method(config).group_size), (task.name, method)


def test_a_critic_warm_up_that_fills_a_controls_scored_phase_is_warned_about():
    """The smoke tier: sao's warm-up is 1 update x 16 episodes; StyleShift's phases after its
    shifts are 32 episodes each, so a control spends 16 / 32 = 50% of its scored phase on it."""
    plan = plan_tier("core", "smoke")
    labels = {"sao": "sao", "grpo": "grpo"}

    def said(controls: bool, *overrides: str) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_about_budgets(plan, labels, list(overrides), controls)
        return [str(w.message) for w in caught if w.category is BudgetWarning]

    (message,) = [m for m in said(True) if m.startswith("controls:")]
    assert message.startswith(
        "controls: sao's controls train only their critic for more than a quarter of the phase "
        "they are scored on (StyleShift shift 1 50%, StyleShift shift 2 50%, ToolShift shift 1 50%"
    )
    assert "grpo" not in message
    assert not [m for m in said(False) if m.startswith("controls:")]
    assert not said(True, "algorithm.critic_warmup_steps=0")


def test_a_control_cannot_start_inside_a_group_or_off_the_episodes_clock():
    config = load_config(None, tiny_overrides("budget.episodes=64", SCHEDULE))
    assert shift_starts(config, 8) == [16, 40]
    with pytest.raises(ConfigError, match=r"controls: the shift at 40 falls inside a group of 16"):
        shift_starts(config, 16)
    prompts = load_config(
        None, tiny_overrides("budget.episodes=64", SCHEDULE, "budget.match=prompts")
    )
    assert shift_starts(prompts, 16) == [16, 40]  # a prompt's group reads one clock value
    steps = load_config(
        None,
        tiny_overrides(
            "schedule={clock: steps, parameters: {preferred: {kind: abrupt, "
            "values: [cute, chuunibyou], at: [0, 16]}}}"
        ),
    )
    with pytest.raises(ConfigError, match=r"controls: need a schedule on the episodes clock"):
        shift_starts(steps, 1)


def _controls(rows: list[tuple]) -> pd.DataFrame:
    """(method, seed, shift, phase, reward) rows of controls.csv on task T."""
    return pd.DataFrame(
        [
            {
                "task": "T",
                "method": method,
                "seed": seed,
                "shift": shift,
                "start": 10 * shift,
                "phase": phase,
                "phase_name": f"regime {phase}",
                "episodes": 10,
                "reward_mean": reward,
                "oracle_mean": 1.0,
                "warm_start": None,
                "provenance_id": "p",
            }
            for method, seed, shift, phase, reward in rows
        ],
        columns=CONTROL_COLUMNS,
    )


def _records(seeds=(0, 1)):
    records = []
    for seed in seeds:
        records.append(record("T", "F", "frozen", seed, [0.2, 0.2, 0.2], [1.0, 1.0, 1.0]))
        records.append(record("T", "F", "a", seed, [0.5, 0.6, 0.8], [1.0, 1.0, 1.0]))
    return records


def test_readaptation_is_the_post_shift_score_minus_the_controls_on_the_same_phase():
    from benchmark_synthetic import scores_of

    scores = scores_of(_records(seeds=(0,)))
    controls = _controls([("a", 0, 1, 1, 0.4), ("a", 0, 1, 2, 0.9), ("a", 0, 2, 2, 0.6)])
    frame = readaptation_scores(scores, controls).set_index(["method", "shift"])
    # floor 0.2, oracle 1.0: the run scores (0.6 - 0.2) / 0.8 = 0.5 after shift 1, its control
    # (0.4 - 0.2) / 0.8 = 0.25 on the same phase (its phase 2, after shift 2, is not used).
    assert frame.loc[("a", 1), "score"] == pytest.approx(0.5)
    assert frame.loc[("a", 1), "control"] == pytest.approx(0.25)
    assert frame.loc[("a", 1), "readaptation"] == pytest.approx(0.25)
    assert frame.loc[("a", 2), "readaptation"] == pytest.approx(0.75 - 0.5)
    assert set(frame.index.get_level_values("method")) == {"a"}  # frozen has no control
    missing = readaptation_scores(scores, controls[controls["shift"] == 1]).set_index("shift")
    assert pd.isna(missing.loc[2, "readaptation"]) and missing.loc[2, "note"] == "no control run"


def _folder(tmp_path, name, seeds, control_rewards):
    out = write_results(tmp_path / name, _records(seeds), protocol({"T": "F"}, ["frozen", "a"]))
    rows = [
        ("a", seed, shift, shift, reward) for seed in seeds for shift, reward in control_rewards
    ]
    _controls(rows).to_csv(out / "results" / "controls.csv", index=False)
    return out


def test_the_scorecard_merge_and_tables_carry_the_readaptation(tmp_path):
    first = _folder(tmp_path, "one", (0, 1, 2), [(1, 0.4), (2, 1.0)])
    second = _folder(tmp_path, "two", (3, 4, 5), [(1, 0.4), (2, 1.0)])
    card = merge_results([first, second], tmp_path / "pooled", reps=200).read_text()
    assert "## Re-adaptation" in card
    tables, benchmark = read_tables(tmp_path / "pooled" / "results")
    assert len(tables["controls"]) == 12  # pooled from both folders
    result = compute(tables, benchmark, reps=200)["readaptation"]
    units = result["frame"]
    # shift 1: 0.5 - 0.25; shift 2: 0.75 - 1.0; each run's mean: 0.0
    assert units["readaptation"].tolist() == pytest.approx([0.25, -0.25] * 6)
    table = render_block("readaptation pooled", tmp_path)
    assert "| 1 | a | 0.00 | 0.62 | 0.62 | 6 |" in table.replace(" [0.00, 0.00]", "")
    plain = write_results(tmp_path / "plain", _records(), protocol({"T": "F"}, ["frozen", "a"]))
    assert "No re-adaptation controls ran" in write_scorecard(plain, reps=50).read_text()
    with pytest.raises(ValueError, match=r"readaptation: plain ran no re-adaptation control"):
        render_block("readaptation plain", tmp_path)
