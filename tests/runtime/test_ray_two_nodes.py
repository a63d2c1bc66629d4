"""The Ray backend across two Ray nodes: rollout actors on the second, weights via the object store.

``ray.cluster_utils.Cluster`` starts a head node and a second node on this machine, each with
its own raylet and object store. Only the second node offers the custom resource the actors
ask for (``runtime.ray_worker_resources``), so every actor must run there and read each weight
version the learner (the driver, on the head node) puts in the object store.
"""

from __future__ import annotations

import pytest
import ray
from ray.cluster_utils import Cluster
from tiny_model import SMALLEST_MODEL, tiny_overrides

from sao_online.config import ConfigError, load_config
from sao_online.rundir.runlog import RunLog
from sao_online.runtime import backends
from sao_online.runtime.launch import run_experiment

TINY = tiny_overrides(
    "rollout.max_action_tokens=6",
    "rollout.batch_size=4",
    "rollout.num_slots=4",
    "runtime.backend=ray",
    "runtime.num_workers=2",
    "algorithm.critic_warmup_steps=0",
    "logging.checkpoint_every=0",
    "eval.every_updates=0",
    "budget.episodes=8",
    "runtime.max_staleness=0",
    model=SMALLEST_MODEL,
)
_SMALL_STORE = 80 * 1024 * 1024
# Both tests on one xdist worker: the cluster (two raylets, about 10 s to start) is started once.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("ray-two-nodes")]


@pytest.fixture(scope="module")
def two_nodes():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "object_store_memory": _SMALL_STORE,
            "include_dashboard": False,
        },
    )
    rollout_node = cluster.add_node(
        num_cpus=2, resources={"rollout_node": 2}, object_store_memory=_SMALL_STORE
    )
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster, rollout_node
    ray.shutdown()
    cluster.shutdown()


def test_rollout_actors_run_on_the_second_node_and_the_run_completes(
    two_nodes, tmp_path, monkeypatch
):
    cluster, rollout_node = two_nodes
    pools = []
    make_pool = backends.make_pool

    def recording_make_pool(*args, **kwargs):
        pools.append(make_pool(*args, **kwargs))
        return pools[-1]

    monkeypatch.setattr(backends, "make_pool", recording_make_pool)
    config = load_config(None, TINY + ["runtime.ray_worker_resources={rollout_node: 1}"])
    summary = run_experiment(config, tmp_path, threads=1)

    assert summary["updates"] == 2
    episodes, updates = RunLog(tmp_path).read("episodes"), RunLog(tmp_path).read("updates")
    assert len(episodes) == 8 and not episodes["dropped"].any()
    # Both actors ran on the second node, not on the head node where the driver is.
    (pool,) = pools
    head_node = ray.get_runtime_context().get_node_id()
    assert sorted(pool.placements) == [0, 1]
    assert set(pool.placements.values()) == {rollout_node.node_id} != {head_node}
    # The learner's second version reached the second node through the object store: with
    # staleness 0 the second batch was sampled with it.
    assert updates["staleness/max"].max() == 0
    assert episodes["policy_version"].tolist() == [0] * 4 + [1] * 4


def test_a_resource_no_node_offers_is_refused_by_name(two_nodes, tmp_path):
    config = load_config(None, TINY + ["runtime.ray_worker_resources={gpu_node: 1}"])
    with pytest.raises(ConfigError, match="'gpu_node'"):
        run_experiment(config, tmp_path, threads=1)
