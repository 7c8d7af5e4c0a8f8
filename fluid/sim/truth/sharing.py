"""Steps of trials packed on one GPU: MPS and time-slicing.

Each packed trial ``i`` alternates its kernels (``compute_i`` seconds alone, keeping a share
``occ_i`` of the SMs busy) and a per-step overhead ``o_i`` during which it leaves the GPU to
the others. The GPU is a processor shared by the trials computing at a given moment (a fluid
approximation: no queueing until the GPU saturates).

**MPS** (kernels of several processes run at once on free SMs). Co-runners slow a trial's
kernels through shared memory bandwidth and L2 even when SMs are free:
``c_i = compute_i * (1 + mps_interference * sum_{j != i} occ_j duty_j)``, ``duty_j`` the
share of time co-runner ``j`` has a kernel running. Trial ``i`` asks for SM throughput
``occ_i c_i / (c_i + o_i)`` on average. If the demands sum to at most 1, every trial steps in
``c_i + o_i``; otherwise the kernels stretch by the factor ``s > 1`` that makes the GPU exactly
busy: ``sum_i occ_i c_i / (s c_i + o_i) = 1``, and a step takes ``s c_i + o_i``.

**Time-slicing** (no MPS: one CUDA context at a time). Kernels of different processes never
overlap, so a trial occupies the whole GPU while its kernels run (``occ_i`` counts as 1), and
taking turns costs context switches: ``c_i = compute_i * (1 + timeslice_switch)`` once two or
more trials share the GPU. The same saturation rule then gives the step times.

Throughput of ``k`` identical trials packed, relative to one alone, is therefore about
``min(k, 1 / (occ duty))`` under MPS (less the interference) and ``min(k, 1 / duty)`` under
time-slicing (less the switches): packing pays when one trial leaves the GPU idle or
half-empty, and saturates once the GPU is full.

Example:
    >>> from fluid.sim.truth.compute import StepCost
    >>> from fluid.sim.truth.params import PerfParams
    >>> s = StepCost(0.010, 0.010, 0.5)
    >>> [round(t, 4) for t in packed_steps([s, s], PerfParams(mps_interference=0.0))]
    [0.02, 0.02]
    >>> [round(t, 4) for t in packed_steps([s, s], PerfParams(sharing="timeslice"))]
    [0.021, 0.021]
"""

from __future__ import annotations

from collections.abc import Sequence

from fluid.sim.truth.compute import StepCost
from fluid.sim.truth.params import PerfParams


def _stretch(weights: Sequence[float], compute: Sequence[float], idle: Sequence[float]) -> float:
    """Least ``s >= 1`` with ``sum_i w_i c_i / (s c_i + o_i) <= 1`` (bisection; monotone in s)."""

    def demand(s: float) -> float:
        return sum(w * c / (s * c + o) for w, c, o in zip(weights, compute, idle, strict=True)
                   if c > 0)

    if demand(1.0) <= 1.0:
        return 1.0
    lo, hi = 1.0, 2.0
    while demand(hi) > 1.0:
        lo, hi = hi, hi * 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if demand(mid) > 1.0:
            lo = mid
        else:
            hi = mid
    return hi


def packed_steps(steps: Sequence[StepCost], p: PerfParams) -> list[float]:
    """Seconds per step of each trial in ``steps`` when all of them share one GPU."""
    if not steps:
        return []
    if len(steps) == 1:
        return [steps[0].seconds]
    if p.sharing == "mps":
        busy = [s.occupancy * s.duty for s in steps]
        total = sum(busy)
        compute = [s.compute_s * (1.0 + p.mps_interference * (total - b))
                   for s, b in zip(steps, busy, strict=True)]
        weights = [s.occupancy for s in steps]
    else:
        compute = [s.compute_s * (1.0 + p.timeslice_switch) for s in steps]
        weights = [1.0] * len(steps)
    idle = [s.overhead_s for s in steps]
    s = _stretch(weights, compute, idle)
    return [s * c + o for c, o in zip(compute, idle, strict=True)]


def gpu_busy(steps: Sequence[StepCost], times: Sequence[float]) -> list[float]:
    """Each packed trial's share of time with a kernel running (``nvidia-smi`` utilisation;
    the GPU's is their sum, capped at 1)."""
    return [min(1.0, (t - s.overhead_s) / t) if t > 0 else 0.0
            for s, t in zip(steps, times, strict=True)]
