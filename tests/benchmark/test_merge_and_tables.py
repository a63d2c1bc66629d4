"""``benchmark merge`` pools one protocol's results and refuses another's, naming the
difference; ``benchmark tables`` keeps Markdown tables equal to the data they name."""

from __future__ import annotations

import copy
import json
import re

import pandas as pd
import pytest
from benchmark_synthetic import protocol, record, write_results

from sao_online.benchmark import ProtocolMismatch, merge_results
from sao_online.benchmark.scorecard import ResultsError
from sao_online.benchmark.tables import TableSpecError, update_tables
from sao_online.cli import main

TASKS = {"T": "F", "U": "G"}
METHODS = ["frozen", "a", "b"]


def _seed_set(folder, seeds, proto=None, b_score=0.2, tasks=TASKS):
    records = []
    for task in tasks:
        for seed in seeds:
            records.append(record(task, TASKS[task], "frozen", seed, [0.2, 0.2], [1.0, 1.0]))
            records.append(
                record(task, TASKS[task], "a", seed, [0.4, 0.7 + 0.01 * seed], [1.0, 1.0])
            )
            records.append(
                record(task, TASKS[task], "b", seed, [0.4, b_score + 0.01 * seed], [1.0, 1.0])
            )
    return write_results(folder, records, proto or protocol(TASKS, METHODS))


def test_merge_pools_disjoint_seed_sets_and_says_what_both_conclude(tmp_path):
    first = _seed_set(tmp_path / "one", [0, 1, 2])
    second = _seed_set(tmp_path / "two", [3, 4, 5])
    card = merge_results([first, second], tmp_path / "pooled", reps=300)
    runs = pd.read_csv(tmp_path / "pooled" / "results" / "runs.csv")
    assert sorted(runs["seed"].unique()) == [0, 1, 2, 3, 4, 5] and len(runs) == 36
    text = card.read_text()
    assert "Which conclusions each result set reaches on its own" in text
    assert "| a vs b | a > b | a > b | a > b |" in text  # shared by both sets
    merged = (tmp_path / "pooled" / "results" / "benchmark.json").read_text()
    assert '"seeds": [\n    3,' in merged or '"seeds": [3, 4, 5]' in merged.replace("\n", "")


def test_merge_refuses_a_different_protocol_naming_the_difference(tmp_path):
    first = _seed_set(tmp_path / "one", [0, 1, 2])
    other = protocol(TASKS, METHODS, budget=40)
    second = _seed_set(tmp_path / "two", [3, 4, 5], proto=other)
    with pytest.raises(ProtocolMismatch, match=r"task T: budget.episodes: 20 vs 40"):
        merge_results([first, second], tmp_path / "pooled")
    tier = copy.deepcopy(protocol(TASKS, METHODS))
    tier["tier"] = "lite"
    third = _seed_set(tmp_path / "three", [6], proto=tier)
    with pytest.raises(ProtocolMismatch, match=r"differ in tier: 'smoke' vs 'lite'"):
        merge_results([first, third], tmp_path / "pooled")
    tuned = copy.deepcopy(protocol(TASKS, METHODS))
    tuned["methods"]["a"]["algorithm"]["U"] = {"name": "a", "lr": 2}
    fourth = _seed_set(tmp_path / "four", [7], proto=tuned)
    with pytest.raises(ProtocolMismatch, match=r"method a on task U: algorithm lr"):
        merge_results([first, fourth], tmp_path / "pooled")


def test_a_config_field_added_since_a_set_was_kept_differs_only_off_its_default(tmp_path):
    # The first set was kept before algorithm.tis_cap existed; the second records it.
    first = _seed_set(tmp_path / "one", [0, 1, 2])

    def with_cap(cap):
        newer = copy.deepcopy(protocol(TASKS, METHODS))
        for task in newer["tasks"].values():
            task["config"]["algorithm"] = {"tis_cap": cap}
            task["config_hash"] = f"recorded with tis_cap {cap}"
        newer["methods"]["a"]["algorithm"]["U"]["tis_cap"] = cap
        return newer

    second = _seed_set(tmp_path / "two", [3, 4, 5], proto=with_cap(2.0))  # its default
    merge_results([first, second], tmp_path / "pooled", reps=50)
    third = _seed_set(tmp_path / "three", [6], proto=with_cap(3.0))
    with pytest.raises(ProtocolMismatch, match=r"task T: algorithm.tis_cap: '\(absent\)' vs 3.0"):
        merge_results([first, third], tmp_path / "pooled-3")


