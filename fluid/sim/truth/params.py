"""Constants of the simulator's ground truth (``fluid.sim.truth``), with where each comes from.

Datasheet numbers (peak FLOPS, memory, link bandwidth) live in ``fluid.sim.workloads.gpus``;
the constants here are the ones no datasheet gives. Those marked *calibrated* were set once
against the published measurements in ``fluid/sim/references/`` (``fluid simulate
--validate``; docs/simulator.md lists the fits); the others are assumptions with a reason.

Example:
    >>> PerfParams().sharing
    'mps'
"""

from __future__ import annotations

from dataclasses import dataclass

SHARING_MODES = ("mps", "timeslice")


@dataclass(frozen=True)
class PerfParams:
    """Constants of the mechanism (see the module docstring and docs/simulator.md).

    Attributes:
        ppp: platform percent of peak reached by cuDNN/cuBLAS kernels on large work (Paleo,
            Qi et al. ICLR 2017, measured 50-60% for convolutions on NVIDIA GPUs).
        half_flops: FLOPs per step at which a step's kernels keep half of the GPU's SMs busy
            (the saturation curve ``occ(F) = F / (F + half_flops)``; assumption, ~15
            CIFAR-10 AlexNet images).
        step_overhead_s: per optimizer step with the GPU idle: Python, kernel launches, the
            data loader hand-off (assumption: 4 ms, eager PyTorch).
        sharing: how packed trials share a GPU: ``"mps"`` (kernels of different processes run
            at once on free SMs) or ``"timeslice"`` (the default CUDA scheduler: one
            context at a time).
        mps_interference: under MPS, relative slowdown of a trial's kernels per unit of
            co-runners' busy SM share (shared memory bandwidth and L2; calibrated).
        timeslice_switch: under time-slicing, share of GPU time lost to context switches as
            soon as two or more processes take turns (calibrated).
        overlap: share of the backward pass that hides a gang's all-reduce (gradient
            bucketing overlaps communication with the backward pass; calibrated).
        backward_fraction: share of a step's compute that is the backward pass (2/3: the
            backward pass costs about twice the forward).
        straggler_cv: coefficient of variation of a worker's step time; a synchronous step
            waits for the slowest of ``w`` workers, ``E[max] ~ 1 + cv sqrt(2 ln w)``
            (calibrated).
        link_efficiency: share of a link's line rate a ring all-reduce attains (assumption:
            0.9, TCP/NCCL framing).
        ctx_memory_gb: CUDA context of one process (~0.5 GB with cuDNN/cuBLAS loaded).
    """

    ppp: float = 0.5
    half_flops: float = 2e10
    step_overhead_s: float = 0.004
    sharing: str = "mps"
    mps_interference: float = 0.1
    timeslice_switch: float = 0.05
    overlap: float = 0.4
    backward_fraction: float = 2.0 / 3.0
    straggler_cv: float = 0.06
    link_efficiency: float = 0.9
    ctx_memory_gb: float = 0.5

    def __post_init__(self) -> None:
        if self.sharing not in SHARING_MODES:
            raise ValueError(f"sharing must be one of {SHARING_MODES}, got {self.sharing!r}")
        for name in ("ppp", "link_efficiency"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {v}")
        for name in ("half_flops", "step_overhead_s", "mps_interference", "timeslice_switch",
                     "overlap", "straggler_cv", "ctx_memory_gb"):
            v = getattr(self, name)
            if not v >= 0:
                raise ValueError(f"{name} must be >= 0, got {v}")
        if not 0 < self.backward_fraction < 1:
            raise ValueError(f"backward_fraction must be in (0, 1), got {self.backward_fraction}")
