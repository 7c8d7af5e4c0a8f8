"""An autoscaling cluster: no GPU when the experiment starts, then too few for a trial's request,
then enough. Fluid waits, says what it waits for in one line each time, and plans as nodes join;
each GPU node that joins gets an MPS daemon.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from fluid import FluidExecutor, tune
from tests.gpu.standins import StandIns
from tests.tune.trainables import modeled

ITERS = 3


@pytest.fixture(scope="module")
def growing():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 0})
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def _wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
def test_fluid_waits_for_gpu_nodes_and_plans_as_they_join(growing, tmp_path, caplog,
                                                           monkeypatch):
    asked = []  # what Fluid asks Ray's autoscaler for (no autoscaler here: recorded only)
    monkeypatch.setattr("fluid.tune._waiting.ask_autoscaler", asked.append)
    (bin_dir := tmp_path / "standins").mkdir()
    standins = StandIns.create(bin_dir)  # the nodes that join have MPS
    standins.gpus()
    for var in ("PATH", "PYTHONPATH"):  # their raylets inherit this process's environment
        monkeypatch.setenv(var, os.pathsep.join(p for p in (str(bin_dir), os.environ.get(var))
                                                if p))
    def two_gpus(config):  # an ordinary trainable asking for 2 GPUs: it gets them
        modeled(config)

    trainable = tune.with_resources(two_gpus, {"cpu": 0.1, "gpu": 2})
    ex = FluidExecutor(cpus_per_trial=0.1, eps=0.5)
    out = {}

    def experiment():  # Tune runs here; nodes are added from the main thread
        out["analysis"] = tune.run(trainable, config={"t": 0.3, "iters": ITERS,
                                                      "n": tune.grid_search([1, 2])},
                                   trial_executor=ex, storage_path=str(tmp_path), verbose=0)

    def said():
        return [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="fluid"):
        thread = threading.Thread(target=experiment, daemon=True)
        thread.start()
        assert _wait_for(lambda: len(said()) == 1, 120), said()
        assert "the Ray cluster has no GPU yet" in said()[0]
        growing.add_node(num_cpus=1, num_gpus=1)  # one GPU: still too few for 2
        assert _wait_for(lambda: len(said()) == 2, 60), said()
        assert "needs 2 GPUs, the cluster has 1" in said()[1]
        started_early = [t for t in ex.records.values() if t.actual is not None]
        growing.add_node(num_cpus=1, num_gpus=2)
        thread.join(timeout=300)
    assert not thread.is_alive(), "the experiment did not finish"
    assert started_early == []  # nothing ran before 2 GPUs were there
    for trial in out["analysis"].trials:
        assert trial.status == "TERMINATED", trial
        assert list(out["analysis"].trial_dataframes[trial.trial_id]["gpus"]) == [2.0] * ITERS
    assert [e["gpus"] for e in ex.plan_log if e["kind"] == "cluster"] == [1.0, 3.0]
    assert len(said()) == 2  # one line for each thing waited for
    # a GPU node while there is none, the trial's shape while too few, nothing once there
    assert asked == [[{"GPU": 1.0}], [], [{"CPU": 0.1, "GPU": 2.0}], []], asked
    # MPS by default: each GPU node got a daemon as it joined (the stand-ins say it has MPS),
    # and each was stopped at the end
    joined = sorted(n["NodeID"][:12] for n in ray.nodes() if n["Resources"].get("GPU"))
    lines = standins.lines()
    started = sorted(line.split()[1].split("/")[-2] for line in lines if line.startswith("start"))
    assert len(joined) == 2 and started == joined
    assert sum(line.endswith("stdin=quit") for line in lines) == 2