def test_merge_refuses_a_run_present_twice(tmp_path):
    first = _seed_set(tmp_path / "one", [0, 1])
    second = _seed_set(tmp_path / "two", [1, 2])
    with pytest.raises(ResultsError, match="a seed 1 on T is in both"):
        merge_results([first, second], tmp_path / "pooled")


def _one_task(folder, task, seeds, methods=METHODS, budget=40, a_score=0.9):
    """``task`` alone, measured under another config (budget) with ``a`` scoring ``a_score``."""
    rewards = {"frozen": 0.2, "a": a_score, "b": 0.3}
    records = [
        record(task, TASKS[task], method, seed, [0.4, rewards[method]], [1.0, 1.0])
        for method in methods
        for seed in seeds
    ]
    return write_results(folder, records, protocol({task: TASKS[task]}, methods, budget=budget))


def test_merge_takes_a_task_measured_again_from_another_folder(tmp_path):
    first = _seed_set(tmp_path / "one", [0, 1, 2])
    again = _one_task(tmp_path / "u-again", "U", [0, 1, 2])
    merge_results([first], tmp_path / "pooled", reps=200, task_from={"U": again})
    results = tmp_path / "pooled" / "results"
    phases = pd.read_csv(results / "phases.csv")
    a_after = phases[(phases.method == "a") & (phases.phase == 1)].set_index(["task", "seed"])
    assert a_after.loc[("U", 1), "reward_mean"] == 0.9  # U's runs: the folder it was taken from
    assert a_after.loc[("T", 1), "reward_mean"] == pytest.approx(0.71)  # T's: the pooled one
    assert len(pd.read_csv(results / "runs.csv")) == 18  # U's first runs left out, not added
    merged = json.loads((results / "benchmark.json").read_text())
    tasks = merged["protocol"]["tasks"]
    assert tasks["U"]["config"]["budget"]["episodes"] == 40  # the config U was measured under
    assert tasks["T"]["config"]["budget"]["episodes"] == 20
    assert merged["protocol"]["methods"]["a"]["algorithm"].keys() == {"T", "U"}
    assert [(s["tasks"], s["seeds"]) for s in merged["sources"]] == [
        (["T"], [0, 1, 2]),
        (["U"], [0, 1, 2]),
    ]
    # The same from the command line; pooled with a second seed set, each set's conclusions
    # use the taken task's runs of its own seeds.
    second = _seed_set(tmp_path / "two", [3, 4, 5])
    again_all = _one_task(tmp_path / "u-all", "U", [0, 1, 2, 3, 4, 5])
    args = ["benchmark", "merge", str(first), str(second), "--task-from", f"U={again_all}"]
    assert main([*args, "--out", str(tmp_path / "both"), "--reps", "200"]) == 0
    text = (tmp_path / "both" / "scorecard.md").read_text()
    assert "| a vs b | a > b | a > b | a > b |" in text
    assert len(pd.read_csv(tmp_path / "both" / "results" / "runs.csv")) == 36


def test_two_tasks_taken_from_one_folder_bring_its_sessions_once(tmp_path):
    tasks = {**TASKS, "V": "H"}

    def measured(folder, started):
        records = [
            record(task, tasks[task], method, seed, [0.2, 0.3 + 0.1 * i], [1.0, 1.0])
            for task in tasks
            for i, method in enumerate(METHODS)
            for seed in (0, 1, 2)
        ]
        write_results(folder, records, protocol(tasks, METHODS))
        recorded = json.loads((folder / "results" / "benchmark.json").read_text())
        recorded["sessions"] = [{"runs": 27, "started": started, "seconds": 1.0}]
        (folder / "results" / "benchmark.json").write_text(json.dumps(recorded))
        return folder

    first, again = measured(tmp_path / "one", "first"), measured(tmp_path / "again", "again")
    merge_results([first], tmp_path / "pooled", reps=200, task_from={"T": again, "U": again})
    merged = json.loads((tmp_path / "pooled" / "results" / "benchmark.json").read_text())
    assert [s["started"] for s in merged["sessions"]] == ["first", "again"]
    assert [s["tasks"] for s in merged["sources"]] == [["V"], ["T"], ["U"]]


