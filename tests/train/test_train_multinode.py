"""Several raylets on one machine: a gang spanning nodes, MPS daemons and NVML sampling per
node."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import ray
from ray.cluster_utils import Cluster

import fluid.train as ft
from fluid.gpu import mps, nvml

from .fluid_train_loops import ResultLog, fit, gang, mlp_loop

# The fake NVML below must reach the node actors without tests/ on their sys.path.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

FAKE_MPS = """#!/bin/sh
if [ "$1" = "-d" ]; then echo "start $CUDA_MPS_PIPE_DIRECTORY" >> {log}
else echo "$(cat) $CUDA_MPS_PIPE_DIRECTORY" >> {log}; fi
"""


class FakeNVML:
    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=50)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=1, total=2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("fakebin")
    log = d / "mps.log"
    binary = d / "nvidia-cuda-mps-control"
    binary.write_text(FAKE_MPS.replace("{log}", str(log)))
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{d}{os.pathsep}{old}"
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False},
    )
    gpu_nodes = [c.add_node(num_cpus=1, num_gpus=2) for _ in range(2)]
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    yield SimpleNamespace(log=log, gpu_nodes={n.node_id for n in gpu_nodes})
    ray.shutdown()
    c.shutdown()
    os.environ["PATH"] = old


@pytest.mark.slow
def test_gang_of_three_spans_two_nodes_and_trains(cluster, tmp_path):
    manager = mps.MPSManager(
        enable_thread_percentage=True, require_gpu=False, root=str(tmp_path / "mps")
    )
    status = manager.start()
    assert set(status) == cluster.gpu_nodes, "one daemon per GPU node, none on the head"
    pipes = sorted(st["pipe_dir"] for st in status.values())
    starts = [ln for ln in Path(cluster.log).read_text().splitlines() if ln.startswith("start")]
    assert sorted(starts) == [f"start {p}" for p in pipes]
    try:
        log = ResultLog()
        grid = fit(
            ft.elastic(mlp_loop),
            gang(3),
            {"iterations": 3, "node_ids": True},
            str(tmp_path / "run"),
            callbacks=[log],
        )
        assert grid[0].error is None, grid[0].error
        res = log.results
        assert [r["training_iteration"] for r in res] == [1, 2, 3]
        assert {r["world_size"] for r in res} == {3} and {r["num_nodes"] for r in res} == {2}
        assert max(r["param_spread"] for r in res) < 1e-6
        assert res[-1]["loss"] < res[0]["loss"]
        # Gang workers hold whole GPUs and run NCCL (unsupported under MPS): no clients.
        assert all(st["grants"] == [] for st in manager.status().values())
    finally:
        manager.stop()
    lines = Path(cluster.log).read_text().splitlines()
    assert sorted(line for line in lines if line.startswith("quit")) == [f"quit {p}" for p in pipes]


def test_cluster_gpu_sampler_runs_one_sampler_per_gpu_node(cluster):
    sampler = nvml.ClusterGPUSampler(interval_s=0.1, nvml=FakeNVML())
    sampler.start()
    time.sleep(0.5)
    live = sampler.records()
    sampler.stop()
    rows = sampler.records()
    assert live and len(rows) >= len(live)
    assert {r.node for r in rows} == cluster.gpu_nodes
    assert {r.gpu_index for r in rows} == {0, 1}

    real = nvml.ClusterGPUSampler(interval_s=0.1)  # no NVML on these nodes
    real.start()
    real.stop()
    assert real.records() == []
