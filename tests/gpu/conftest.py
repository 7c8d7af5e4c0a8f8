"""The stand-ins every GPU test module shares (``standins``), on a Ray of its own."""

from __future__ import annotations

import os
import sys

import pytest
import ray

from .standins import StandIns


@pytest.fixture(scope="module")
def fake_mps(tmp_path_factory):
    """Ray with the stand-in binary on every worker's PATH and the stand-in NVML first on
    their Python path; yields them (NVML sees no GPU until told)."""
    d = tmp_path_factory.mktemp("fakebin")
    standins = StandIns.create(d)
    old = {k: os.environ.get(k) for k in ("PATH", "PYTHONPATH")}
    os.environ["PATH"] = f"{d}{os.pathsep}{old['PATH']}"  # raylet and workers inherit it
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(d), old["PYTHONPATH"]) if p)
    sys.path.insert(0, str(d))  # this process probes its own node too
    real_nvml = sys.modules.pop("pynvml", None)
    ray.init(address="local", num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield standins
    ray.shutdown()
    sys.path.remove(str(d))
    sys.modules.pop("pynvml", None)
    if real_nvml is not None:
        sys.modules["pynvml"] = real_nvml
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
