"""Fluid's policy core: pure, deterministic, numpy only (no Ray, no torch).

The runtime model ``h_i(w)``, the limits ``c`` and ``d``, StaticFluid, DynamicFluid, the
time-to-target rules around them (``policy``) with their constants (``Tunables``), placement on
concrete GPUs, a group-level simulation and bounds. Everything above this layer (the Ray Tune
adapter, the simulator) calls these functions: frozen trials, GPUs and measurements in,
decisions and the GPUs after them out; nothing here reads a clock or a cluster or changes what
it is given.

Example:
    >>> from fluid.core import PolicyConfig, TrialSpec, simulate_group
    >>> trials = [TrialSpec("a", 4.0), TrialSpec("b", 4.0), TrialSpec("c", 12.0),
    ...           TrialSpec("d", 30.0)]
    >>> simulate_group(trials, 5, PolicyConfig(c=2, d=4), "static").makespan
    12.0
"""

from fluid.core.bounds import lower_bound, policy_lower_bound
from fluid.core.config import PolicyConfig
from fluid.core.dynamic import DynamicPlan, Resize, RunningTrial, dynamic_fluid
from fluid.core.groupsim import POLICIES, GroupSchedule, Segment, play_fixed, simulate_group
from fluid.core.model import TrialSpec, allowed_widths, slowdown
from fluid.core.overheads import (
    c_from_alpha,
    d_from_beta,
    fit_alpha,
    fit_beta,
    packing_limit,
    scaling_limit,
)
from fluid.core.policy import LiveTrial, TrialFacts, resize_group, trial_limits
from fluid.core.pool import GpuPool
from fluid.core.static import Assignment, StaticPlan, static_fluid, water_fill
from fluid.core.tunables import Tunables

__all__ = [
    "POLICIES",
    "Assignment",
    "DynamicPlan",
    "GpuPool",
    "GroupSchedule",
    "LiveTrial",
    "PolicyConfig",
    "Resize",
    "RunningTrial",
    "Segment",
    "StaticPlan",
    "TrialFacts",
    "TrialSpec",
    "Tunables",
    "allowed_widths",
    "c_from_alpha",
    "d_from_beta",
    "dynamic_fluid",
    "fit_alpha",
    "fit_beta",
    "lower_bound",
    "packing_limit",
    "play_fixed",
    "policy_lower_bound",
    "resize_group",
    "scaling_limit",
    "simulate_group",
    "slowdown",
    "static_fluid",
    "trial_limits",
    "water_fill",
]
