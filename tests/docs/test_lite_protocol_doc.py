"""docs/lite_protocol.md: each family's kept results came from one committed tree on one
machine, on seed sets disjoint from each other and from the tuning seeds, at the grid the tier
declares; and each finding the page states holds in the tables it shows (which
``test_kept_results`` ties to the data)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sao_online.benchmark import plan_tier

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "lite_protocol.md"
KEPT = ROOT / "benchmarks" / "lite-protocol"
FAMILIES = sorted(path.name for path in (KEPT / "families").iterdir())
STYLE = KEPT / "families" / "StyleShift"
PROBE = KEPT / "probes" / "StyleShift-sao-no-critic-warmup"
TIER = ROOT / "docs" / "data" / "lite_protocol" / "tier.yaml"
LEARNING = ("sao", "sao_running_mean", "grpo_dis", "grpo")
SETS = ("seeds-0-2", "seeds-3-5")


def _table(spec: str, index: int = 0) -> list[dict[str, str]]:
    """The rows of the ``index``-th table of the page's generated block ``spec``."""
    text = PAGE.read_text()
    start = text.index(f"<!-- benchmark-table: {spec} -->")
    block = text[start : text.index("<!-- /benchmark-table -->", start)]
    tables, lines = [], []
    for line in [*block.splitlines(), ""]:
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            tables.append(lines)
            lines = []
    head, _, *body = tables[index]
    names = [cell.strip() for cell in head.strip("|").split("|")]
    return [dict(zip(names, (cell.strip() for cell in row.strip("|").split("|")))) for row in body]


def _number(cell: str) -> float:
    return float(re.match(r"-?\d+\.\d+", cell).group())


def _provenance(folder: Path) -> list[dict]:
    return list(
        json.loads((folder / "results" / "benchmark.json").read_text())["provenance"].values()
    )


def _family(name: str) -> Path:
    return KEPT / "families" / name


def _spec(kind: str, folder: Path, *rest: str) -> str:
    return " ".join([kind, f"../{folder.relative_to(ROOT).as_posix()}", *rest])


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def test_the_page_shows_every_kept_family_and_says_which_are_not_run():
    text = PAGE.read_text()
    tier = [task.name for task in plan_tier("core", "lite").tasks]
    assert set(FAMILIES) <= set(tier) and FAMILIES
    for family in FAMILIES:
        assert f"\n## {family}\n" in text
    words = " ".join(text.split())
    kept = [family for family in tier if family in FAMILIES]
    missing = [family for family in tier if family not in FAMILIES]
    assert f"the families kept so far: {_listed(kept)}." in words
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        assert f"{_listed(missing)} {verb} not run yet" in words
        readme = " ".join((KEPT / "README.md").read_text().split())
        assert f"{_listed(missing)} {verb} not run under the protocol yet." in readme


@pytest.mark.parametrize("family", FAMILIES)
def test_every_kept_folder_came_from_one_committed_tree_on_one_machine(family):
    folders = [path.parents[1] for path in _family(family).rglob("results/benchmark.json")]
    assert len(folders) == 3 + 4  # two sets, pooled, and the four grid points
    records = [record for folder in folders for record in _provenance(folder)]
    assert {record["commit"] for record in records} == {records[0]["commit"]}
    assert not any(record["dirty"] for record in records)
    assert len({record["machine"]["cpu_model"] for record in records}) == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_the_seed_sets_are_disjoint_from_each_other_and_from_the_tuning_seeds(family):
    kept = _family(family)
    seeds = {name: set(pd.read_csv(kept / name / "results" / "runs.csv")["seed"]) for name in SETS}
    assert seeds == {"seeds-0-2": {0, 1, 2}, "seeds-3-5": {3, 4, 5}}
    tuning = json.loads((kept / "seeds-0-5" / "results" / "benchmark.json").read_text())
    assert set(tuning["protocol"]["tuning"]["seeds"]) == {100, 101}
    assert set(tuning["protocol"]["tuning"]["grids"]) == {family}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_grid_point_is_the_one_the_page_names_and_point_0_is_the_tiers_setting(family):
    grid = yaml.safe_load(TIER.read_text())["lite"]["tuning"]["tasks"][family]["grid"]
    rates, kls = grid["optim.lr"], grid["regularizers.kl_coef"]
    (task,) = [task for task in plan_tier("core", "lite").tasks if task.name == family]
    config = task.load([])
    assert (rates[0], kls[0]) == (config.optim.lr, config.regularizers.kl_coef)
    expected = [(rates[0], kls[0]), (rates[0], kls[1]), (rates[1], kls[0]), (rates[1], kls[1])]
    for point, (lr, kl) in enumerate(expected):
        suite = (_family(family) / "tune" / "points" / f"point-{point}" / "suite.yaml").read_text()
        assert f"optim.lr: {lr}\n" in suite and f"regularizers.kl_coef: {kl}\n" in suite
    words = " ".join(PAGE.read_text().split())
    assert "point 1 changes the KL coefficient, point 2 the learning rate, point 3 both" in words


