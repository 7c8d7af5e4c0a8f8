"""A synthetic workload whose every parameter is given (on the command line or in code).

Configs are ``{"x": ..., "y": ...}`` in ``[0, 1]``:

* per-iteration time ``iter_time * exp(spread * sqrt(3) * (2y - 1))``: log-uniform with standard
  deviation ``spread`` in log space (``spread = 0``: all trials alike; the paper's Figure 12
  varies it);
* ``alpha``, ``beta``, ``memory_gb`` as given, for every trial;
* learning curve from 0 to ``1 - 0.5 (x - 0.7)^2 * 4`` (best at ``x = 0.7``) at rate
  ``rate`` per iteration; the target (default 0.9) is reached by ``x`` within about 0.1 of 0.7.

The grid is ``trials`` values of ``x`` evenly spaced in [0, 1] with ``y`` spread the same way
in a fixed shuffled order, so that grid runtimes do not follow the grid order.

Example:
    >>> w = synthetic(iter_time=2.0, spread=0.0)
    >>> w.trial_model({"x": 0.5, "y": 0.9}).iteration_time
    2.0
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from ray import tune

from fluid.sim.workloads.base import TrialModel, Workload
from fluid.sim.workloads.curves import Curve


def synthetic(
    *,
    iter_time: float = 10.0,
    spread: float = 0.5,
    alpha: float = 1.2,
    beta: float = 1.1,
    memory_gb: float = 2.0,
    max_t: int = 27,
    rate: float = 0.15,
    target: float = 0.9,
    trials: int = 27,
    checkpoint_gb: float = 0.1,
) -> Workload:
    """A synthetic workload (module docstring); every argument is a model parameter."""
    if iter_time <= 0 or spread < 0 or alpha < 1 or beta < 1 or max_t < 1 or trials < 1:
        raise ValueError("synthetic: need iter_time > 0, spread >= 0, alpha >= 1, beta >= 1, "
                         "max_t >= 1, trials >= 1")
    if not 0 < rate <= 1:
        raise ValueError(f"synthetic: rate must be in (0, 1], got {rate}")
    xs = [i / max(1, trials - 1) for i in range(trials)]
    ys = list(xs)
    random.Random(7).shuffle(ys)
    share = min(1.0, 1.0 / alpha)

    def model(c: Mapping[str, Any]) -> TrialModel:
        y = float(c.get("y", 0.5))
        t = iter_time * math.exp(spread * math.sqrt(3) * (2 * y - 1))
        return TrialModel(t, alpha, beta, memory_gb, share, checkpoint_gb)

    def curve(c: Mapping[str, Any]) -> Curve:
        final = 1.0 - 2.0 * (float(c.get("x", 0.5)) - 0.7) ** 2
        return Curve(0.0, final, rate, noise=0.002)

    grid = {"xy": tune.grid_search([[x, y] for x, y in zip(xs, ys, strict=True)])}
    return Workload(
        name="synthetic", metric="score", mode="max", target=target,
        space={"x": tune.uniform(0.0, 1.0), "y": tune.uniform(0.0, 1.0)},
        grid=grid, max_t=max_t, default_config={}, model=_unpack(model),
        curve_of=_unpack(curve), mutations={"x": tune.uniform(0.0, 1.0)},
        description=(f"synthetic: {iter_time:g} s/iteration (log-sd {spread:g}), alpha {alpha:g}, "
                     f"beta {beta:g}, {memory_gb:g} GB, {max_t} iterations"),
    )


def _unpack(f: Any) -> Any:
    # Grid configs carry (x, y) as one "xy" entry so that x and y vary together.
    def g(c: Mapping[str, Any]) -> Any:
        if "xy" in c:
            x, y = c["xy"]
            c = {**c, "x": x, "y": y}
        return f(c)

    return g
