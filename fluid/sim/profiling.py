"""A simulated ``fluid profile``: measure the ground truth, then fit as the real profiler does.

The real profiler (``fluid.tune.profiler``) runs a trial a few iterations alone, packed 2..4 to
a GPU and in gangs of 2..4 GPUs, and fits ``alpha``, ``beta``, ``c``, ``d`` from the measured
per-iteration times (``fluid.core.overheads``). Here the measurements come from the truth
(``fluid.sim.truth.iteration_time``: ``p`` copies of the config on one GPU, or a gang of ``w``)
with multiplicative log-normal noise of ``noise`` (a few timed iterations), and the fitting is
the same code, with one difference for packing: ``alpha`` is fitted on the pair alone
(``T^2 = T^1 alpha``), the degree where the truth is checked against published measurements,
and each degree's own measured throughput decides ``c`` (``packing_limit``). One ``alpha``
fitted over 1..4 per GPU mixes the pair with degrees where the GPU has saturated, and reports
an overhead no pair of these trials pays. This module is the only bridge between the truth and the policy's model: the
policy sees these fitted numbers, never the truth.

Example:
    >>> from fluid.sim.workloads import get_workload
    >>> w = get_workload("cifar10")
    >>> prof = profile_config(w.trial_model(w.default_config), noise=0.0)
    >>> prof.alpha >= 1.0 and prof.beta >= 1.0 and sorted(prof.pack_times) == [1, 2, 3, 4]
    True
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from fluid.sim.truth import iteration_time
from fluid.sim.workloads.base import TrialModel, Workload
from fluid.tune.profiler import MAX_PACK, MAX_WORKERS, Profile


def profile_config(model: TrialModel, noise: float = 0.02,
                   rng: np.random.Generator | None = None) -> Profile:
    """Measure ``model``'s truth at 1..MAX_PACK per GPU and 1..MAX_WORKERS GPUs (as
    ``fluid profile``), then fit."""
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    rng = rng or np.random.default_rng(0)
    truth = model.truth

    def measured(t: float) -> float:
        return t * float(np.exp(rng.normal(0.0, noise))) if noise > 0 else t

    pack = {p: measured(iteration_time(truth, 1.0 / p, (truth,) * (p - 1)).seconds)
            for p in range(1, MAX_PACK + 1)}
    gang = {w: measured(iteration_time(truth, float(w)).seconds) for w in range(1, MAX_WORKERS + 1)}
    return Profile.measured(pack, gang, memory=model.memory_gb, device="simulated")


@lru_cache(maxsize=8192)
def exact_profile(model: TrialModel) -> Profile:
    """``profile_config`` without noise (cached): what the lower bound plans with."""
    return profile_config(model, noise=0.0)


def _sample(space: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    cfg = {}
    for k, v in space.items():
        x = v.sample(random_state=int(rng.integers(2**31))) if hasattr(v, "sample") else v
        cfg[k] = x.item() if hasattr(x, "item") else x
    return cfg


def profile_workload(workload: Workload, seed: int = 0, n: int = 16,
                     noise: float = 0.02) -> tuple[float, float, float]:
    """Median ``alpha`` and ``beta`` of simulated profiles of ``n`` configs of the space
    (every config of a fixed list), and the largest peak memory they measured (GB): what a
    user who ran ``fluid profile`` would pass on."""
    rng = np.random.default_rng(seed)
    configs = workload.configs or [_sample(workload.space, rng) for _ in range(n)]
    profs = [profile_config(workload.trial_model(c), noise, rng) for c in configs]
    return (statistics.median(p.alpha for p in profs), statistics.median(p.beta for p in profs),
            max(p.memory or 0.0 for p in profs))
