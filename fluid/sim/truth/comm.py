"""A data-parallel gang of ``w`` GPUs: ring all-reduce, overlap with the backward pass,
stragglers.

The gang keeps the trial's global batch ``B``: it takes as many steps per iteration as the
trial alone, each worker computing ``ceil(B / w)`` samples of every step (``trial.Work``), and
every step all-reduces the full gradients. Per step:

* **all-reduce** of ``G`` gradient bytes over a ring (Patarasuk & Yuan 2009; what NCCL and
  Horovod implement): ``A(w) = 2 (w-1)/w * G / (link_efficiency * bandwidth) + 2 (w-1) *
  latency``;
* **overlap**: gradients are reduced in buckets while the backward pass still runs, hiding
  up to ``overlap * backward_fraction * compute`` of it; the rest is exposed;
* **stragglers**: a synchronous step waits for the slowest worker; with a per-worker step
  time of coefficient of variation ``cv``, ``E[max of w] ~ t (1 + cv sqrt(2 ln w))``.

So a gang step takes ``(compute + overhead) (1 + cv sqrt(2 ln w)) + max(0, A(w) - overlap *
backward_fraction * compute)``, with ``compute`` and ``overhead`` those of one worker's share
of the batch.

Example:
    >>> ring_allreduce_s(1e8, 2, 1.25e9, 0.0, 1.0)
    0.08
"""

from __future__ import annotations

import math

from fluid.sim.truth.compute import StepCost
from fluid.sim.truth.params import PerfParams


def ring_allreduce_s(grad_bytes: float, w: int, bytes_per_s: float, latency_s: float,
                     efficiency: float) -> float:
    """Seconds of a ring all-reduce of ``grad_bytes`` over ``w`` workers (0 for one)."""
    if w <= 1:
        return 0.0
    return (2.0 * (w - 1) / w * grad_bytes / (efficiency * bytes_per_s)
            + 2.0 * (w - 1) * latency_s)


def straggler_factor(w: int, p: PerfParams) -> float:
    """``1 + cv sqrt(2 ln w)``: the expected slowest of ``w`` workers' step times."""
    return 1.0 + p.straggler_cv * math.sqrt(2.0 * math.log(w)) if w > 1 else 1.0


def gang_step(step: StepCost, w: int, grad_bytes: float, bytes_per_s: float, latency_s: float,
              p: PerfParams) -> float:
    """Seconds of one synchronous data-parallel step on ``w`` workers."""
    if w <= 1:
        return step.seconds
    comm = ring_allreduce_s(grad_bytes, w, bytes_per_s, latency_s, p.link_efficiency)
    hidden = p.overlap * p.backward_fraction * step.compute_s
    return step.seconds * straggler_factor(w, p) + max(0.0, comm - hidden)