@pytest.mark.parametrize("family", FAMILIES)
def test_the_pages_figure_is_the_kept_scorecards(family):
    kept = _family(family) / "seeds-0-5" / "figures" / "recovery_grid.png"
    figure = ROOT / "docs" / f"lite_protocol_{family.lower()}.png"
    assert figure.read_bytes() == kept.read_bytes()
    assert f"]({figure.name})" in PAGE.read_text()


def test_tuning_chose_the_tiers_setting_for_every_method_and_sao_moved_least():
    rows = _table(f"tuning ../{STYLE.relative_to(ROOT).as_posix()}/seeds-0-5", index=1)
    chosen = {row["method"]: row["StyleShift"] for row in rows}
    assert set(chosen) == set(LEARNING)
    assert all(
        cell.startswith("optim.lr=0.0005, regularizers.kl_coef=0.3 (") for cell in chosen.values()
    )
    moved = {
        method: float(re.search(r"moved by (-?\d+\.\d+)", cell).group(1))
        for method, cell in chosen.items()
    }
    assert min(moved, key=moved.get) == "sao"


def test_no_pairwise_verdict_replicates_and_pooled_nothing_is_separated():
    folder = f"../{STYLE.relative_to(ROOT).as_posix()}"
    rows = _table(f"replication {folder}/seeds-0-2 {folder}/seeds-3-5")
    assert len(rows) == 10 and {row["shared by all"] for row in rows} <= {"no", "not separated"}
    board = _table(f"leaderboard {folder}/seeds-0-5")
    assert not any(row["next below"].startswith("separated") for row in board)
    for spec in (
        f"versus {folder}/seeds-0-5 sao sao_running_mean,grpo,grpo_dis",
        "versus ../benchmarks/lite/seeds-0-5 sao sao_running_mean,grpo,grpo_dis StyleShift",
    ):
        assert all(row["verdict"].startswith("not separated") for row in _table(spec))


def test_the_first_shift_costs_every_learning_run_and_the_second_is_recovered_mostly():
    rows = _table(f"seeds ../{STYLE.relative_to(ROOT).as_posix()}/seeds-0-5")
    learning = [row for row in rows if row["method"] in LEARNING]
    seeds = [f"seed {k}" for k in range(6)]
    first = [float(row[s]) for row in learning if row["phase"].startswith("1:") for s in seeds]
    second = [float(row[s]) for row in learning if row["phase"].startswith("2:") for s in seeds]
    assert len(first) == len(second) == 24
    assert max(first) < 0
    assert sum(value > 0 for value in second) == 21


@pytest.mark.parametrize("seed_set", SETS)
def test_every_method_re_adapts_below_zero_and_saos_control_is_the_lowest(seed_set):
    rows = _table(f"readaptation ../{STYLE.relative_to(ROOT).as_posix()}/{seed_set}")
    by_method = {row["method"]: row for row in rows}
    assert set(by_method) == set(LEARNING)
    assert all(_number(row["re-adaptation IQM [95% CI]"]) < 0 for row in rows)
    assert rows[0]["method"] == "sao" and rows[0]["next below"].startswith("separated")
    controls = {method: float(row["control"]) for method, row in by_method.items()}
    assert min(controls, key=controls.get) == "sao"