def test_merge_refuses_a_task_folder_that_does_not_cover_the_others(tmp_path, capsys):
    first = _seed_set(tmp_path / "one", [0, 1, 2])
    cases = [
        (_one_task(tmp_path / "t", "T", [0, 1, 2]), "it holds no task U (it holds T)"),
        (
            _one_task(tmp_path / "short", "U", [0, 1]),
            "it lacks 3 run(s) on U that the other folders have (e.g. a seed 2)",
        ),
        (
            _one_task(tmp_path / "fewer", "U", [0, 1, 2], methods=["frozen", "a"]),
            "it lacks 3 run(s) on U that the other folders have (e.g. b seed 0)",
        ),
        (
            _one_task(tmp_path / "more", "U", [0, 1, 2, 3]),
            "it has 3 run(s) on U that the other folders lack (e.g. a seed 3)",
        ),
    ]
    for folder, message in cases:
        with pytest.raises(ResultsError, match=re.escape(message)):
            merge_results([first], tmp_path / "pooled", task_from={"U": folder})
    other_tier = protocol({"U": "G"}, METHODS, budget=40)
    other_tier["tier"] = "lite"
    records = [record("U", "G", m, s, [0.4, 0.5], [1.0, 1.0]) for m in METHODS for s in [0, 1, 2]]
    lite = write_results(tmp_path / "lite", records, other_tier)
    with pytest.raises(ProtocolMismatch, match="differ in tier: 'smoke' vs 'lite'"):
        merge_results([first], tmp_path / "pooled", task_from={"U": lite})
    for bad in ("U", f"={lite}", "U="):
        code = main(["benchmark", "merge", str(first), "--task-from", bad, "--out", "x"])
        assert code == 2
        assert capsys.readouterr().err.strip().endswith(f"expected TASK=FOLDER, got {bad!r}")


def _tuned(proto, task, where, rule="mean-normalized-score", seeds=(100, 101)):
    """``proto`` as a suite `benchmark tune` wrote for ``task`` in folder ``where`` records."""
    proto["tuning"] = {
        "rule": rule,
        "seeds": list(seeds),
        "from": where,
        "grids": {task: {"optim.lr": [0.001, 0.002]}},
        "chosen": {task: {m: {"point": 1, "value": 0.5, "sensitivity": 0.25} for m in ("a", "b")}},
    }
    return proto


def _tuned_task(folder, task, where, **tuning):
    records = [
        record(task, TASKS[task], m, s, [0.4, 0.5], [1.0, 1.0]) for m in METHODS for s in (0, 1)
    ]
    return write_results(
        folder, records, _tuned(protocol({task: TASKS[task]}, METHODS), task, where, **tuning)
    )


def test_families_tuned_on_their_own_keep_each_ones_tuning_when_pooled(tmp_path):
    t = _tuned_task(tmp_path / "t", "T", "t/tune")
    u = _tuned_task(tmp_path / "u", "U", "u/tune")
    merge_results([t], tmp_path / "pooled", reps=200, task_from={"U": u})
    tuning = json.loads((tmp_path / "pooled" / "results" / "benchmark.json").read_text())[
        "protocol"
    ]["tuning"]
    assert tuning["grids"].keys() == tuning["chosen"].keys() == {"T", "U"}
    assert tuning["from_by_task"] == {"T": "t/tune", "U": "u/tune"}
    assert tuning["from"] == "t/tune for T; u/tune for U"
    text = (tmp_path / "pooled" / "scorecard.md").read_text()
    assert "(t/tune for T; u/tune for U)" in text
    chosen = "optim.lr=0.002 (0.50; moved by 0.25)"
    assert f"| a | {chosen} | {chosen} |" in text  # T's choice and U's, each from its tune
    # Taken back out of the pooled folder, a task brings only its own tuning.
    merge_results([u], tmp_path / "again", reps=200, task_from={"T": tmp_path / "pooled"})
    again = json.loads((tmp_path / "again" / "results" / "benchmark.json").read_text())
    assert again["protocol"]["tuning"]["from"] == "t/tune for T; u/tune for U"
    # Tuned beside untuned, or by another rule or on other seeds: refused, named.
    plain = _one_task(tmp_path / "plain", "U", [0, 1], budget=20)
    other_rule = _tuned_task(tmp_path / "rule", "U", "u/tune", rule="mean-post-shift-score")
    other_seeds = _tuned_task(tmp_path / "seeds", "U", "u/tune", seeds=(200, 201))
    for folder, message in [
        (plain, "tuning: only the first was tuned by `benchmark tune`"),
        (other_rule, "tuning.rule: 'mean-normalized-score' vs 'mean-post-shift-score'"),
        (other_seeds, "tuning.seeds: [100, 101] vs [200, 201]"),
    ]:
        with pytest.raises(ProtocolMismatch, match=re.escape(message)):
            merge_results([t], tmp_path / "refused", reps=200, task_from={"U": folder})


