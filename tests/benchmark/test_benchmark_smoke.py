"""The whole smoke tier from the command line, with the documented "benchmark your own method"
example in it: every family, the frozen floor, the scorecard, provenance, and --resume."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sao_online.util.cache import weights_id

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {"StyleShift", "ToolShift", "ReasonShift", "GridShift", "CodeShift"}


def documented_example() -> str:
    page = (ROOT / "docs" / "guides" / "benchmarking.md").read_text()
    section = page.split("## Benchmark your own method", 1)[1].split("\n## ", 1)[0]
    [example] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    [command] = re.findall(r"```bash\n(sao-online benchmark .*?)\n```", section, flags=re.S)
    return example, command


def cli(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SAO_ONLINE_CACHE": str(cwd / "cache")}
    env.pop("PYTHONPATH", None)  # my_methods is found because it is in the current directory
    command = Path(sys.executable).parent / "sao-online"
    return subprocess.run(
        [str(command), *args], cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True
    )


def test_the_smoke_tier_with_a_users_method_runs_end_to_end_and_resumes(tmp_path):
    example, command = documented_example()
    (tmp_path / "my_methods.py").write_text(example)
    args = command.split()[1:]
    assert args[:3] == ["benchmark", "--tier", "smoke"] and "my_methods:make_method" in command

    first = cli(args, tmp_path)
    assert first.returncode == 0, first.stderr[-4000:]
    out = tmp_path / "bench"
    runs = pd.read_csv(out / "results" / "runs.csv")
    assert set(runs["task"]) == FAMILIES
    assert set(runs["method"]) == {"frozen", "sao", "grpo", "rloo_dis"}  # the floor added
    assert len(runs) == 20 and set(runs["seed"]) == {0}
    assert set(runs.loc[runs["method"] == "rloo_dis", "method_spec"]) == {"my_methods:make_method"}
    # Every run reached its budget; each finished run got its own line.
    budgets = {"StyleShift": 96}
    assert all(runs["episodes"] == runs["task"].map(lambda t: budgets.get(t, 64)))
    assert len(re.findall(r"^\[\d+/20\] ", first.stderr, flags=re.M)) == 20

    phases = pd.read_csv(out / "results" / "phases.csv")
    shifts = pd.read_csv(out / "results" / "shifts.csv")
    assert set(shifts.groupby("task")["shift"].max().items()) == {
        ("StyleShift", 2),
        ("ToolShift", 1),
        ("ReasonShift", 1),
        ("GridShift", 1),
        ("CodeShift", 1),
    }
    assert (phases["oracle_mean"] > 0.5).all()  # every phase has something to learn
    benchmark = json.loads((out / "results" / "benchmark.json").read_text())
    [record] = benchmark["provenance"].values()
    assert len(record["commit"]) == 40 and isinstance(record["dirty"], bool)
    assert record["machine"]["cores"] >= 1 and record["packages"]["torch"]
    assert benchmark["protocol"]["methods"]["rloo_dis"]["spec"] == "my_methods:make_method"
    assert set(benchmark["protocol"]["tasks"]) == FAMILIES
    [session] = benchmark["sessions"]  # how long this command took, kept with the data
    assert session["runs"] == 20 and session["warm_starts"] == 4 and session["seconds"] > 0
    # ...and how busy it kept the cores: its CPU time holds what every job measured of itself.
    assert session["cpu_seconds"] >= session["jobs_cpu_seconds"] - 0.1 > 0
    assert 0 < session["core_share"] <= 1 and 0 < session["allotted_share"] <= 1
    assert 0 < session["planned_share"] <= 1 and session["planned_seconds"] > 0
    costs = pd.read_csv(out / "results" / "costs.csv")  # one measured row per job
    assert sorted(costs["kind"].value_counts().items()) == [("run", 20), ("warm start", 4)]
    assert (costs["cpu_seconds"] > 0).all()
    assert (tmp_path / "cache" / "benchmark-costs.csv").exists()  # the machine's table
    card = (out / "scorecard.md").read_text()
    assert "## Leaderboard" in card and "rloo_dis" in card
    assert all(f"### {family}" in card for family in FAMILIES)
    for name in (
        "aggregate_intervals",
        "performance_profiles",
        "improvement_matrix",
        "recovery_grid",
    ):
        assert (out / "figures" / f"{name}.png").stat().st_size > 10_000

    # --resume: every run has its result, nothing runs again, nothing is rewritten.
    results = sorted((out / "results" / "runs").rglob("*.json"))
    stamps = [path.stat().st_mtime_ns for path in results]
    again = cli([*args, "--resume"], tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "20 of 20 runs finished earlier: kept, not run again" in again.stderr
    assert [path.stat().st_mtime_ns for path in results] == stamps
    assert len(json.loads((out / "results" / "benchmark.json").read_text())["sessions"]) == 1
    refused = cli(args, tmp_path)
    assert refused.returncode == 2
    assert "holds a benchmark already; --resume continues it" in refused.stderr

    # Each run recorded the weights it started from: one warm start per task, the cached one.
    exported = cli(["benchmark", "warm-starts", "--tier", "smoke", "--export", "shared"], tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    shared = tmp_path / "shared"
    assert sorted(p.name for p in shared.iterdir()) == sorted(FAMILIES - {"CodeShift"})
    weights = runs.groupby("task")["warm_start"].unique()
    assert pd.isna(weights["CodeShift"]).all()  # its smoke setting starts from no warm start
    for task in FAMILIES - {"CodeShift"}:
        assert list(weights[task]) == [weights_id(shared / task)]
        assert f"{task}: weights {weights_id(shared / task)} -> shared/{task}" in exported.stdout
    # Another machine's StyleShift warm start: the same config, other weights; the other
    # tasks fitted here.
    mine = weights_id(shared / "StyleShift")
    theirs = _as_another_machine_fitted(shared / "StyleShift")
    for task in FAMILIES - {"CodeShift", "StyleShift"}:
        shutil.rmtree(shared / task)
    styleshift = out / "results" / "runs" / "StyleShift"
    (styleshift / "sao" / "seed-0.json").unlink()
    mixed = cli([*args, "--resume", "--warm-starts", str(shared)], tmp_path)
    assert mixed.returncode == 2
    assert (
        f"--resume: task StyleShift's finished runs started from the warm start {mine}; its "
        f"next runs would start from {theirs}."
    ) in mixed.stderr
    cached = [weights_id(path) for path in (tmp_path / "cache" / "warm-start").iterdir()]
    assert mine in cached and theirs not in cached  # refused before anything changed
    for path in styleshift.rglob("*.json"):
        path.unlink()
    moved = cli([*args, "--resume", "--warm-starts", str(shared)], tmp_path)
    assert moved.returncode == 0, moved.stderr[-3000:]
    assert f"StyleShift: warm start {theirs} from {shared / 'StyleShift'}" in moved.stderr
    again = pd.read_csv(out / "results" / "runs.csv").groupby("task")["warm_start"].unique()
    assert list(again["StyleShift"]) == [theirs]
    assert list(again["ToolShift"]) == list(weights["ToolShift"])  # fitted here, as before


def _as_another_machine_fitted(folder: Path) -> str:
    """Change an exported warm start's weights slightly, as another machine's fit of the same
    config differs, recording the new weights id as its export would; return it."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    save_file({k: v * 1.001 for k, v in tensors.items()}, folder / "model.safetensors")
    summary = json.loads((folder / "warm_start.json").read_text())
    (folder / "warm_start.json").write_text(json.dumps({**summary, "weights": weights_id(folder)}))
    return weights_id(folder)
