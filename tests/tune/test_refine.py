"""The estimator refines alpha and beta from trials it saw at two widths (no Ray needed)."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from fluid import FluidExecutor
from fluid.core import Tunables
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import TrialRecord, TrialStore


def _trial(tid):
    return SimpleNamespace(trial_id=tid)


def _estimator(store):
    return OverheadEstimator(store, alpha=1.0, beta=1.0, eps=None, refine=True,
                             trial_memory=None, gpu_memory=None, tunables=Tunables())


def _file(store, est, *recs):
    for rec in recs:
        store.add(rec)
        est.track(rec)


def test_alpha_and_beta_from_resized_trials():
    store = TrialStore()
    est = _estimator(store)
    a = TrialRecord(_trial("a"), 0, 10, raw={1 / 3: deque([4.0, 4.0]), 1.0: deque([1.0])},
                    samples=deque([(4.0, 1 / 3), (4.0, 1 / 3), (1.0, 1.0)]))  # T_3/T_1 = alpha**2
    b = TrialRecord(_trial("b"), 0, 10,
                    raw={1.0: deque([2.0]), 4.0: deque([0.5 * 1.1**3])})  # 4 T_4/T_1 = beta**3
    _file(store, est, a, b)
    est.refine_overheads(a)
    est.refine_overheads(b)
    assert est.alpha == pytest.approx(2.0)
    assert est.beta == pytest.approx(1.1)
    # One-GPU iteration times are re-derived under the new overheads.
    assert est.iteration_time(a) == pytest.approx(1.0)
    # A trial not measured yet is assumed to be like the measured ones.
    c = TrialRecord(_trial("c"), 0, 10)
    _file(store, est, c)
    assert est.iteration_time(c) == pytest.approx(1.0)


def test_results_at_a_second_width_refine_alpha():
    store = TrialStore()
    est = _estimator(store)
    rec = TrialRecord(_trial("a"), 0, 10, actual=0.5, fresh_start=False)
    _file(store, est, rec)
    assert est.observe(rec, 4.0, now=0.0)  # the first sample: a profiling round
    assert not est.observe(rec, 4.0, now=1.0)
    store.update(rec, actual=1.0)
    est.observe(rec, 2.0, now=2.0)  # T_2 / T_1 = alpha at a share 1/2 vs 1 GPU
    assert est.alpha == pytest.approx(2.0)


def test_first_result_after_a_resize_measures_eps():
    store = TrialStore()
    est = _estimator(store)
    # it ran at this width before: the result measures eps only
    rec = TrialRecord(_trial("a"), 0, 10, samples=deque([(2.0, 1.0)]),
                      raw={1.0: deque([2.0])}, actual=1.0, resize_at=10.0)
    _file(store, est, rec)
    assert est.eps == Tunables.default_eps  # until measured
    assert not est.observe(rec, 2.0, now=15.0)  # 5 s since the resize, 2 s of them training
    assert est.eps == pytest.approx(3.0)
    assert rec.resize_at is None and len(rec.samples) == 1


def test_until_a_resize_is_measured_eps_is_what_starts_cost():
    store = TrialStore()
    est = _estimator(store)
    a, b = (TrialRecord(_trial(t), 0, 10, actual=1.0) for t in "ab")
    _file(store, est, a, b)
    store.log_shape(a, 10.0, 1.0, (0,))  # handed one GPU at 10 s
    assert est.eps == Tunables.default_eps  # nothing measured
    est.observe(a, 2.0, now=13.5)  # its first result: 3.5 s since the start, 2 s training
    assert est.eps == pytest.approx(1.5)
    store.update(a, fresh_start=False)
    est.observe(a, 2.0, now=15.5)  # not a start: nothing to measure
    assert est.eps == pytest.approx(1.5)
    store.log_shape(b, 10.0, 1.0, (1,))
    est.observe(b, 2.0, now=14.5)
    assert est.eps == pytest.approx(1.5)  # the least of 1.5 and 2.5 s
    # A measured resize replaces the starts: a restart also saves and restores.
    store.update(b, fresh_start=False, resize_at=20.0, raw={**b.raw, 1.0: deque([2.0])})
    est.observe(b, 2.0, now=28.0)
    assert est.eps == pytest.approx(6.0)


def test_a_wave_of_starts_does_not_set_eps_above_a_lone_start():
    # Measured with fluid bench e2e --quick on two cores: four trials starting together took
    # 7.1-7.4 s each, three starting after them 4.3-5.1 s. A resize restarts one trial: its
    # cost is closer to the least contended start than to the median of the wave.
    store = TrialStore()
    est = _estimator(store)
    recs = [TrialRecord(_trial(str(i)), 0, 10, actual=1.0) for i in range(7)]
    _file(store, est, *recs)
    for rec, cost in zip(recs, [7.35, 7.13, 7.29, 7.19, 4.25, 4.55, 5.06], strict=True):
        store.log_shape(rec, 0.0, 1.0, (0,))
        est.observe(rec, 0.5, now=cost + 0.5)
    assert est.eps == pytest.approx(4.25)


def test_profile_sets_overheads():
    from fluid.tune.profiler import Profile

    ex = FluidExecutor(profile=Profile(alpha=1.3, c=3, beta=1.05, d=4))
    assert (ex.alpha, ex.beta, ex.options.policy.c, ex.options.policy.d) == (1.3, 1.05, 3, 4)


def test_a_profile_is_taken_as_fluid_profile_json_prints_it(tmp_path):
    import json

    from fluid import FluidConfigError
    from fluid.tune.profiler import Profile

    printed = Profile(alpha=1.3, c=3, beta=1.05, d=4, pack_times={1: 0.5, 2: 0.65},
                      memory=2.5, device="cpu: x86_64").to_json()
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(printed))
    for given in (printed, str(path), path):
        ex = FluidExecutor(profile=given)
        assert (ex.alpha, ex.beta, ex.options.policy.c, ex.options.policy.d) == (1.3, 1.05, 3, 4)
        assert ex.options.trial_memory == 2.5
    for bad, says in ((3, "got int"), ({"alpha": 1.2}, "not a profile"),
                      (str(tmp_path / "missing.json"), "cannot read")):
        with pytest.raises(FluidConfigError, match=f"profile.*{says}|{says}.*profile") as e:
            FluidExecutor(profile=bad)
        assert "fluid profile --json" in str(e.value)
