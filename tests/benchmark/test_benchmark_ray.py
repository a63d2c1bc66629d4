"""``benchmark --backend ray`` on a two-node ``ray.cluster_utils.Cluster``: each run a task that
asks for its task's CPUs, warm starts built once and shipped to the other node through the
object store, and --resume running only what has no result."""

from __future__ import annotations

import json

import pytest
import ray
from ray.cluster_utils import Cluster

from sao_online.benchmark import run_benchmark

_SMALL_STORE = 80 * 1024 * 1024
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("ray-benchmark")]

TINY = {
    "model": {
        "num_layers": 1,
        "hidden_size": 32,
        "warm_start": True,
        "warm_start_steps": 4,
        "warm_start_batch_size": 8,
    },
    "rollout": {
        "batch_size": 8,
        "num_slots": 8,
        "max_turns": 1,
        "max_action_tokens": 8,
        "max_episode_tokens": 96,
    },
    "runtime": {"backend": "sync"},
    "budget": {"episodes": 16},
    "logging": {"checkpoint_every": 0, "transcripts_every": 0},
    "schedule": {
        "parameters": {
            "preferred": {"kind": "abrupt", "values": ["cute", "chuunibyou"], "at": [0, 8]}
        }
    },
}


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    # Each node and this process (the driver) has a cache of its own, as on separate machines.
    caches = [tmp_path_factory.mktemp(name) for name in ("head", "node", "driver")]
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "object_store_memory": _SMALL_STORE,
            "include_dashboard": False,
            "env_vars": {"SAO_ONLINE_CACHE": str(caches[0])},
        },
    )
    wide = cluster.add_node(
        num_cpus=2,
        object_store_memory=_SMALL_STORE,
        env_vars={"SAO_ONLINE_CACHE": str(caches[1])},
    )
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster, wide, caches
    ray.shutdown()
    cluster.shutdown()


def test_runs_are_ray_tasks_placed_by_their_cpus_and_resume_runs_only_the_missing(
    two_nodes, tmp_path, monkeypatch
):
    cluster, wide, caches = two_nodes
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(caches[2]))
    suite = {
        "suite": "two-node",
        "methods": ["sao_running_mean"],
        "tasks": {"Narrow": {"config": TINY, "cpus": 1}, "Wide": {"config": TINY, "cpus": 2}},
        "tiers": {"smoke": {"seeds": 1}},
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))  # JSON is YAML, no aliases
    out = tmp_path / "bench"
    card = run_benchmark(
        out=out, suite=tmp_path / "suite.yaml", backend="ray", progress=False, reps=100
    )
    assert card.is_file()
    results = {
        path.parent.parent.name + "/" + path.parent.name: json.loads(path.read_text())
        for path in (out / "results" / "runs").rglob("seed-0.json")
    }
    assert sorted(results) == [
        "Narrow/frozen",
        "Narrow/sao_running_mean",
        "Wide/frozen",
        "Wide/sao_running_mean",
    ]
    # Only the second node has 2 CPUs: every run of Wide went there.
    assert {results[f"Wide/{m}"]["ray_node"] for m in ("frozen", "sao_running_mean")} == {
        wide.node_id
    }
    assert all(r["run"]["episodes"] == 16 for r in results.values())

    # The warm start was built once (its task ran on one node) and shipped: the second node,
    # where Wide's runs went, and the driver hold it, and every copy is that one build (the
    # same warm_start.json, which records the build's own time).
    def builds():
        found = []
        for cache in caches:
            folder = cache / "warm-start"
            kept = (
                [p for p in folder.iterdir() if not p.name.startswith(".")]
                if folder.exists()
                else []
            )
            assert len(kept) <= 1
            found += [(p / "warm_start.json").read_text() for p in kept]
        return found

    assert (caches[1] / "warm-start").is_dir() and (caches[2] / "warm-start").is_dir()
    assert len(set(builds())) == 1

    # Resume: one result is gone; only that run runs again.
    lost = out / "results" / "runs" / "Narrow" / "frozen" / "seed-0.json"
    kept = [p for p in (out / "results" / "runs").rglob("*.json") if p != lost]
    stamps = [p.stat().st_mtime_ns for p in kept]
    lost.unlink()
    run_benchmark(
        out=out, suite=tmp_path / "suite.yaml", backend="ray", resume=True, progress=False, reps=100
    )
    assert lost.is_file()
    assert [p.stat().st_mtime_ns for p in kept] == stamps
    assert len(set(builds())) == 1  # the resumed run got the driver's copy: no second build


def test_a_task_needing_more_cpus_than_any_node_is_refused_by_name(two_nodes, tmp_path):
    suite = {
        "suite": "too-wide",
        "methods": ["frozen"],
        "tasks": {"Huge": {"config": TINY, "cpus": 8}},
        "tiers": {"smoke": {"seeds": 1}},
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))  # JSON is YAML, no aliases
    with pytest.raises(ValueError, match="task Huge: a run needs 8 CPUs; the largest node"):
        run_benchmark(
            out=tmp_path / "b", suite=tmp_path / "suite.yaml", backend="ray", progress=False
        )