@pytest.mark.parametrize("seed_set", SETS)
def test_without_its_warm_up_saos_control_and_re_adaptation_join_the_other_methods(seed_set):
    pilot = _table(f"readaptation ../{STYLE.relative_to(ROOT).as_posix()}/{seed_set}")
    (probe,) = _table(f"readaptation ../{PROBE.relative_to(ROOT).as_posix()}/{seed_set}")
    others = [row for row in pilot if row["method"] != "sao"]
    (with_warm_up,) = [row for row in pilot if row["method"] == "sao"]
    controls = [float(row["control"]) for row in others]
    assert probe["method"] == "sao"
    assert min(controls) <= float(probe["control"]) <= max(controls)
    readaptation = _number(probe["re-adaptation IQM [95% CI]"])
    highest = max(_number(row["re-adaptation IQM [95% CI]"]) for row in others)
    assert readaptation <= highest + 0.06 + 1e-9
    assert float(probe["post-shift score"]) < float(with_warm_up["post-shift score"])


def test_the_probe_came_from_styleshifts_commit_on_its_seeds():
    (pilot,) = {record["commit"] for record in _provenance(STYLE / "seeds-0-5")}
    records = _provenance(PROBE / "seeds-0-5")
    assert {record["commit"] for record in records} == {pilot}
    assert not any(record["dirty"] for record in records)
    runs = pd.read_csv(PROBE / "seeds-0-5" / "results" / "runs.csv")
    assert set(runs["seed"]) == set(range(6)) and set(runs["method"]) == {"sao", "frozen"}


def test_the_warm_up_share_the_page_names_is_the_tuned_suites():
    (task,) = plan_tier(STYLE / "tune" / "suite.yaml", "lite").tasks
    config = task.load(["algorithm.name=sao"])
    share = config.algorithm.critic_warmup_steps * config.rollout.batch_size / 600  # each phase
    assert f"as here ({share:.0%} of each)" in " ".join(PAGE.read_text().split())


GRID = KEPT / "families" / "GridShift"


def test_gridshifts_third_warm_start_does_not_do_the_task_and_fails_the_learnable_check():
    phases = pd.read_csv(GRID / "seeds-0-5" / "results" / "phases.csv")
    runs = pd.read_csv(GRID / "seeds-0-5" / "results" / "runs.csv")
    warm = dict(zip(runs["seed"], runs["warm_start_seed"]))
    frozen = phases[(phases["method"] == "frozen") & (phases["phase"] == 0)]
    by_warm = frozen.groupby(frozen["seed"].map(warm))["reward_mean"].mean()
    assert by_warm[2] < 0 < 0.5 < min(by_warm[0], by_warm[1])
    after = phases[(phases["method"] == "frozen") & (phases["phase"] == 1)]["reward_mean"]
    assert by_warm[2] <= after.max()  # no better before the shift than after it
    (checks, per_phase) = (_table(_spec("calibration", GRID / "seeds-0-5"), i) for i in (0, 1))
    lowest = float(re.search(r"\[(-?\d+\.\d+),", per_phase[0]["frozen reward"]).group(1))
    assert lowest == pytest.approx(by_warm[2], abs=5e-4)
    assert checks[0]["learnable"] == "no"
    first = _table(
        _spec(
            "first-phase",
            GRID / "seeds-0-2",
            f"../{(GRID / 'seeds-3-5').relative_to(ROOT).as_posix()}",
        )
    )
    from_third = [
        float(row[f"seed {s}"]) for row in first for s in (2, 5) if row[f"seed {s}"] != "—"
    ]
    assert len(from_third) == 8 and max(from_third) < 0.1
    # The tier's kept runs (one warm start) passed the check on GridShift.
    from sao_online.benchmark import calibration
    from sao_online.benchmark.scorecard import compute, read_tables

    tables, benchmark = read_tables(ROOT / "benchmarks" / "lite" / "seeds-0-5" / "results")
    old = calibration.tables(compute(tables, benchmark, 200), tables, "frozen")[0]
    assert old.set_index("task").loc["GridShift", "learnable"] == "yes"


