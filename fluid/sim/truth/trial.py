"""A trial's true seconds per iteration at a shape: solo, packed with others, or a gang.

``Work`` describes what one iteration of a config does on the simulated hardware (built by
``fluid.sim.workloads`` from the FLOPs, parameters and activations counted on the real module
and a GPU preset). ``iteration_time`` combines the pieces:

* **solo** (one GPU, alone on it; also a packed share with no co-runner):
  ``steps * (compute + overhead)`` of a step of the trial's batch ``B`` (``compute.py``);
* **packed** (a share of a GPU with co-runners ``peers``): ``steps * t_i`` with ``t_i``
  from ``sharing.packed_steps`` over the trial and its co-runners;
* **gang** of ``w`` GPUs: the trial keeps its global batch (batch size is a hyperparameter;
  ``fluid.train`` splits it over the ranks), so it takes the same ``steps = ceil(samples / B)``
  per iteration, each worker computing ``ceil(B / w)`` samples per step at the occupancy and
  overhead of that smaller step, plus the same all-reduce of the gradients
  (``comm.gang_step``).

It also returns each GPU's busy share (``nvidia-smi`` utilisation) for the cluster's
accounting. A ``DeclaredLaw`` is the other kind of truth: a synthetic workload (or a replay)
whose user *declares* the packing and scaling overheads; it follows the paper's law with the
declared ``alpha`` and ``beta``, written out here (the simulator's truth never calls the
policy's model).

Example:
    >>> w = Work(50_000, 100, 1e9, 16.3e12, 4e7, 1.25e9, 5e-5, 2.0)
    >>> w.steps(), w.worker_batch(4)
    (500, 25)
    >>> iteration_time(w, 0.5, (w,)).seconds > iteration_time(w, 1.0).seconds
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fluid.sim.truth.comm import gang_step
from fluid.sim.truth.compute import StepCost, solo_step
from fluid.sim.truth.params import PerfParams
from fluid.sim.truth.sharing import gpu_busy, packed_steps

_DEFAULT = PerfParams()


@dataclass(frozen=True)
class Work:
    """One iteration of one config on the simulated hardware.

    Attributes:
        samples: samples per iteration (an epoch).
        batch: the trial's (global) batch: samples per optimizer step at any shape.
        flops_per_sample: training FLOPs of one sample (forward + backward).
        peak_flops: the GPU's peak FP32 FLOP/s.
        grad_bytes: bytes all-reduced per step in a gang (FP32 gradients).
        link_bytes_per_s: bandwidth of the link between a gang's GPUs (per direction).
        link_latency_s: latency of one ring step over that link.
        memory_gb: peak GPU memory of one replica.
        params: the constants of the mechanism.
    """

    samples: int
    batch: int
    flops_per_sample: float
    peak_flops: float
    grad_bytes: float
    link_bytes_per_s: float
    link_latency_s: float
    memory_gb: float
    params: PerfParams = _DEFAULT

    def steps(self) -> int:
        """Optimizer steps per iteration: the same on one GPU and in a gang (global batch)."""
        return math.ceil(self.samples / self.batch)

    def worker_batch(self, w: int = 1) -> int:
        """Samples one of ``w`` workers computes per step (the largest round-robin share)."""
        return max(1, math.ceil(self.batch / w))

    def step_on(self, w: int = 1) -> StepCost:
        """One worker's step alone on its GPU, at its share of the batch."""
        return solo_step(self.flops_per_sample * self.worker_batch(w), self.peak_flops,
                         self.params)

    @property
    def step(self) -> StepCost:
        """One step of the whole batch alone on one GPU."""
        return self.step_on(1)


@dataclass(frozen=True)
class DeclaredLaw:
    """A workload whose user declares its overheads (synthetic, replay): seconds per
    iteration ``h1 * alpha^(1/w - 1)`` at a share ``w < 1``, ``h1 / w * beta^(w - 1)`` on
    ``w >= 1`` GPUs (gangs past ``max_gang`` run as one of ``max_gang``)."""

    h1: float
    alpha: float
    beta: float
    max_gang: int = 8


@dataclass(frozen=True)
class Timing:
    """Seconds of one iteration and the busy share of each GPU the trial uses."""

    seconds: float
    busy: float


def _packed(work: Work, peers: Sequence[Work]) -> Timing:
    steps = [work.step, *(q.step for q in peers)]
    times = packed_steps(steps, work.params)
    busy = gpu_busy(steps, times)[0]
    return Timing(work.steps() * times[0], busy)


def _declared(law: DeclaredLaw, width: float) -> Timing:
    # A declared law says nothing about kernels: a trial keeps its share of a GPU busy.
    if width < 1:
        return Timing(law.h1 * law.alpha ** (1.0 / width - 1.0), width)
    w = min(width, law.max_gang)
    return Timing(law.h1 / w * law.beta ** (w - 1.0), 1.0)


def iteration_time(truth: Work | DeclaredLaw, width: float,
                   peers: Sequence[Work | DeclaredLaw] = ()) -> Timing:
    """True seconds of one iteration at ``width`` GPUs (a share below 1 is packed with
    ``peers``, the other trials on the same GPU) and the busy share of each of its GPUs."""
    if width <= 0:
        raise ValueError(f"width must be > 0, got {width}")
    if isinstance(truth, DeclaredLaw):
        return _declared(truth, width)
    if width < 1:
        return _packed(truth, [q for q in peers if isinstance(q, Work)])
    w = max(1, round(width))
    step = truth.step_on(w)
    t_step = gang_step(step, w, truth.grad_bytes, truth.link_bytes_per_s, truth.link_latency_s,
                       truth.params)
    return Timing(truth.steps() * t_step, step.compute_s / t_step)


def fits_memory(memories: Sequence[float], gpu_memory_gb: float | None) -> bool:
    """Whether trials of these peak memories fit on one GPU together."""
    return gpu_memory_gb is None or sum(memories) <= gpu_memory_gb + 1e-9
