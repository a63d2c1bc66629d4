"""docs/protocol_pilot.md: the pilot's kept results came from one committed tree on one machine,
on seed sets disjoint from each other and from the tuning seeds, and each finding the page
states holds in the tables it shows (which ``test_kept_results`` ties to the data)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "protocol_pilot.md"
KEPT = ROOT / "benchmarks" / "protocol-pilots" / "StyleShift"
PROBE = ROOT / "benchmarks" / "protocol-pilots" / "StyleShift-sao-no-critic-warmup"
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


def test_every_kept_folder_came_from_one_committed_tree_on_one_machine():
    folders = [path.parents[1] for path in KEPT.rglob("results/benchmark.json")]
    assert len(folders) == 3 + 4  # two sets, pooled, and the four grid points
    records = [record for folder in folders for record in _provenance(folder)]
    assert {record["commit"] for record in records} == {records[0]["commit"]}
    assert not any(record["dirty"] for record in records)
    assert len({record["machine"]["cpu_model"] for record in records}) == 1


def test_the_seed_sets_are_disjoint_from_each_other_and_from_the_tuning_seeds():
    import pandas as pd

    seeds = {name: set(pd.read_csv(KEPT / name / "results" / "runs.csv")["seed"]) for name in SETS}
    assert seeds == {"seeds-0-2": {0, 1, 2}, "seeds-3-5": {3, 4, 5}}
    tuning = json.loads((KEPT / "seeds-0-5" / "results" / "benchmark.json").read_text())
    assert set(tuning["protocol"]["tuning"]["seeds"]) == {100, 101}


def test_tuning_chose_the_tiers_setting_for_every_method_and_sao_moved_least():
    rows = _table(f"tuning ../{KEPT.relative_to(ROOT).as_posix()}/seeds-0-5", index=1)
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
    folder = f"../{KEPT.relative_to(ROOT).as_posix()}"
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
    rows = _table(f"seeds ../{KEPT.relative_to(ROOT).as_posix()}/seeds-0-5")
    learning = [row for row in rows if row["method"] in LEARNING]
    seeds = [f"seed {k}" for k in range(6)]
    first = [float(row[s]) for row in learning if row["phase"].startswith("1:") for s in seeds]
    second = [float(row[s]) for row in learning if row["phase"].startswith("2:") for s in seeds]
    assert len(first) == len(second) == 24
    assert max(first) < 0
    assert sum(value > 0 for value in second) == 21


@pytest.mark.parametrize("seed_set", SETS)
def test_every_method_re_adapts_below_zero_and_saos_control_is_the_lowest(seed_set):
    rows = _table(f"readaptation ../{KEPT.relative_to(ROOT).as_posix()}/{seed_set}")
    by_method = {row["method"]: row for row in rows}
    assert set(by_method) == set(LEARNING)
    assert all(_number(row["re-adaptation IQM [95% CI]"]) < 0 for row in rows)
    assert rows[0]["method"] == "sao" and rows[0]["next below"].startswith("separated")
    controls = {method: float(row["control"]) for method, row in by_method.items()}
    assert min(controls, key=controls.get) == "sao"


@pytest.mark.parametrize("seed_set", SETS)
def test_without_its_warm_up_saos_control_and_re_adaptation_join_the_other_methods(seed_set):
    pilot = _table(f"readaptation ../{KEPT.relative_to(ROOT).as_posix()}/{seed_set}")
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


def test_the_probe_came_from_the_pilots_commit_on_its_seeds():
    import pandas as pd

    (pilot,) = {record["commit"] for record in _provenance(KEPT / "seeds-0-5")}
    records = _provenance(PROBE / "seeds-0-5")
    assert {record["commit"] for record in records} == {pilot}
    assert not any(record["dirty"] for record in records)
    runs = pd.read_csv(PROBE / "seeds-0-5" / "results" / "runs.csv")
    assert set(runs["seed"]) == set(range(6)) and set(runs["method"]) == {"sao", "frozen"}


def test_the_pages_figure_is_the_kept_scorecards():
    kept = KEPT / "seeds-0-5" / "figures" / "recovery_grid.png"
    assert (ROOT / "docs" / "protocol_pilot_recovery.png").read_bytes() == kept.read_bytes()


def test_the_timing_section_names_each_grid_points_setting():
    text = PAGE.read_text()
    expected = {0: (0.0005, 0.3), 1: (0.0005, 0.03), 2: (0.001, 0.3), 3: (0.001, 0.03)}
    labels = {
        0: "the tier's setting",
        1: "KL 0.03",
        2: "learning rate 1e-3)",
        3: "learning rate 1e-3, KL 0.03)",
    }
    for point, (lr, kl) in expected.items():
        suite = (KEPT / "tune" / "points" / f"point-{point}" / "suite.yaml").read_text()
        assert f"optim.lr: {lr}" in suite and f"regularizers.kl_coef: {kl}\n" in suite
        assert f"Grid point {point} ({labels[point]}" in text


def test_the_warm_up_share_the_page_names_is_the_tuned_suites():
    from sao_online.benchmark import plan_tier

    (task,) = plan_tier(KEPT / "tune" / "suite.yaml", "lite").tasks
    config = task.load(["algorithm.name=sao"])
    share = config.algorithm.critic_warmup_steps * config.rollout.batch_size / 600  # each phase
    assert f"as here ({share:.0%} of each)" in " ".join(PAGE.read_text().split())
