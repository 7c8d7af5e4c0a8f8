"""How good a schedule could be: a lower bound and an exhaustive search for small groups.

``lower_bound = max(sum_i min_w w * h_i(w) / n, max_i min_w h_i(w))`` over each trial's allowed
widths: no schedule, resized or not, uses less GPU area or finishes a trial sooner.

``best_found`` searches every width vector (each trial over its allowed widths, dropping
widths that are not faster than a narrower one) and every distinct start order, list-scheduling
each (``play_fixed``), vectors in order of their own lower bound so the search stops as soon as
no remaining vector can beat the best schedule found. It is exact for the schedules that
list scheduling at fixed widths produces, for groups of at most ``BEST_MAX_TRIALS`` trials on at
most ``BEST_MAX_GPUS`` GPUs; ``max_schedules`` caps the work (the result is then the best found).

Example (Figure 5):
    >>> trials = [TrialSpec(f"a{i}", h) for i, h in enumerate([4, 4, 12, 30], start=1)]
    >>> lower_bound(trials, 5, PolicyConfig(c=2, d=4))
    7.5
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from fluid.core.config import PolicyConfig
from fluid.core.groupsim import play_fixed
from fluid.core.model import WIDTH_TOL, TrialSpec, allowed_widths

BEST_MAX_TRIALS = 6
BEST_MAX_GPUS = 8


def trial_widths(spec: TrialSpec, n: int, config: PolicyConfig) -> list[float]:
    """Allowed widths of one trial on ``n`` GPUs, ascending."""
    return allowed_widths(config.c_of(spec), config.d_of(spec, n), n)


def lower_bound(trials: Sequence[TrialSpec], n: int, config: PolicyConfig) -> float:
    """No schedule of ``trials`` on ``n`` GPUs ends before this (seconds)."""
    if not trials:
        return 0.0
    area, longest = 0.0, 0.0
    for t in trials:
        ws = trial_widths(t, n, config)
        area += min(w * t.runtime_at(w) for w in ws)
        longest = max(longest, min(t.runtime_at(w) for w in ws))
    return max(area / n, longest)


def _useful_widths(spec: TrialSpec, n: int, config: PolicyConfig) -> list[float]:
    kept: list[float] = []
    for w in trial_widths(spec, n, config):
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
