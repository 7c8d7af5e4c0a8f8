"""The simulator's ground truth: how fast a trial *really* runs at a shape.

A mechanism with three constants fitted to published measurements (``params``): per-iteration
time comes from the workload's compute (FLOPs, the share of a GPU one step occupies),
contention of packed trials (MPS or time-slicing), a gang's ring all-reduce over the preset's
interconnect and its stragglers (a gang keeps the trial's global batch), per-step overheads
and memory. Packing and scaling curves emerge from it; the policy's formulas in
``fluid.core`` are never used here (``tests/sim/test_truth.py`` parses these modules'
imports). The executor under simulation sees only reported iteration times and, when a
profile is taken, a noisy measurement of this truth (``fluid.sim.profiling``).

Modules, one job each: ``params`` (constants), ``compute`` (a step alone), ``sharing``
(packed steps), ``comm`` (gang steps), ``trial`` (an iteration at a shape).
Equations and sources: docs/simulator.md.
"""

from fluid.sim.truth.compute import StepCost, memory_gb, solo_step, step_from_rate
from fluid.sim.truth.params import SHARING_MODES, PerfParams
from fluid.sim.truth.trial import DeclaredLaw, Timing, Work, fits_memory, iteration_time

__all__ = [
    "SHARING_MODES",
    "DeclaredLaw",
    "PerfParams",
    "StepCost",
    "Timing",
    "Work",
    "fits_memory",
    "iteration_time",
    "memory_gb",
    "solo_step",
    "step_from_rate",
]
