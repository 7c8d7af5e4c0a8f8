"""Fluid on a multi-node Ray cluster (raylets on this machine, logical GPUs): trials spread
over the nodes and a gang runs within one node where one has its GPUs; a whole node leaves
mid-run and another joins: Fluid re-plans for the GPUs that left and came, and every trial
completes with each iteration reported once."""

from __future__ import annotations

import threading
import time

import pytest
import ray
from ray.cluster_utils import Cluster

import fluid.train as ft
from fluid import FluidExecutor, tune
from tests.train.fluid_train_loops import gang, mlp_loop
from tests.tune.trainables import modeled

ITERS = 10


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    nodes = [c.add_node(num_cpus=1, num_gpus=2) for _ in range(2)]
    ray.init(address=c.address, log_to_driver=False)
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def _detached(nodes):
    """A GPU node the driver is not attached to: with several raylets on one host, Ray before 2.60
    may attach the driver to any of them, and removing that one would stop the driver."""
    driver = ray.get_runtime_context().get_node_id()
    return next(n for n in nodes if n.node_id != driver)


@pytest.mark.slow
def test_gangs_spread_over_nodes_each_within_one(cluster, tmp_path):
    c, nodes = cluster
    gpu_nodes = {n.node_id for n in nodes}
    ex = FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.05)
    analysis = tune.run(
        tune.with_resources(ft.elastic(mlp_loop), gang(2, cpus=0.1)),
        config={"iterations": 2, "node_ids": True, "lr": tune.grid_search([0.1, 0.2])},
        trial_executor=ex, storage_path=str(tmp_path), verbose=0,
    )
    where = []
    for trial in analysis.trials:
        assert trial.status == "TERMINATED", trial
        df = analysis.trial_dataframes[trial.trial_id]
        assert list(df["training_iteration"]) == [1, 2]
        assert set(df["world_size"]) == {2}  # each asked for a gang of 2: kept
        # a node has the two GPUs: the gang is not split over two (its collectives would
        # cross the network)
        assert set(df["num_nodes"]) == {1}, list(df["nodes"])
        where.append(df["nodes"].iloc[-1][0])
    # two gangs of two on two nodes of two GPUs: one on each
    assert sorted(where) == sorted(gpu_nodes)


@pytest.mark.slow
def test_node_leaves_and_joins(cluster, tmp_path):
    c, nodes = cluster
    ex = FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.05, eps=0.5)
    events = []

    out = {}

    def experiment():  # Tune may run in a thread; adding a node must happen in the main one
        out["analysis"] = tune.run(
            modeled,
            config={"t": tune.grid_search([0.6, 0.6, 1.2, 1.8]), "iters": ITERS},
            trial_executor=ex,
            storage_path=str(tmp_path),
            max_failures=5,
            verbose=0,
        )

    thread = threading.Thread(target=experiment, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(e["kind"] == "static" for e in ex.plan_log):
        time.sleep(0.5)
    time.sleep(6)  # every trial has started and reported
    c.remove_node(_detached(nodes))
    events.append(("removed", time.monotonic()))
    time.sleep(12)
    c.add_node(num_cpus=1, num_gpus=2)
    events.append(("added", time.monotonic()))
    thread.join(timeout=400)
    assert not thread.is_alive(), "the experiment did not finish"
    analysis = out["analysis"]
    assert [name for name, _ in events] == ["removed", "added"]
    for trial in analysis.trials:
        assert trial.status == "TERMINATED", trial
        df = analysis.trial_dataframes[trial.trial_id]
        assert list(df["it"]) == list(range(1, ITERS + 1)), (trial, list(df["it"]))
    seen = [e["gpus"] for e in ex.plan_log if e["kind"] == "cluster"]
    assert 2.0 in seen and seen[-1] == 4.0, seen
