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
