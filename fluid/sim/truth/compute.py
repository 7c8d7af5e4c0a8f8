"""One optimizer step of one trial alone on one GPU: compute, occupancy, per-step overhead.

A step on a batch of ``B`` samples costs ``F = flops_per_sample * B`` FLOPs. Small steps cannot
fill the GPU: the step's kernels keep a share ``occ(F) = F / (F + half_flops)`` of the SMs busy
(the saturation curve), so the kernels take ``compute = F / (peak * ppp * occ(F))
= (F + half_flops) / (peak * ppp)`` seconds (Paleo's platform percent of peak ``ppp``), and the
step takes ``compute + step_overhead_s`` (the GPU idles during the per-step overhead).

What one trial uses of a GPU alone:

* ``duty = compute / (compute + overhead)``: the share of time a kernel runs (what
  ``nvidia-smi`` reports as utilisation);
* ``occupancy``: the share of SMs its kernels keep busy while they run.

Example:
    >>> from fluid.sim.truth.params import PerfParams
    >>> s = solo_step(1e11, 16.3e12, PerfParams())
    >>> round(s.compute_s, 4), round(s.occupancy, 3)
    (0.0258, 0.476)
"""

from __future__ import annotations

from dataclasses import dataclass

from fluid.sim.truth.params import PerfParams


@dataclass(frozen=True)
class StepCost:
    """One step of one trial alone on one GPU.

    Attributes:
        compute_s: seconds its kernels run.
        overhead_s: seconds the GPU idles (CPU work between steps).
        occupancy: share of the GPU's SMs its kernels keep busy while they run (0..1].
    """

    compute_s: float
    overhead_s: float
    occupancy: float

    @property
    def seconds(self) -> float:
        """Wall-clock seconds of the step alone."""
        return self.compute_s + self.overhead_s

    @property
    def duty(self) -> float:
        """Share of the step during which a kernel runs."""
        return self.compute_s / self.seconds if self.seconds > 0 else 0.0


def solo_step(flops_per_step: float, peak_flops: float, p: PerfParams) -> StepCost:
    """The ``StepCost`` of a step of ``flops_per_step`` FLOPs on a GPU of ``peak_flops``."""
    if flops_per_step <= 0 or peak_flops <= 0:
        raise ValueError(f"flops_per_step and peak_flops must be > 0, got "
                         f"{flops_per_step}, {peak_flops}")
    occ = flops_per_step / (flops_per_step + p.half_flops)
    compute = (flops_per_step + p.half_flops) / (peak_flops * p.ppp)
    return StepCost(compute, p.step_overhead_s, occ)


def step_from_rate(samples_per_s: float, batch: int, occupancy: float = 1.0,
                   overhead_share: float = 0.0) -> StepCost:
    """A ``StepCost`` from a measured single-GPU throughput (a reference's own baseline);
    ``overhead_share`` of the step leaves the GPU idle (``1 - `` a measured utilisation)."""
    if samples_per_s <= 0 or batch < 1:
        raise ValueError(f"samples_per_s must be > 0 and batch >= 1, got {samples_per_s}, {batch}")
    if not 0 <= overhead_share < 1 or not 0 < occupancy <= 1:
        raise ValueError(f"overhead_share must be in [0, 1) and occupancy in (0, 1], got "
                         f"{overhead_share}, {occupancy}")
    t = batch / samples_per_s
    return StepCost(t * (1 - overhead_share), t * overhead_share, occupancy)


def memory_gb(params: int, optimizer_slots: int, activations: float, batch: int,
              p: PerfParams) -> float:
    """Peak GPU memory of one replica in GB: CUDA context, FP32 weights, gradients and
    optimizer slots, and the activations of a batch kept for the backward pass."""
    states = 4.0 * params * (2 + optimizer_slots)
    return p.ctx_memory_gb + (states + 4.0 * activations * batch) / 1e9
