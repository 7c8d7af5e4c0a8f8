"""The estimator refines alpha and beta from trials it saw at two widths (no Ray needed)."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from fluid import FluidExecutor
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import TrialBook, TrialRecord


def _trial(tid):
    return SimpleNamespace(trial_id=tid)


def _estimator(book):
    return OverheadEstimator(book, alpha=1.0, beta=1.0, eps=None, refine=True,
                             default_iteration_time=1.0, trial_memory=None, gpu_memory=None)


def test_alpha_and_beta_from_resized_trials():
    book = TrialBook()
    est = _estimator(book)
    a = TrialRecord(_trial("a"), 0, 10)
    a.raw = {1 / 3: deque([4.0, 4.0]), 1.0: deque([1.0])}  # T_3 / T_1 = alpha ** 2
    a.samples = deque([(4.0, 1 / 3), (4.0, 1 / 3), (1.0, 1.0)])
    b = TrialRecord(_trial("b"), 0, 10)
    b.raw = {1.0: deque([2.0]), 4.0: deque([0.5 * 1.1**3])}  # 4 T_4 / T_1 = beta ** 3
    book.add(a)
    book.add(b)
    est.refine_overheads(a)
    est.refine_overheads(b)
    assert est.alpha == pytest.approx(2.0)
    assert est.beta == pytest.approx(1.1)
    # One-GPU iteration times are re-derived under the new overheads.
    assert est.iteration_time(a) == pytest.approx(1.0)
    # A trial not measured yet is assumed to be like the measured ones.
    c = TrialRecord(_trial("c"), 0, 10)
    book.add(c)
    assert est.iteration_time(c) == pytest.approx(1.0)


def test_results_at_a_second_width_refine_alpha():
    book = TrialBook()
    est = _estimator(book)
    rec = TrialRecord(_trial("a"), 0, 10)
    book.add(rec)
    rec.actual, rec.fresh_start = 0.5, False
    assert est.observe(rec, 4.0, now=0.0)  # the first sample: a profiling round
    assert not est.observe(rec, 4.0, now=1.0)
    rec.actual = 1.0
    est.observe(rec, 2.0, now=2.0)  # T_2 / T_1 = alpha at a share 1/2 vs 1 GPU
    assert est.alpha == pytest.approx(2.0)


def test_first_result_after_a_resize_measures_eps():
    book = TrialBook()
    est = _estimator(book)
    rec = TrialRecord(_trial("a"), 0, 10)
    book.add(rec)
    rec.samples.append((2.0, 1.0))
    rec.raw[1.0] = deque([2.0])  # it ran at this width before: the result measures eps only
    rec.actual, rec.resize_at = 1.0, 10.0
    assert est.eps == 5.0  # DEFAULT_EPS until measured
    assert not est.observe(rec, 2.0, now=15.0)  # 5 s since the resize, 2 s of them training
    assert est.eps == pytest.approx(3.0)
    assert rec.resize_at is None and len(rec.samples) == 1


def test_until_a_resize_is_measured_eps_is_what_starts_cost():
    book = TrialBook()
    est = _estimator(book)
    a, b = TrialRecord(_trial("a"), 0, 10), TrialRecord(_trial("b"), 0, 10)
    for rec in (a, b):
        book.add(rec)
        rec.actual = 1.0
    a.shapes.append((10.0, 1.0, (0,)))  # handed one GPU at 10 s
    assert est.eps == 5.0  # DEFAULT_EPS: nothing measured
    est.observe(a, 2.0, now=13.5)  # its first result: 3.5 s since the start, 2 s training
    assert est.eps == pytest.approx(1.5)
    a.fresh_start = False
    est.observe(a, 2.0, now=15.5)  # not a start: nothing to measure
    assert est.eps == pytest.approx(1.5)
    b.shapes.append((10.0, 1.0, (1,)))
    est.observe(b, 2.0, now=14.5)
    assert est.eps == pytest.approx(2.0)  # the median of 1.5 and 2.5 s
    b.fresh_start = False
    # A measured resize replaces the starts: a restart also saves and restores.
    b.resize_at, b.raw[1.0] = 20.0, deque([2.0])
    est.observe(b, 2.0, now=28.0)
    assert est.eps == pytest.approx(6.0)


def test_profile_sets_overheads():
    from fluid.tune.profiler import Profile

    ex = FluidExecutor(profile=Profile(alpha=1.3, c=3, beta=1.05, d=4))
    assert (ex.alpha, ex.beta, ex.policy.c, ex.policy.d) == (1.3, 1.05, 3, 4)
