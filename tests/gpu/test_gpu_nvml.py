"""NVML sampling: a fake NVML for the record path, the real one (absent here) for the no-op."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from fluid.gpu import nvml


class FakeNVML:
    """The subset of pynvml the sampler uses; 2 GPUs whose utilisation climbs."""

    def __init__(self) -> None:
        self.calls = 0
        self.inited = 0
        self.shutdowns = 0

    def nvmlInit(self):
        self.inited += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUtilizationRates(self, h):
        self.calls += 1
        return SimpleNamespace(gpu=10 * h + self.calls, memory=0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=(h + 1) * 2**20, total=16 * 2**30, free=0)


def test_sampler_records_each_gpu_periodically():
    fake = FakeNVML()
    s = nvml.GPUSampler(interval_s=0.05, node="n1", nvml=fake)
    s.start()
    time.sleep(0.4)
    s.stop()
    rows = s.records()
    assert s.available and fake.inited == 1 and fake.shutdowns == 1
    assert len(rows) >= 4 and len(rows) % 2 == 0
    assert {r.gpu_index for r in rows} == {0, 1}
    assert all(r.node == "n1" and r.memory_total == 16 * 2**30 for r in rows)
    assert [r.memory_used for r in rows[:2]] == [2**20, 2**21]
    assert rows[0].time <= rows[-1].time
    assert set(rows[0].as_dict()) == {
        "time",
        "node",
        "gpu_index",
        "util_percent",
        "memory_used",
        "memory_total",
    }
    n = len(rows)
    time.sleep(0.15)
    assert len(s.records()) == n, "stopped means stopped"


def test_without_nvml_it_is_a_quiet_no_op(caplog):
    class Broken(FakeNVML):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    caplog.set_level(logging.DEBUG, logger="fluid.gpu.nvml")
    s = nvml.GPUSampler(interval_s=0.05, nvml=Broken())
    s.start()
    s.stop()
    assert s.records() == [] and not s.available
    lines = [r for r in caplog.records if r.name == "fluid.gpu.nvml"]
    assert len(lines) == 1 and lines[0].levelno == logging.DEBUG
    assert "NVML Shared Library Not Found" in lines[0].getMessage()


def test_real_nvml_on_this_machine():
    import torch

    s = nvml.GPUSampler(interval_s=0.05)
    s.start()
    time.sleep(0.2)
    s.stop()
    if nvml.gpu_count():  # a GPU machine: real samples
        assert s.records() and s.available
    else:  # CI has no GPU: the real pynvml cannot load its library
        assert s.records() == [] and "NVML" in (s.unavailable_reason or "")
    if not torch.cuda.is_available():
        assert nvml.peak_gpu_memory() is None


def test_interval_must_be_positive():
    with pytest.raises(ValueError, match="interval_s"):
        nvml.GPUSampler(interval_s=0)


class PartlyUsed(FakeNVML):
    """Two 16 GB GPUs, 10 GB and 6 GB of them free (another process holds the rest)."""

    def nvmlDeviceGetMemoryInfo(self, h):
        free = (10, 6)[h] * 2**30
        return SimpleNamespace(used=16 * 2**30 - free, total=16 * 2**30, free=free)


def test_a_nodes_gpu_memory_is_what_its_fullest_gpu_has_free_not_its_total():
    assert nvml.free_gpu_memory_gb(PartlyUsed()) == 6.0


def _procs(rows):
    return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in rows]


class Listing(FakeNVML):
    """Two GPUs with the given compute process and MPS client lists, ``{gpu: [(pid, bytes)]}``
    (``mps=None``: a binding without ``nvmlDeviceGetMPSComputeRunningProcesses``)."""

    def __init__(self, compute, mps=None):
        super().__init__()
        self.compute = compute
        if mps is not None:
            self.nvmlDeviceGetMPSComputeRunningProcesses = lambda h: _procs(mps.get(h, []))

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return _procs(self.compute.get(h, []))


def test_a_process_memory_counts_its_mps_clients_once_at_their_larger_figure():
    gb = 2**30
    only_mps = Listing({0: [(8, 9 * gb)]}, mps={0: [(7, 3 * gb)]})
    assert nvml.process_gpu_memory(7, nvml=only_mps) == 3 * gb  # listed by the MPS call only
    both = Listing({0: [(7, gb)], 1: [(7, 2 * gb)]}, mps={0: [(7, 3 * gb), (8, 5 * gb)]})
    assert nvml.process_gpu_memory(7, nvml=both) == 5 * gb  # GPU 0 once (3, not 1 + 3), + 2
    unknown = Listing({0: [(7, None)]}, mps={0: [(7, None)]})  # NVML_VALUE_NOT_AVAILABLE
    assert nvml.process_gpu_memory(7, nvml=unknown) is None


def test_without_the_mps_call_or_where_it_fails_the_compute_list_counts():
    gb = 2**30
    assert nvml.process_gpu_memory(7, nvml=Listing({0: [(7, gb)]})) == gb
    assert nvml.process_gpu_memory(7, nvml=Listing({}, mps={})) is None  # listed nowhere

    class NotSupported(Listing):
        def nvmlDeviceGetMPSComputeRunningProcesses(self, h):
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    assert nvml.process_gpu_memory(7, nvml=NotSupported({1: [(7, 2 * gb)]})) == 2 * gb