def test_merge_from_the_command_line_is_one_line_on_a_mismatch(tmp_path, capsys):
    first = _seed_set(tmp_path / "one", [0])
    second = _seed_set(tmp_path / "two", [1], proto=protocol({"T": "F"}, METHODS), tasks=["T"])
    code = main(["benchmark", "merge", str(first), str(second), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.endswith("differ in their tasks: U in only one of them")


def test_tables_are_regenerated_from_their_data_and_checked(tmp_path):
    _seed_set(tmp_path / "data" / "set-1", [0, 1, 2])
    _seed_set(tmp_path / "data" / "set-2", [3, 4, 5])
    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text(
        "# Results\n\n"
        "<!-- benchmark-table: leaderboard ../data/set-1 -->\n(stale)\n<!-- /benchmark-table -->\n"
        "\ntext between\n\n"
        "<!-- benchmark-table: replication ../data/set-1 ../data/set-2 -->\n"
        "<!-- /benchmark-table -->\n"
    )
    assert update_tables([page]) == [str(page)]
    text = page.read_text()
    assert "(stale)" not in text and "| 1 | a | 0.64 [0.63, 0.65] |" in text
    assert "text between" in text and "| a vs b | a > b | a > b | a > b |" in text
    assert "| 3 | frozen | 0.00 | 1.00 | 6 |" in text  # no "-0.00"
    assert update_tables([page], check=True) == []  # in step with the data
    # The data changes (b now beats a): the page no longer matches it.
    _seed_set(tmp_path / "data" / "set-1", [0, 1, 2], b_score=0.95)
    assert update_tables([page], check=True) == [str(page)]
    assert page.read_text() == text  # --check changes nothing
    page.write_text(text.replace("leaderboard ../data/set-1", "podium ../data/set-1"))
    with pytest.raises(TableSpecError, match="unknown table kind 'podium'"):
        update_tables([page])


def test_a_sessions_table_is_what_the_benchmark_recorded_of_its_commands(tmp_path):
    from sao_online.benchmark.runner import write_tables

    records = [record("T", "F", method, 0, [0.2, 0.5], [1.0, 1.0]) for method in METHODS]
    out = tmp_path / "data" / "set-1"
    machine = {"usable_cores": 2, "cpu_model": "Some CPU"}
    write_tables(out, records, protocol(TASKS, METHODS))  # no session: no runs ran
    page = tmp_path / "docs" / "time.md"
    page.parent.mkdir()
    page.write_text("<!-- benchmark-table: sessions ../data/set-1 -->\n<!-- /benchmark-table -->\n")
    with pytest.raises(TableSpecError, match="sessions: ../data/set-1 records no session"):
        update_tables([page])
    # A benchmark that did not measure its CPU time, then a resumed one that did.
    measured = {"cpu_seconds": 55.2, "core_share": 0.8903, "other_share": 0.0449}
    for seconds, runs, use in ((146.4, 15, {}), (31.0, 2, {**measured, "ended": "stopped"})):
        session = {"seconds": seconds, "runs": runs, "warm_starts": 4, "machine": machine}
        write_tables(out, records, protocol(TASKS, METHODS), {**session, "backend": "local", **use})
    assert update_tables([page]) == [str(page)]
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ")]
    assert rows[0].endswith("| CPU seconds | cores busy | others' share | ended |")
    assert rows[1:] == [  # a session recorded before sessions said how they ended: finished
        "| 15 | 4 | 146.4 | local |  | 2 | Some CPU |  |  |  | finished |",
        "| 2 | 4 | 31 | local |  | 2 | Some CPU | 55.2 | 89% | 4% | stopped |",
    ]
    # Several folders: each command's row named by its folder below their common one.
    other = tmp_path / "data" / "tune" / "point-0"
    write_tables(other, records, protocol(TASKS, METHODS), {**session, "backend": "local"})
    page.write_text(
        "<!-- benchmark-table: sessions ../data/tune/point-0 ../data/set-1 -->\n"
        "<!-- /benchmark-table -->\n"
    )
    assert update_tables([page]) == [str(page)]
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| folder | runs | warm starts |")
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| tune/point-0",
        "| set-1",
        "| set-1",
    ]


def test_a_per_seed_table_shows_every_pooled_score(tmp_path):
    _seed_set(tmp_path / "one", [0, 1])
    page = tmp_path / "page.md"
    page.write_text("<!-- benchmark-table: seeds one -->\n<!-- /benchmark-table -->\n")
    update_tables([page])
    text = page.read_text()
    # a's phase-1 reward 0.7 + 0.01 seed over a floor of 0.2 and an oracle of 1.0
    assert "| T | 1: regime 1 | a | 0.62 | 0.64 |" in text
    assert "| U | 1: regime 1 | frozen | 0.00 | 0.00 |" in text
    assert "0: regime 0" not in text  # phase 0 is not pooled


def _with_warm_start(folder_records, weights, cpu="test CPU"):
    for item in folder_records:
        item["warm_start"] = weights
        item["provenance"] = {**item["provenance"], "machine": {"cpu_model": cpu}}
    return folder_records


def test_a_task_whose_runs_started_from_two_warm_starts_is_refused(tmp_path, capsys):
    def seed_set(folder, seeds, weights, cpu):
        records = [
            record(task, TASKS[task], method, seed, [0.4, 0.6], [1.0, 1.0])
            for task in TASKS
            for method in METHODS
            for seed in seeds
        ]
        return write_results(
            folder, _with_warm_start(records, weights, cpu), protocol(TASKS, METHODS)
        )

    first = seed_set(tmp_path / "one", [0, 1], "aaaaaaaaaaaaaaaa", "Intel Xeon")
    same = seed_set(tmp_path / "same", [2], "aaaaaaaaaaaaaaaa", "AMD EPYC")
    other = seed_set(tmp_path / "other", [3], "bbbbbbbbbbbbbbbb", "AMD EPYC")
    runs = pd.read_csv(first / "results" / "runs.csv")
    assert set(runs["warm_start"]) == {"aaaaaaaaaaaaaaaa"}
    merge_results([first, same], tmp_path / "fine", reps=100)  # one warm start: pooled
    with pytest.raises(ResultsError) as refused:
        merge_results([first, other], tmp_path / "pooled", reps=100)
    assert str(refused.value).startswith(
        "task T: its runs started from 2 different warm starts: aaaaaaaaaaaaaaaa (6 run(s), "
        "seeds 0, 1; Intel Xeon); bbbbbbbbbbbbbbbb (3 run(s), seeds 3; AMD EPYC). Its floor "
        "(frozen) and every score need one: "
    )
    assert "`sao-online benchmark --warm-starts FOLDER`" in str(refused.value)
    assert not (tmp_path / "pooled" / "scorecard.md").exists()
    # Results kept before runs recorded a warm start are not compared with anything.
    older = _seed_set(tmp_path / "older", [4])
    kept = pd.read_csv(older / "results" / "runs.csv").drop(columns="warm_start")
    kept.to_csv(older / "results" / "runs.csv", index=False)
    merge_results([first, older], tmp_path / "with-older", reps=100)
    pooled = pd.read_csv(tmp_path / "with-older" / "results" / "runs.csv")
    assert pooled.groupby("seed")["warm_start"].first().isna().tolist() == [False, False, True]
