"""How good a schedule could be: lower bounds and an exhaustive search for small groups.

``lower_bound = max(sum_i min_w w * h_i(w) / n, max_i min_w h_i(w))`` over every width the
instance allows a trial (``instance_widths``: shares down to ``1/c`` and gangs up to ``d``, the
trial's own limits, else the group's, else ``c_max`` and all ``n`` GPUs): no schedule, resized
or not, uses less GPU area or finishes a trial sooner. ``policy_lower_bound`` is the same over
the widths the policy gives each trial (``policy_widths``: ``c_i``, ``d_i`` also derived from
its ``alpha_i``, ``beta_i``), the bound of the schedules ``best_found`` searches; it can exceed
``lower_bound`` (a trial whose ``d_i`` stops below the group's ``d`` because one more worker
adds less than ``s_th`` still ends sooner on ``d`` GPUs).

``best_found`` searches every width vector (each trial over its allowed widths, dropping
widths that are not faster than a narrower one) and every distinct start order, list-scheduling
each (``play_fixed``), vectors in order of their own lower bound so the search stops as soon as
no remaining vector can beat the best schedule found. It is exact for the schedules that
list scheduling at fixed widths produces, for groups of at most ``BEST_MAX_TRIALS`` trials on at
most ``BEST_MAX_GPUS`` GPUs; ``max_schedules`` caps the work (the result is then the best found).

Example (Figure 5, then a trial whose ``d_i`` is 7 of the group's 8):
    >>> trials = [TrialSpec(f"a{i}", h) for i, h in enumerate([4, 4, 12, 30], start=1)]
    >>> lower_bound(trials, 5, PolicyConfig(c=2, d=4))
    7.5
    >>> t = [TrialSpec("t", 13.47, beta=1.096)]
    >>> round(lower_bound(t, 16, PolicyConfig(d=8)), 3), round(policy_lower_bound(t, 16, PolicyConfig(d=8)), 3)
    (3.199, 3.335)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from fluid.core.config import PolicyConfig
from fluid.core.groupsim import play_fixed
from fluid.core.model import TrialSpec, allowed_widths
from fluid.core.tolerances import WIDTH_TOL

BEST_MAX_TRIALS = 6
BEST_MAX_GPUS = 8


def policy_widths(spec: TrialSpec, n: int, config: PolicyConfig) -> list[float]:
    """The widths the policy gives one trial on ``n`` GPUs (``c_i``, ``d_i``), ascending."""
    return allowed_widths(config.c_of(spec), config.d_of(spec, n), n)


def instance_widths(spec: TrialSpec, n: int, config: PolicyConfig) -> list[float]:
    """Every width the instance allows one trial on ``n`` GPUs, ascending: its own ``c`` and
    ``d``, else the group's, else ``c_max`` trials per GPU and all ``n`` GPUs."""
    c = spec.c if spec.c is not None else config.c if config.c is not None else config.c_max
    d = spec.d if spec.d is not None else config.d if config.d is not None else n
    return allowed_widths(c, d, n)


def _bound(trials: Sequence[TrialSpec], n: int, config: PolicyConfig,
           widths: Callable[[TrialSpec, int, PolicyConfig], list[float]]) -> float:
    if not trials:
        return 0.0
    area, longest = 0.0, 0.0
    for t in trials:
        ws = widths(t, n, config)
        area += min(w * t.runtime_at(w) for w in ws)
        longest = max(longest, min(t.runtime_at(w) for w in ws))
    return max(area / n, longest)


def lower_bound(trials: Sequence[TrialSpec], n: int, config: PolicyConfig) -> float:
    """No schedule of ``trials`` on ``n`` GPUs ends before this (seconds)."""
    return _bound(trials, n, config, instance_widths)


def policy_lower_bound(trials: Sequence[TrialSpec], n: int, config: PolicyConfig) -> float:
    """No schedule at the widths the policy allows (``policy_widths``) ends before this."""
    return _bound(trials, n, config, policy_widths)


def _useful_widths(spec: TrialSpec, n: int, config: PolicyConfig) -> list[float]:
    kept: list[float] = []
    for w in policy_widths(spec, n, config):
        if not kept or spec.runtime_at(w) < min(spec.runtime_at(k) for k in kept) - WIDTH_TOL:
            kept.append(w)
    return kept


def _orders(trials: Sequence[TrialSpec], widths: Sequence[float]) -> list[tuple[int, ...]]:
    # Trials alike in every respect and width are interchangeable: one order per multiset.
    keys = [
        (t.runtime, t.alpha, t.beta, t.c, t.d, t.memory, w)
        for t, w in zip(trials, widths, strict=True)
    ]
    seen: set[tuple] = set()
    out = []
    for perm in itertools.permutations(range(len(trials))):
        sig = tuple(keys[i] for i in perm)
        if sig not in seen:
            seen.add(sig)
            out.append(perm)
    return out


def best_found(
    trials: Sequence[TrialSpec],
    n: int,
    config: PolicyConfig,
    max_schedules: int = 50_000,
) -> float | None:
    """Best makespan over widths and start orders; ``None`` for groups too large to search."""
    if not trials or len(trials) > BEST_MAX_TRIALS or n > BEST_MAX_GPUS:
        return None
    choices = [_useful_widths(t, n, config) for t in trials]
    sizes = [len(c) for c in choices]
    idx = np.unravel_index(np.arange(int(np.prod(sizes))), sizes)
    areas = np.zeros(idx[0].shape)
    longest = np.zeros(idx[0].shape)
    for i, (t, ws) in enumerate(zip(trials, choices, strict=True)):
        h = np.array([t.runtime_at(w) for w in ws])
        areas += (np.array(ws) * h)[idx[i]]
        longest = np.maximum(longest, h[idx[i]])
    bounds = np.maximum(areas / n, longest)
    best, budget = float("inf"), max_schedules
    for v in np.argsort(bounds, kind="stable"):
        if bounds[v] >= best - WIDTH_TOL or budget <= 0:
            break
        widths = [choices[i][idx[i][v]] for i in range(len(trials))]
        by_id = {t.id: w for t, w in zip(trials, widths, strict=True)}
        for perm in _orders(trials, widths):
            if budget <= 0:
                break
            budget -= 1
            order = [trials[i].id for i in perm]
            best = min(best, play_fixed(trials, n, config, by_id, order).makespan)
    return best
