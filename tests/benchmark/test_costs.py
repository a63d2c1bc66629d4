"""Job cost estimates: the prior against the kept lite-sizing measurements, the measured costs
taking over (hand-computed), and the cost tables' rows."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest

from sao_online.algorithms import build_method
from sao_online.benchmark.costs import (
    COLUMNS,
    RUN,
    WARM_START,
    CostBook,
    append_cost,
    method_weight,
    run_prior_seconds,
    warm_start_prior_seconds,
)
from sao_online.config import load_config
from sao_online.config.bundled import resolve_config

ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / "benchmarks" / "lite-sizing" / "costs.csv"
#: The settings column of the kept table, as overrides of each family's bundled config.
SETTINGS = {
    "StyleShift": ("demo", ["model.num_layers=2", "model.warm_start_steps=300",
                            "model.warm_start_batch_size=64"], "300 steps at batch 64"),
    "ToolShift": ("tool_shift", [], "configs/tool_shift.yaml"),
    "ReasonShift": ("reason_shift", ["model.warm_start_steps=1500"], "1500 steps at batch 32"),
    # Measured before GridShift-v1's smaller model: the config as it was then (its note says).
    "GridShift": ("grid_shift", ["model.hidden_size=128", "model.warm_start_steps=1500",
                                 "rollout.max_episode_tokens=768"],
                  "1500 SFT steps on episodes of up to 768 tokens"),
    "CodeShift": ("code_shift", [], "configs/code_shift.yaml"),
}  # fmt: skip


def config_of(family: str, extra: list[str] | None = None):
    name, overrides, _ = SETTINGS[family]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_config(str(resolve_config(name)), [*overrides, *(extra or [])])


def prior_of(row: dict[str, str]) -> float:
    budget = [f"budget.episodes={row['episodes']}"] if row["episodes"] else []
    config = config_of(row["family"], budget)
    if row["item"] == WARM_START:
        return warm_start_prior_seconds(config)
    config = load_config(config.to_dict(), [f"algorithm.name={row['method']}"])
    return run_prior_seconds(config, method_weight(build_method(config)))


def test_the_prior_is_within_30_percent_of_every_complete_kept_measurement():
    rows = list(csv.DictReader(KEPT.open()))
    for row in rows:
        # the overrides say what the row says it measured
        assert SETTINGS[row["family"]][2] in row["settings"] + row["note"]
    complete = [row for row in rows if not row["note"]]  # notes: lower bounds, extra work
    assert len(complete) >= 10
    for row in complete:
        ratio = prior_of(row) / float(row["cpu_seconds"])
        assert 0.7 <= ratio <= 1.3, (row["family"], row["item"], row["method"], ratio)
    # The largest warm start measured (a lower bound) is also the largest by the prior.
    warm = {row["family"]: prior_of(row) for row in rows if row["item"] == WARM_START}
    assert max(warm, key=warm.get) == "GridShift"


def test_method_weights_follow_what_an_update_does():
    weights = {}
    for method in ("frozen", "grpo", "sao"):
        config = config_of("ToolShift", [f"algorithm.name={method}"])
        weights[method] = method_weight(build_method(config))
    assert weights == {"frozen": 1, "grpo": 2, "sao": 4}
    config = config_of("ToolShift")  # 1500 episodes x 256 tokens x (1.9e-5 + 5.7e-10 x 2 x 64^2)
    assert run_prior_seconds(config, 2) == pytest.approx(1500 * 256 * 2.366944e-5 * 2)
    # 800 steps x batch 32 x 256 tokens x (5e-6 + 1.38e-9 x 2 x 64^2)
    assert warm_start_prior_seconds(config) == pytest.approx(800 * 32 * 256 * 1.630496e-5)


def row(kind, task, key, prior, cpu, name="x", session="s1", resumed=False):
    return {
        "session": session,
        "name": name,
        "kind": kind,
        "task": task,
        "work_key": key,
        "prior_seconds": str(prior),
        "cpu_seconds": str(cpu),
        "resumed": str(resumed),
    }


def test_the_same_work_measured_gives_the_estimate():
    book = CostBook(
        [
            row(RUN, "A", "k1", 10, 30, name="A/sao/seed-0"),
            row(RUN, "A", "k1", 10, 50, name="A/sao/seed-1"),
            row(RUN, "A", "k2", 10, 5, name="A/grpo/seed-0"),
        ]
    )
    assert book.estimate(RUN, "A", "k1", prior=10) == 40.0  # the mean of 30 and 50
    assert book.estimate(WARM_START, "A", "k1", prior=10) != 40.0  # another kind: not the same


def test_unmeasured_work_is_the_prior_times_the_measured_ratio_nearest_to_it():
    book = CostBook(
        [
            row(RUN, "A", "a1", 10, 20, name="1"),  # ratio 2
            row(RUN, "A", "a2", 10, 40, name="2"),  # ratio 4
            row(RUN, "A", "a3", 10, 100, name="3"),  # ratio 10
            row(RUN, "B", "b1", 2, 1, name="4"),  # ratio 0.5
            row(WARM_START, "C", "w1", 100, 300, name="5"),  # ratio 3
        ]
    )
    assert book.estimate(RUN, "A", "new", prior=5) == 5 * 4  # task A's median ratio
    assert book.estimate(RUN, "Z", "new", prior=5) == 5 * 3  # runs' median: 0.5 2 4 10 -> 3
    assert book.estimate(WARM_START, "Z", "new", prior=5) == 5 * 3  # warm starts: 3
    assert CostBook([row(RUN, "A", "a1", 10, 20)]).estimate(WARM_START, "Z", "n", 7) == 14
    assert CostBook([]).estimate(RUN, "A", "a1", prior=7) == 7  # nothing measured: the prior


def test_resumed_runs_duplicates_and_unreadable_rows_do_not_count():
    book = CostBook(
        [
            row(RUN, "A", "k", 10, 10, name="a"),
            row(RUN, "A", "k", 10, 10, name="a"),  # the same row from the other table
            row(RUN, "A", "k", 10, 1, name="b", resumed=True),  # only its remainder
            row(RUN, "A", "k", 10, "garbled", name="c"),
            {"kind": RUN, "work_key": "k"},
        ]
    )
    assert len(book.rows) == 1 and book.estimate(RUN, "A", "k", prior=99) == 10.0


def test_cost_rows_append_under_one_header_and_read_back(tmp_path):
    path = tmp_path / "deep" / "costs.csv"
    append_cost(path, {**row(RUN, "A", "k", 10, 12.5, name="A/sao/seed-0"), "extra": "dropped"})
    append_cost(path, row(WARM_START, "A", "w", 100, 250, name="A/warm-start"))
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 3
    book = CostBook.read([path, tmp_path / "missing.csv"])
    assert [r["cpu_seconds"] for r in book.rows] == [12.5, 250.0]
    assert book.estimate(WARM_START, "A", "w", prior=1) == 250.0


def test_each_measured_job_re_estimates_the_jobs_still_waiting():
    from sao_online.benchmark.local_runner import ScheduledJobs
    from sao_online.jobs.scheduler import Work

    def job(task, seed, prior):
        name = f"{task}/sao/seed-{seed}"
        return {"name": name, "kind": RUN, "task": task, "work_key": task, "prior_seconds": prior,
                "estimate_seconds": prior}  # fmt: skip

    jobs = [job("A", 0, 10), job("B", 0, 20), job("A", 1, 10), job("B", 1, 20), job("C", 1, 1)]
    work = [Work(j["name"], j["prior_seconds"], rank=int(j["name"][-1])) for j in jobs]
    source = ScheduledJobs(jobs, work, cores=1, book=CostBook([]))
    order = []
    for cpu in (20, 60):  # B's seed-0 run costs its prior; A's six times its prior
        [started] = source.start_now()
        order.append(started["name"])
        source.measured({**started, "session": "s", "cpu_seconds": cpu, "resumed": False})
        source.ended(started["name"], succeeded=True)
    assert order == ["B/sao/seed-0", "A/sao/seed-0"]
    # Seed 1: A's run is now estimated by A's measured cost (60), B's by B's (20), C (never
    # measured) by its prior times the median measured/prior ratio of the runs: (1 + 6) / 2.
    estimates = {name: source.jobs[name]["estimate_seconds"] for name in source.jobs}
    assert estimates["A/sao/seed-1"] == 60 and estimates["B/sao/seed-1"] == 20
    assert estimates["C/sao/seed-1"] == 3.5
    assert estimates["A/sao/seed-0"] == 10  # a started job keeps the estimate it started with
    assert source.start_now()[0]["name"] == "A/sao/seed-1"  # by the first estimates: B's
