"""Constants of the simulator's ground truth (``fluid.sim.truth``), with where each comes from.

Datasheet numbers (peak FLOPS, memory, link bandwidth) live in ``fluid.sim.workloads.hardware``;
the constants here are the ones no datasheet gives. Three are *fitted* to the published
measurements shipped in ``fluid/sim/references/`` (``step_overhead_s``, ``half_flops``,
``contention``: packing ratios and one-node strong scaling together, ``experiments/fit_truth.py``),
two were calibrated once on the weak-scaling references (``overlap``, ``straggler_cv``), one is
derived from a published bound (``mps_overlap``), and the others are assumptions with a reason.
docs/simulator.md lists each fit, its data and its held-out error.

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
            Qi et al. ICLR 2017, measured 50-60% for convolutions on NVIDIA GPUs). Packing
            ratios depend on ``step_overhead_s * ppp``, so ``ppp`` stays Paleo's and the
            fitted overhead is expressed at it.
        half_flops: FLOPs per step at which a step's kernels keep half of the GPU's SMs busy
            (the saturation curve ``occ(F) = F / (F + half_flops)``); it also sets the part of
            a step's kernel time that does not shrink with the batch (fitted).
        step_overhead_s: per optimizer step with the GPU idle: Python, kernel launches, the
            data loader hand-off (fitted).
        sharing: how packed trials share a GPU: ``"mps"`` (kernels of different processes run
            at once on free SMs) or ``"timeslice"`` (the default CUDA scheduler: one
            context at a time).
        contention: relative slowdown of a packed trial's kernels per co-runner (memory
            bandwidth, L2, context switches; fitted on the pairs that saturate the GPU).
        mps_overlap: under MPS, the share of the SMs a running kernel leaves idle that
            co-runners can use. ``1 / (1 - mps_overlap)`` bounds MPS's gain over
            time-slicing; 0.2 makes it 1.25x, the largest MPS-over-time-slicing gain
            published (inference; no training measurement found).
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
    half_flops: float = 1.1e11
    step_overhead_s: float = 0.0075
    sharing: str = "mps"
    contention: float = 0.015
    mps_overlap: float = 0.2
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
        if not 0 <= self.mps_overlap < 1:
            raise ValueError(f"mps_overlap must be in [0, 1), got {self.mps_overlap}")
        for name in ("half_flops", "step_overhead_s", "contention", "overlap", "straggler_cv",
                     "ctx_memory_gb"):
            v = getattr(self, name)
            if not v >= 0:
                raise ValueError(f"{name} must be >= 0, got {v}")
        if not 0 < self.backward_fraction < 1:
            raise ValueError(f"backward_fraction must be in (0, 1), got {self.backward_fraction}")
