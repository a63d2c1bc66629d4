"""``sao-online benchmark tune`` from the command line at smoke size, in an empty cache: a
user's method tuned on the same grid as a built-in one on tuning seeds, the tuned suite run
as it is with re-adaptation controls, and the tune resumed."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest
import yaml
from test_benchmark_smoke import cli

from sao_online.benchmark.tables import TableSpecError, render_block

pytestmark = pytest.mark.e2e

SUITE = textwrap.dedent("""
    suite: tiny
    methods: [sao]
    tasks:
      ToolShift: {config: tool_shift}
    tiers:
      smoke:
        seeds: 1
        set:
          model.num_layers: 1
          model.hidden_size: 32
          model.warm_start_steps: 40
          model.warm_start_batch_size: 16
          algorithm.critic_warmup_steps: 1
          rollout.batch_size: 16
          rollout.num_slots: 16
          runtime.backend: sync
          budget.episodes: 64
          eval.every_updates: 0
          logging.checkpoint_every: 0
          logging.transcripts_every: 0
          schedule:
            parameters:
              tool_name: {kind: abrupt, values: [calc, compute], at: [0, 32]}
""")

PLUGIN = textwrap.dedent("""
    from sao_online.algorithms import DoubleSidedIS, LeaveOneOut, Method


    def make_method(cfg, max_action_tokens):
        objective = DoubleSidedIS(cfg.dis_eps_low, cfg.dis_eps_high)
        return Method("rloo_dis", 4, LeaveOneOut(), objective)
""")

GRID = ["--grid", "optim.lr=1e-4,1e-3", "--grid", "regularizers.kl_coef=0,0.3"]
POINTS = [(lr, kl) for lr in (1e-4, 1e-3) for kl in (0, 0.3)]


def test_a_users_method_is_tuned_like_a_builtin_and_the_tuned_suite_runs_with_controls(tmp_path):
    (tmp_path / "tiny.yaml").write_text(SUITE)
    (tmp_path / "my_methods.py").write_text(PLUGIN)
    base = ["benchmark", "tune", "--suite", "tiny.yaml", "--tier", "smoke"]
    tune = [*base, "--methods", "sao,my_methods:make_method", *GRID, "--seeds", "1"]

    overlap = cli([*tune, "--first-seed", "0", "--out", "tuned"], tmp_path)
    assert overlap.returncode == 2 and not (tmp_path / "tuned").exists()
    assert (
        overlap.stderr.strip()
        .splitlines()[-1]
        .endswith(
            " error: tuning seeds 0 are evaluation seeds too (the tier evaluates 0-0): tune on "
            "disjoint seeds (--first-seed)"
        )
    )

    tuned = cli([*tune, "--first-seed", "100", "--out", "tuned"], tmp_path)
    assert tuned.returncode == 0, tuned.stderr[-4000:]
    out = tmp_path / "tuned"
    plan = json.loads((out / "tuning.json").read_text())
    assert plan["rule"] == "mean-normalized-score" and plan["seeds"] == [100]
    values = pd.read_csv(out / "results" / "tuning.csv")
    assert sorted(values["method"].unique()) == ["frozen", "rloo_dis", "sao"]
    assert values.groupby("method")["point"].nunique().eq(4).all()  # every method, every point
    assert set(values["seed"]) == {100}
    suite = yaml.safe_load((out / "suite.yaml").read_text())
    tier = suite["tiers"]["smoke"]
    assert tier["methods"] == ["sao", "my_methods:make_method"]
    assert tier["tuned"]["seeds"] == [100]
    # The rule applied by hand to the values the tune kept: the highest mean (the first on a
    # tie), and the sensitivity is the highest mean minus the lowest.
    for spec, method in (("sao", "sao"), ("my_methods:make_method", "rloo_dis")):
        means = values[values["method"] == method].groupby("point")["value"].mean()
        best = int(means.idxmax())
        choice = tier["tuned"]["chosen"]["ToolShift"][spec]
        assert choice["point"] == best
        assert choice["sensitivity"] == pytest.approx(means.max() - means.min(), abs=1e-4)
        lr, kl = POINTS[best]
        own = tier["tasks"]["ToolShift"]["methods"][spec]["set"]
        assert own == {"optim.lr": lr, "regularizers.kl_coef": kl}
    report = (out / "tuning.md").read_text()
    assert "optim.lr: 0.0001, 0.001; regularizers.kl_coef: 0, 0.3 | 4 |" in report

    # Resumed: every point's runs are kept, the choice is the same.
    written = (out / "suite.yaml").read_text()
    again = cli([*tune, "--first-seed", "100", "--out", "tuned", "--resume"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("3 of 3 runs finished earlier: kept, not run again") == 4
    assert (out / "suite.yaml").read_text() == written
    other = [*base, "--methods", "sao,my_methods:make_method", "--grid", "optim.lr=1,2,3,4"]
    refused = cli(
        [*other, "--seeds", "1", "--first-seed", "100", "--out", "tuned", "--resume"], tmp_path
    )
    assert (
        refused.returncode == 2 and "--resume: tuned was tuned with another plan" in refused.stderr
    )

    # The tuned suite runs as it is: each method at its own point, with a control per shift.
    run = cli(
        [
            "benchmark",
            "--suite",
            "tuned/suite.yaml",
            "--tier",
            "smoke",
            "--controls",
            "--out",
            "eval",
        ],
        tmp_path,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    runs = pd.read_csv(tmp_path / "eval" / "results" / "runs.csv")
    assert sorted(runs["method"]) == ["frozen", "rloo_dis", "sao"] and set(runs["seed"]) == {0}
    for spec, method in (("sao", "sao"), ("my_methods:make_method", "rloo_dis")):
        config = yaml.safe_load(
            (
                tmp_path / "eval" / "runs" / "ToolShift" / method / "seed-0" / "config.yaml"
            ).read_text()
        )
        own = tier["tasks"]["ToolShift"]["methods"][spec]["set"]
        assert config["optim"]["lr"] == own["optim.lr"]
        assert config["regularizers"]["kl_coef"] == own["regularizers.kl_coef"]
    controls = pd.read_csv(tmp_path / "eval" / "results" / "controls.csv")
    assert sorted(controls["method"].unique()) == ["rloo_dis", "sao"]
    assert set(controls["start"]) == {32}
    card = (tmp_path / "eval" / "scorecard.md").read_text()
    assert "## Tuning" in card and "## Re-adaptation" in card
    table = render_block("tuning eval", tmp_path)  # the same tables, for a docs page
    assert "| ToolShift | optim.lr: " in table and table in card
    assert "| rloo_dis | optim.lr=" in table and "| sao | optim.lr=" in table
    with pytest.raises(TableSpecError, match=r"^tuning: point-0 ran a suite `benchmark tune` did"):
        render_block("tuning point-0", tmp_path / "tuned" / "points")
    on_tuning_seed = cli(
        [
            "benchmark",
            "--suite",
            "tuned/suite.yaml",
            "--tier",
            "smoke",
            "--first-seed",
            "100",
            "--out",
            "x",
        ],
        tmp_path,
    )
    assert on_tuning_seed.returncode == 2
    assert (
        "were tuned (in tuned) on seeds 100 among these: evaluate on others"
        in on_tuning_seed.stderr
    )
