"""GPU memory as it is: each GPU node's free memory (NVML), read when the experiment first uses
the node, bounds packing; a node that joins later is read before anything is placed on it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import ray
from ray import tune

from fluid.core import Tunables
from fluid.gpu import nvml
from fluid.tune._gpu_memory import GpuMemory

from .standins import most_on_one_gpu


class Reader:
    """A fake node reader: each node's free GB (``None``: NVML sees no GPU there), and the
    nodes it was asked for, call by call."""

    def __init__(self, free: dict[str, float | None]) -> None:
        self.free, self.asked = free, []

    def __call__(self, nodes: list[str]) -> list[float | None]:
        self.asked.append(list(nodes))
        return [self.free[n] for n in nodes]


def test_the_limit_is_the_least_free_memory_of_the_nodes_read_less_headroom():
    reader = Reader({"a": 20.0, "b": 12.0, "c": None})
    memory = GpuMemory(None, Tunables(gpu_memory_headroom=0.25), reader=reader)
    assert memory.read(["a", "b", "c"])
    assert (memory.nvml_gb, memory.limit) == (12.0, 9.0)


def test_a_node_that_joins_later_is_read_once_and_only_it():
    reader = Reader({"a": 20.0, "b": 12.0, "c": 30.0})
    memory = GpuMemory(None, Tunables(), reader=reader)
    assert memory.read(["a"]) and memory.limit == pytest.approx(18.0)
    assert memory.read(["a", "b"]) and memory.limit == pytest.approx(10.8)  # b has less free
    assert not memory.read(["a", "b"])  # nothing new: nothing asked
    assert not memory.read(["b", "c"]) and memory.limit == pytest.approx(10.8)  # c has more
    assert reader.asked == [["a"], ["b"], ["c"]]


def test_where_nvml_sees_no_gpu_memory_is_unchecked_until_a_node_where_it_does():
    reader = Reader({"logical": None, "real": 40.0})
    memory = GpuMemory(None, Tunables(), reader=reader)
    assert not memory.read(["logical"])
    assert memory.limit is None and memory.nvml_gb is None
    assert memory.read(["logical", "real"]) and memory.nvml_gb == 40.0


def test_the_users_gpu_memory_is_never_overridden_but_nodes_are_still_read():
    memory = GpuMemory(30.0, Tunables(), reader=Reader({"a": 8.0}))
    assert memory.read(["a"])  # NVML sees a GPU: trainables are measured
    assert (memory.limit, memory.nvml_gb) == (30.0, 8.0)


def test_a_gpu_with_nothing_free_still_bounds_packing():
    memory = GpuMemory(None, Tunables(), reader=Reader({"full": 0.0}))
    assert memory.read(["full"]) and 0 < memory.limit < 0.01


class Sinks:
    """What ``GpuMemory.follow`` hands the limit to: estimator, lifecycle, GPU nodes."""

    def __init__(self) -> None:
        self.estimator = SimpleNamespace(gpu_memory=None)
        self.pool_memory: list[float | None] = []
        self.life = SimpleNamespace(gpu_memory_changed=self.pool_memory.append)
        self.nodes = SimpleNamespace(memory_gb=None)

    def follow(self, memory: GpuMemory, gpus: float | None) -> None:
        memory.follow(gpus, self.estimator, self.life, self.nodes)


def test_follow_reads_new_gpu_nodes_when_the_pool_changes_and_hands_on_the_limit(monkeypatch):
    nodes: list[str] = []
    monkeypatch.setattr(nvml, "gpu_nodes", lambda: list(nodes))
    reader = Reader({"n1": 10.0, "n2": 5.0})
    memory, sinks = GpuMemory(None, Tunables(), reader=reader), Sinks()
    sinks.follow(memory, 0.0)  # the start: no GPU node yet
    assert sinks.estimator.gpu_memory is None and sinks.pool_memory == []
    nodes.append("n1")
    sinks.follow(memory, None)  # the pool did not change: nothing read
    assert reader.asked == []
    sinks.follow(memory, 1.0)  # n1 joined
    assert sinks.estimator.gpu_memory == pytest.approx(9.0) and sinks.nodes.memory_gb == 10.0
    nodes.append("n2")
    sinks.follow(memory, 2.0)
    assert sinks.pool_memory == pytest.approx([9.0, 4.5]) and reader.asked == [["n1"], ["n2"]]
    off_ray = GpuMemory(None, Tunables(), ray_cluster=False, reader=reader)
    sinks.follow(off_ray, 3.0)  # a simulator's view: no node to read
    assert reader.asked == [["n1"], ["n2"]]


def test_nothing_is_placed_on_a_pool_without_gpus():
    """With no GPU node yet the pool has no GPU: the policy packs nothing before one joins
    (and ``GpuMemory`` reads it as the pool takes its GPUs)."""
    from fluid.core import GpuPool

    pool = GpuPool(0)
    assert not pool.fits(0.5, 2) and pool.place("t", 0.5, 2) is None


def test_the_stand_in_lists_a_process_by_the_mps_call_alone(fake_mps):
    fake_mps.gpus(process_gb=None, mps_process_gb=5.0)  # an MPS client the compute list omits
    try:
        alone = nvml.process_gpu_memory()
        fake_mps.gpus(process_gb=2.0, mps_process_gb=5.0)
        both = nvml.process_gpu_memory()
        fake_mps.gpus(count=2, total_gb=16.0, free_gb=7.0)
        free = nvml.free_gpu_memory_gb()
    finally:
        fake_mps.no_driver()
    assert (alone, both, free) == (5 * 2**30, 5 * 2**30, 7.0)


def _run(ex, tmp_path, trials: int):
    from fluid.train.modeled import modeled_trainable

    return tune.run(
        tune.with_resources(modeled_trainable, {"cpu": 0.1, "gpu": 1}),
        config={"t1": 0.3, "iters": 3, "alpha": 1.25, "n": tune.grid_search(list(range(trials)))},
        scheduler=ex, storage_path=str(tmp_path), verbose=0)


@pytest.mark.parametrize(("free_gb", "most"), [(8.0, 1), (None, 2)], ids=["free", "total"])
def test_where_free_memory_is_below_two_peaks_none_are_packed_though_the_total_fits(
        fake_mps, tmp_path, monkeypatch, free_gb, most):
    """16 GB GPUs (two 6 GB peaks fit 90% of that): packed two to a GPU once peaks are known
    where all of it is free, one trial a GPU where 8 GB of it is. The plan has one GPU."""
    from fluid import FluidExecutor
    from fluid.tune import _resources

    monkeypatch.setattr(_resources.RayResourceView, "gpus", lambda self: 1.0)
    fake_mps.gpus(count=4, total_gb=16.0, free_gb=free_gb, process_gb=6.0)
    ex = FluidExecutor(alpha=1.25, cpus_per_trial=0.1)
    try:
        analysis = _run(ex, tmp_path, 3)
    finally:
        fake_mps.no_driver()
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    frames = analysis.trial_dataframes
    peaks = {int(p) for t in analysis.trials for p in frames[t.trial_id]["fluid_peak_gpu_memory"]}
    assert peaks == {6 * 2**30}
    assert ex.estimator.gpu_memory == pytest.approx(0.9 * (free_gb or 16.0))
    assert most_on_one_gpu(ex, analysis.trials) == most


def test_a_gpu_node_that_joins_later_is_read_before_anything_is_placed_on_it(
        fake_mps, tmp_path, monkeypatch):
    """The experiment starts with no GPU node (an autoscaling cluster's GPU-less head, as the
    driver sees it); then this node's GPUs appear. Its NVML says 8 GB free of 16, and trials
    need 6 GB (``trial_memory``) at ``c=2``: no two may share a GPU, as they would had a plan
    been made on the node's GPUs before its memory was read (unchecked: two to a GPU)."""
    from fluid import FluidExecutor
    from fluid.tune import _resources

    here = ray.get_runtime_context().get_node_id()
    steps = {"n": 0}

    def grown() -> bool:
        return steps["n"] > 12  # some steps without a GPU first

    def gpus(self) -> float:
        steps["n"] += 1
        return 1.0 if grown() else 0.0

    monkeypatch.setattr(_resources.RayResourceView, "gpus", gpus)
    monkeypatch.setattr(nvml, "gpu_nodes", lambda: [here] if grown() else [])
    monkeypatch.setattr("fluid.tune._waiting.ask_autoscaler", lambda bundles: None)
    fake_mps.gpus(count=4, total_gb=16.0, free_gb=8.0, process_gb=6.0)
    ex = FluidExecutor(c=2, trial_memory=6.0, cpus_per_trial=0.1)
    try:
        analysis = _run(ex, tmp_path, 3)
    finally:
        fake_mps.no_driver()
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    assert [e["gpus"] for e in ex.plan_log if e["kind"] == "cluster"] == [1.0]
    assert ex.estimator.gpu_memory == pytest.approx(7.2)  # read when the node joined
    assert most_on_one_gpu(ex, analysis.trials) == 1
