"""Workload models of the simulator: per-iteration time, overheads, memory, learning curves.

Built-ins: ``cifar10``, ``wlm``, ``dcgan`` (the paper's tasks, modelled from their real
``nn.Module`` and a GPU preset) and ``synthetic`` (every parameter given).

Example:
    >>> sorted(WORKLOADS)
    ['cifar10', 'dcgan', 'synthetic', 'wlm']
    >>> get_workload("synthetic", iter_time=1.0).trial_model({"x": 0.1, "y": 0.5}).iteration_time
    1.0
"""

from __future__ import annotations

from typing import Any

from fluid.sim.truth import PerfParams
from fluid.sim.workloads.base import Hardware, TrialModel, Workload
from fluid.sim.workloads.cifar10 import cifar10
from fluid.sim.workloads.curves import Curve
from fluid.sim.workloads.dcgan import dcgan
from fluid.sim.workloads.hardware import GPUS, INTERCONNECTS, GpuSpec, Interconnect
from fluid.sim.workloads.synthetic import synthetic
from fluid.sim.workloads.wlm import wlm

WORKLOADS = ("cifar10", "dcgan", "synthetic", "wlm")


def get_workload(name: str, hardware: Hardware | None = None, **params: Any) -> Workload:
    """A built-in workload; ``params`` are the synthetic workload's parameters."""
    if name == "synthetic":
        return synthetic(**params)
    if params:
        raise ValueError(f"workload {name!r} takes no parameters, got {sorted(params)}")
    makers = {"cifar10": cifar10, "wlm": wlm, "dcgan": dcgan}
    if name not in makers:
        raise ValueError(f"unknown workload {name!r}; known: {list(WORKLOADS)}")
    return makers[name](hardware)


__all__ = [
    "GPUS",
    "INTERCONNECTS",
    "WORKLOADS",
    "Curve",
    "GpuSpec",
    "Hardware",
    "Interconnect",
    "PerfParams",
    "TrialModel",
    "Workload",
    "cifar10",
    "dcgan",
    "get_workload",
    "synthetic",
    "wlm",
]