def test_gridshifts_tuning_moved_three_methods_off_the_tiers_point_by_little():
    rows = _table(_spec("tuning", GRID / "seeds-0-5"), index=1)
    chosen = {row["method"]: row["GridShift"] for row in rows}
    expected = {
        "grpo": "optim.lr=0.002, regularizers.kl_coef=0.03 (",
        "sao": "optim.lr=0.002, regularizers.kl_coef=0.03 (",
        "grpo_dis": "optim.lr=0.002, regularizers.kl_coef=0.3 (",
        "sao_running_mean": "optim.lr=0.001, regularizers.kl_coef=0.03 (",  # the tier's
    }
    assert all(chosen[method].startswith(point) for method, point in expected.items())
    moved = [float(re.search(r"moved by (-?\d+\.\d+)", cell).group(1)) for cell in chosen.values()]
    assert max(moved) <= 0.12


def test_on_gridshift_nothing_is_separated_after_the_shift_and_the_old_verdicts_do_not_hold():
    board = _table(_spec("leaderboard", GRID / "seeds-0-5"))
    assert not any(row["next below"].startswith("separated") for row in board)
    others = "sao_running_mean,grpo,grpo_dis"
    new = _table(_spec("versus", GRID / "seeds-0-5", "sao", others))
    assert all(row["verdict"].startswith("not separated") for row in new)
    old = _table(f"versus ../benchmarks/lite/seeds-0-5 sao {others} GridShift")
    assert {
        row["other"]: row["verdict"] for row in old if row["verdict"] == "sao better"
    }.keys() == {
        "grpo",
        "grpo_dis",
    }
    sets = [f"../{(GRID / s).relative_to(ROOT).as_posix()}" for s in SETS]
    replicated = [
        row["shared by all"]
        for row in _table(" ".join(["replication", *sets]))
        if row["shared by all"] not in ("no", "not separated")
    ]
    assert replicated == ["grpo > frozen"]


@pytest.mark.parametrize("folder", [*SETS, "seeds-0-5"])
def test_on_gridshift_re_adaptation_separates_no_method_and_grpo_dis_learns_little(folder):
    rows = _table(_spec("readaptation", GRID / folder))
    assert not any(row["next below"].startswith("separated") for row in rows)
    assert all(_number(row["re-adaptation IQM [95% CI]"]) <= 0.05 for row in rows)
    if folder == "seeds-0-5":
        assert rows[0]["method"] == "grpo_dis"
        assert max(float(rows[0]["post-shift score"]), float(rows[0]["control"])) <= 0.05


TOOL = KEPT / "families" / "ToolShift"


def test_on_toolshift_the_single_rollout_methods_stay_above_the_floor_and_group_ones_fall():
    board = _table(_spec("leaderboard", TOOL / "seeds-0-5"))
    assert [row["method"] for row in board] == [
        "sao_running_mean",
        "sao",
        "frozen",
        "grpo",
        "grpo_dis",
    ]
    iqm = {row["method"]: _number(row["IQM [95% CI]"]) for row in board}
    assert min(iqm["sao"], iqm["sao_running_mean"]) > 0 > max(iqm["grpo"], iqm["grpo_dis"])
    seeds = _table(_spec("seeds", TOOL / "seeds-0-5"))
    (sao,) = [row for row in seeds if row["method"] == "sao"]
    assert sum(float(sao[f"seed {s}"]) > 0 for s in range(6)) == 5


