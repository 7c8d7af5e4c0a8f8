"""Steps of trials packed on one GPU: time-slicing and MPS.

Each packed trial ``i`` alternates its kernels (``compute_i`` seconds alone, keeping a share
``occ_i`` of the SMs busy) and a per-step overhead ``o_i`` during which it leaves the GPU to
the others. The GPU is a processor shared by the trials computing at a given moment (a fluid
approximation: no queueing until the GPU saturates).

**Contention.** With ``k`` trials on a GPU, each trial's kernels run slower by
``1 + contention (k - 1)`` (shared memory bandwidth and L2, context switches): the pairs that
saturate a GPU measure slightly below 1x in the published data (``contention`` is fitted
there).

**Beyond two per GPU** no training measurement is published, so the truth claims nothing
beyond the pair: ``k > 2`` trials together never run more of their work per second than a pair
of them would (the mean, over the ``k`` trials, of each one's gain packed with a copy of
itself); where the mechanism below would give more, every trial's step stretches by the same
factor. ``k`` identical trials therefore share exactly the pair's throughput.

**Time-slicing** (CUDA's default: one context at a time). Kernels of different processes
never overlap, so a trial holds the whole GPU while its kernels run (weight 1).

**MPS** (kernels of several processes run at once on free SMs). A running kernel leaves
``1 - occ_i`` of the SMs idle; co-runners can use a share ``mps_overlap`` of it, so trial
``i`` weighs ``u_i = 1 - mps_overlap (1 - occ_i)`` of the GPU while its kernels run. That
bounds MPS's gain over time-slicing by ``1 / (1 - mps_overlap)`` (1.25x, the largest
published MPS-over-time-slicing gain).

**Saturation.** Trial ``i`` asks for ``u_i c_i / (c_i + o_i)`` of the GPU on average. If the
demands sum to at most 1, every trial steps in ``c_i + o_i``; otherwise the kernels stretch by
the factor ``s > 1`` that makes the GPU exactly busy: ``sum_i u_i c_i / (s c_i + o_i) = 1``,
and a step takes ``s c_i + o_i``. So two identical trials gain about
``min(2, 1 / (u duty)) / (1 + contention duty)`` in throughput, and more of them the same:
packing pays when one trial leaves the GPU idle, and stops paying once it is full.

Example:
    >>> from fluid.sim.truth.compute import StepCost
    >>> from fluid.sim.truth.params import PerfParams
    >>> s = StepCost(0.010, 0.010, 0.5)
    >>> [round(t, 4) for t in packed_steps([s, s], PerfParams(contention=0.0))]
    [0.02, 0.02]
    >>> [round(t, 4) for t in packed_steps([s, s, s], PerfParams(sharing="timeslice",
    ...                                                        contention=0.0))]
    [0.03, 0.03, 0.03]
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


def gpu_weight(step: StepCost, p: PerfParams) -> float:
    """Share of the GPU a trial's running kernels take from its co-runners (1 under
    time-slicing; ``1 - mps_overlap (1 - occupancy)`` under MPS)."""
    if p.sharing == "timeslice":
        return 1.0
    return 1.0 - p.mps_overlap * (1.0 - step.occupancy)


def _shared(steps: Sequence[StepCost], p: PerfParams) -> list[float]:
    # The mechanism of the module docstring, for any number of co-runners.
    slowdown = 1.0 + p.contention * (len(steps) - 1)
    compute = [s.compute_s * slowdown for s in steps]
    idle = [s.overhead_s for s in steps]
    s = _stretch([gpu_weight(st, p) for st in steps], compute, idle)
    return [s * c + o for c, o in zip(compute, idle, strict=True)]


def _work_rate(steps: Sequence[StepCost], times: Sequence[float]) -> float:
    """Solo steps' worth of work per second-of-a-solo-step: ``sum_i t1_i / t_i``."""
    return sum(s.seconds / t for s, t in zip(steps, times, strict=True))


def packed_steps(steps: Sequence[StepCost], p: PerfParams) -> list[float]:
    """Seconds per step of each trial in ``steps`` when all of them share one GPU."""
    if not steps:
        return []
    if len(steps) == 1:
        return [steps[0].seconds]
    times = _shared(steps, p)
    if len(steps) > 2:
        pair = sum(_work_rate([s, s], _shared([s, s], p)) for s in steps) / len(steps)
        excess = _work_rate(steps, times) / pair
        if excess > 1.0:
            times = [t * excess for t in times]
    return times


def gpu_busy(steps: Sequence[StepCost], times: Sequence[float]) -> list[float]:
    """Each packed trial's share of time with a kernel running (``nvidia-smi`` utilisation;
    the GPU's is their sum, capped at 1)."""
    return [min(1.0, (t - s.overhead_s) / t) if t > 0 else 0.0
            for s, t in zip(steps, times, strict=True)]
