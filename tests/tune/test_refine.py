"""FluidExecutor refines alpha and beta from trials it saw at two widths (no Ray needed)."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from fluid import FluidExecutor
from fluid.tune._executor import _Record


def _trial(tid):
    return SimpleNamespace(trial_id=tid)


def test_alpha_and_beta_from_resized_trials():
    ex = FluidExecutor(alpha=1.0, beta=1.0)
    a = _Record(_trial("a"), 0, 10)
    a.raw = {1 / 3: deque([4.0, 4.0]), 1.0: deque([1.0])}  # T_3 / T_1 = alpha ** 2
    a.samples = deque([(4.0, 1 / 3), (4.0, 1 / 3), (1.0, 1.0)])
    b = _Record(_trial("b"), 0, 10)
    b.raw = {1.0: deque([2.0]), 4.0: deque([0.5 * 1.1**3])}  # 4 T_4 / T_1 = beta ** 3
    ex._records = {"a": a, "b": b}
    ex._refine_overheads(a)
    ex._refine_overheads(b)
    assert ex.alpha == pytest.approx(2.0)
    assert ex.beta == pytest.approx(1.1)
    # One-GPU iteration times are re-derived under the new overheads.
    assert ex._iteration_time(a) == pytest.approx(1.0)
    # A trial not measured yet is assumed to be like the measured ones.
    c = _Record(_trial("c"), 0, 10)
    ex._records["c"] = c
    assert ex._iteration_time(c) == pytest.approx(1.0)


def test_profile_sets_overheads():
    from fluid.tune.profiler import Profile

    ex = FluidExecutor(profile=Profile(alpha=1.3, c=3, beta=1.05, d=4))
    assert (ex.alpha, ex.beta, ex._policy.c, ex._policy.d) == (1.3, 1.05, 3, 4)