def test_on_toolshift_both_sets_share_three_verdicts_and_sao_over_grpo_only_pooled():
    sets = [f"../{(TOOL / s).relative_to(ROOT).as_posix()}" for s in SETS]
    rows = {row["pair"]: row for row in _table(" ".join(["replication", *sets]))}
    replicated = {
        row["shared by all"]
        for row in rows.values()
        if row["shared by all"] not in ("no", "not separated")
    }
    assert replicated == {"frozen > grpo_dis", "sao > grpo_dis", "sao_running_mean > grpo_dis"}
    assert sorted(rows["grpo vs sao"][folder] for folder in sets) == ["not separated", "sao > grpo"]
    others = "sao_running_mean,grpo,grpo_dis"
    pooled = {
        row["other"]: row["verdict"]
        for row in _table(_spec("versus", TOOL / "seeds-0-5", "sao", others))
    }
    old = {
        row["other"]: row["verdict"]
        for row in _table(f"versus ../benchmarks/lite/seeds-0-5 sao {others} ToolShift")
    }
    assert pooled["grpo"] == old["grpo"] == "sao better"


def test_toolshifts_tuning_kept_the_tiers_point_for_group_methods_and_doubled_the_rate_for_sao():
    rows = _table(_spec("tuning", TOOL / "seeds-0-5"), index=1)
    chosen = {row["method"]: row["ToolShift"] for row in rows}
    expected = {
        "grpo": "optim.lr=0.00025, regularizers.kl_coef=0.3 (",  # the tier's
        "grpo_dis": "optim.lr=0.00025, regularizers.kl_coef=0.3 (",
        "sao": "optim.lr=0.0005, regularizers.kl_coef=0.3 (",
        "sao_running_mean": "optim.lr=0.0005, regularizers.kl_coef=0.3 (",
    }
    assert all(chosen[method].startswith(point) for method, point in expected.items())
    moved = [float(re.search(r"moved by (-?\d+\.\d+)", cell).group(1)) for cell in chosen.values()]
    assert min(moved) >= 0.2


@pytest.mark.parametrize("folder", [*SETS, "seeds-0-5"])
def test_on_toolshift_every_method_re_adapts_far_below_zero_and_none_is_separated(folder):
    rows = _table(_spec("readaptation", TOOL / folder))
    assert not any(row["next below"].startswith("separated") for row in rows)
    assert all(_number(row["re-adaptation IQM [95% CI]"]) < -0.4 for row in rows)
    assert all(float(row["control"]) > 0.6 for row in rows)


WARM = ROOT / "benchmarks" / "warm-starts"


def _summary(folder: Path) -> dict:
    return json.loads((folder / "warm_start.json").read_text())


@pytest.mark.parametrize("family", FAMILIES)
def test_every_kept_runs_warm_start_is_kept_with_its_id(family):
    runs = pd.read_csv(_family(family) / "seeds-0-5" / "results" / "runs.csv")
    used = set(zip(runs["warm_start_seed"], runs["warm_start"]))
    kept = {
        (k, _summary(WARM / "lite-protocol" / family / f"seed-{k}")["weights"]) for k in range(3)
    }
    assert used == kept


def test_gridshifts_third_warm_start_ends_its_fit_at_the_highest_loss():
    losses = [
        _summary(WARM / "lite-protocol" / "GridShift" / f"seed-{k}")["loss_last"] for k in range(3)
    ]
    assert losses[2] == max(losses) and losses[2] > losses[0] + 0.1


def test_codeshifts_warm_start_fits_the_same_data_in_about_half_the_seconds():
    code = WARM / "lite-protocol" / "CodeShift"
    old = _summary(code / "seed-0")
    probe = _summary(WARM / "probes" / "CodeShift-seed-0-refit" / "CodeShift" / "seed-0")
    newer = [_summary(code / f"seed-{k}") for k in (1, 2)] + [probe]
    assert all(fit["seconds"] < 0.6 * old["seconds"] for fit in newer)
    for fit in newer:  # the same settings but the seed (the probe's: the same seed too)
        assert {key for key in old["settings"] if fit["settings"][key] != old["settings"][key]} <= {
            "seed"
        }
    assert probe["settings"] == old["settings"]
    assert probe["demonstration_behaviors"] == old["demonstration_behaviors"]
    assert probe["loss_curve"][0] == pytest.approx(old["loss_curve"][0], rel=1e-6)
    assert probe["weights"] != old["weights"]


