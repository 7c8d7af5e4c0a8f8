"""Per-iteration time, packing overhead ``alpha``, scaling overhead ``beta`` and GPU memory.

All four come from the model's counted FLOPs and parameters (``profile.py``), the GPU's datasheet
(``gpus.py``) and a few hardware constants in ``PerfParams``, never from Fluid's results.

* **Per-iteration time at one GPU** (Paleo, Qi et al., ICLR 2017: a layer takes its FLOPs over
  the device's peak times a *platform percent of peak*): one optimizer step on a batch of ``B``
  samples costs ``F = flops_per_sample * B`` and takes
  ``t_step = F / (peak * ppp * occ(F)) + step_overhead_s`` with ``occ(F) = F / (F + half_flops)``
  (small batches cannot fill the GPU: occupancy). An iteration is ``ceil(samples / B)`` steps.
* **Share of the GPU** one trial uses alone: ``u = (F / (peak * ppp)) / t_step``, the time the
  step would take on a saturated GPU over the time it takes.
* **Packing overhead alpha**: ``p`` trials on one GPU (MPS) share its attainable throughput, so
  together they run ``thr(p) = min(p, 1/u) / (1 + mps_overhead * (p - 1))`` times one trial's
  speed; each one's iteration then takes ``T^p = T^1 * p / thr(p)``, and ``alpha`` is fitted to
  ``T^p = T^1 alpha^(p-1)`` for ``p = 1..4`` with ``fluid.core.fit_alpha``.
* **Scaling overhead beta** (Paleo's data-parallel model, no overlap of communication and
  computation): each of ``w`` workers takes ``ceil(samples / (w B))`` steps of
  ``t_step + allreduce(w)``, ``allreduce(w) = 2 (w-1)/w * G / bandwidth + 2 (w-1) latency`` for
  ``G = 4 * params`` bytes of FP32 gradients (ring all-reduce); ``beta`` is fitted to
  ``T_w = T_1 / w * beta^(w-1)`` for ``w = 1..8`` with ``fluid.core.fit_beta``.
* **GPU memory**: CUDA context + FP32 weights, gradients and optimizer slots + activations
  (elements of leaf-module outputs, counted on the real module, times ``B``).

The constants of ``PerfParams`` that no datasheet gives are assumptions; ``fluid simulate
--paper`` reports how the speedups move when they change (docs/benchmarks.md, "sensitivity").

Example:
    >>> from fluid.sim.workloads.gpus import GPUS, INTERCONNECTS
    >>> t = step_time(1e11, GPUS["rtx6000"], PerfParams())
    >>> round(t, 4)
    0.0187
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fluid.core import fit_alpha, fit_beta
from fluid.sim.workloads.gpus import GpuSpec, Interconnect


@dataclass(frozen=True)
class PerfParams:
    """Hardware constants of the performance model (sources / reasons per field).

    Attributes:
        ppp: platform percent of peak reached by cuDNN/cuBLAS kernels on large work (Paleo
            measured 50-60% for convolutions on NVIDIA GPUs; 0.5 here).
        half_flops: FLOPs per step at which occupancy reaches half (assumption: 20 GFLOP, a
            batch of ~15 CIFAR-10 AlexNet images; small steps leave SMs idle).
        step_overhead_s: per optimizer step: Python, kernel launches, data loader hand-off
            (assumption: 4 ms, typical of eager PyTorch training loops).
        mps_overhead: throughput lost per extra process sharing a GPU under MPS (assumption 3%:
            context switches and cache/memory contention).
        ctx_memory_gb: CUDA context of one process (~0.5 GB with cuDNN/cuBLAS loaded).
        max_pack: packing degrees measured when fitting alpha (1..max_pack).
        max_gang: gang sizes measured when fitting beta (1..max_gang).
    """

    ppp: float = 0.5
    half_flops: float = 2e10
    step_overhead_s: float = 0.004
    mps_overhead: float = 0.03
    ctx_memory_gb: float = 0.5
    max_pack: int = 4
    max_gang: int = 8


def step_time(flops_per_step: float, gpu: GpuSpec, p: PerfParams) -> float:
    """Seconds of one optimizer step of ``flops_per_step`` FLOPs on one GPU."""
    occ = flops_per_step / (flops_per_step + p.half_flops)
    return flops_per_step / (gpu.fp32_tflops * 1e12 * p.ppp * occ) + p.step_overhead_s


def gpu_share(flops_per_step: float, gpu: GpuSpec, p: PerfParams) -> float:
    """``u``: share of the GPU's attainable throughput one trial uses when alone (0..1]."""
    saturated = flops_per_step / (gpu.fp32_tflops * 1e12 * p.ppp)
    return min(1.0, saturated / step_time(flops_per_step, gpu, p))


def packing_alpha(u: float, p: PerfParams) -> float:
    """``alpha`` fitted to the per-iteration times of 1..max_pack trials sharing a GPU."""
    times = {}
    for k in range(1, p.max_pack + 1):
        thr = min(k, 1.0 / u) / (1.0 + p.mps_overhead * (k - 1))
        times[k] = k / thr
    return fit_alpha(times)


def allreduce_time(grad_bytes: float, w: int, link: Interconnect) -> float:
    """Ring all-reduce of ``grad_bytes`` over ``w`` workers (0 for one worker)."""
    if w <= 1:
        return 0.0
    return 2 * (w - 1) / w * grad_bytes / (link.gbytes_per_s * 1e9) + 2 * (w - 1) * link.latency_s


def gang_iteration_times(
    samples: int, batch: int, t_step: float, params: int, link: Interconnect, p: PerfParams
) -> dict[int, float]:
    """Per-iteration time on ``w = 1..max_gang`` workers (data parallel, per-worker batch)."""
    return {
        w: math.ceil(samples / (w * batch)) * (t_step + allreduce_time(4.0 * params, w, link))
        for w in range(1, p.max_gang + 1)
    }


def scaling_beta(
    samples: int, batch: int, t_step: float, params: int, link: Interconnect, p: PerfParams
) -> float:
    """``beta`` fitted to ``gang_iteration_times``."""
    return fit_beta(gang_iteration_times(samples, batch, t_step, params, link, p))


def memory_gb(params: int, optimizer_slots: int, activations: float, batch: int,
              p: PerfParams) -> float:
    """Peak GPU memory of one trial in GB."""
    states = 4.0 * params * (2 + optimizer_slots)
    return p.ctx_memory_gb + (states + 4.0 * activations * batch) / 1e9