REASON = KEPT / "families" / "ReasonShift"


def test_on_reasonshift_the_single_rollout_methods_lead_and_grpo_dis_falls_below_the_floor():
    board = _table(_spec("leaderboard", REASON / "seeds-0-5"))
    assert [row["method"] for row in board] == [
        "sao_running_mean",
        "sao",
        "grpo",
        "frozen",
        "grpo_dis",
    ]
    assert board[3]["next below"].startswith("separated from grpo_dis")
    seeds = _table(_spec("seeds", REASON / "seeds-0-5"))
    (grpo_dis,) = [row for row in seeds if row["method"] == "grpo_dis"]
    assert all(float(grpo_dis[f"seed {s}"]) < 0 for s in range(6))


def test_on_reasonshift_both_sets_share_six_verdicts_and_sao_over_grpo_is_not_one():
    sets = [f"../{(REASON / s).relative_to(ROOT).as_posix()}" for s in SETS]
    rows = {row["pair"]: row for row in _table(" ".join(["replication", *sets]))}
    replicated = {
        row["shared by all"]
        for row in rows.values()
        if row["shared by all"] not in ("no", "not separated")
    }
    assert replicated == {
        "sao > frozen",
        "sao_running_mean > frozen",
        "frozen > grpo_dis",
        "grpo > grpo_dis",
        "sao > grpo_dis",
        "sao_running_mean > grpo_dis",
    }
    assert sorted(rows["grpo vs sao"][folder] for folder in sets) == ["not separated", "sao > grpo"]
    others = "sao_running_mean,grpo,grpo_dis"
    pooled = _table(_spec("versus", REASON / "seeds-0-5", "sao", others))
    old = _table(f"versus ../benchmarks/lite/seeds-0-5 sao {others} ReasonShift")
    verdicts = {row["other"]: row["verdict"] for row in pooled}
    assert verdicts["grpo"].startswith("not separated")
    assert {row["other"]: row["verdict"] for row in old}["grpo"] == "sao better"


def test_reasonshifts_tuning_moved_sao_and_grpo_dis_off_the_tiers_point():
    rows = _table(_spec("tuning", REASON / "seeds-0-5"), index=1)
    chosen = {row["method"]: row["ReasonShift"] for row in rows}
    expected = {
        "grpo": "optim.lr=0.001, regularizers.kl_coef=0.3 (",  # the tier's
        "sao_running_mean": "optim.lr=0.001, regularizers.kl_coef=0.3 (",
        "sao": "optim.lr=0.002, regularizers.kl_coef=0.3 (",
        "grpo_dis": "optim.lr=0.002, regularizers.kl_coef=0.03 (",
    }
    assert all(chosen[method].startswith(point) for method, point in expected.items())
    values = {m: float(re.search(r"\((-?\d+\.\d+);", cell).group(1)) for m, cell in chosen.items()}
    assert min(values, key=values.get) == "grpo_dis"
    moved = [float(re.search(r"moved by (-?\d+\.\d+)", cell).group(1)) for cell in chosen.values()]
    assert min(moved) > 0.25


@pytest.mark.parametrize("folder", [*SETS, "seeds-0-5"])
def test_on_reasonshift_sao_re_adapts_first_with_the_lowest_control(folder):
    rows = _table(_spec("readaptation", REASON / folder))
    assert rows[0]["method"] == "sao"
    controls = {row["method"]: float(row["control"]) for row in rows}
    assert min(controls, key=controls.get) == "sao"


def test_on_reasonshift_saos_first_phase_is_below_sao_running_means_and_grpos():
    sets = [f"../{(REASON / s).relative_to(ROOT).as_posix()}" for s in SETS]
    rows = _table(" ".join(["first-phase", *sets]))
    for folder in SETS:
        mean = {row["method"]: float(row["mean"]) for row in rows if row["set"] == folder}
        assert mean["sao"] < min(mean["sao_running_mean"], mean["grpo"])
