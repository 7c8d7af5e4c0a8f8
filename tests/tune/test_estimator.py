"""The estimator (no Ray instance): its running means and spreads against a recomputation
from the samples."""

from __future__ import annotations

import random

import pytest
from ray.tune.experiment import Trial

from fluid.core import Tunables
from fluid.tune._records import TrialRecord, TrialStore

from .planning import fake_trial, new_estimator

TUNABLES = Tunables(default_iteration_time=2.0)


def test_mean_iteration_time_equals_statistics_mean_over_the_book():
    # The estimator keeps the mean one-GPU time of measured trials as an exact running sum;
    # it must be the very float statistics.mean gives over every measured record now.
    import statistics
    from collections import deque

    rng = random.Random(5)
    store = TrialStore()
    est = new_estimator(store, TUNABLES, None, None)
    recs = []
    for step in range(3000):
        if not recs or rng.random() < 0.05:  # a new trial, now and then restored measured
            samples = deque()
            if rng.random() < 0.3:
                samples.extend([(rng.uniform(1, 9), 1.0), (rng.uniform(1, 9), 0.5)])
            rec = TrialRecord(fake_trial(f"t{len(recs)}", Trial.RUNNING), 0, 20, samples=samples)
            store.add(rec)
            est.track(rec)
            recs.append(rec)
        elif rng.random() < 0.02:  # Tune re-adds a trial: a new record replaces the old
            old = rng.choice(recs)
            rec = TrialRecord(old.trial, 0, 20, samples=deque(old.samples))
            store.add(rec)
            est.track(rec)
            recs[recs.index(old)] = rec
        else:
            rec = rng.choice(recs)
            store.update(rec, actual=rng.choice([0.5, 1.0, 2.0]), fresh_start=False)
            est.observe(rec, rng.uniform(1.0, 9.0), float(step))
        known = [est.iteration_time(r) for r in store.records.values() if r.samples]
        want = statistics.mean(known) if known else est.default_iteration_time
        unmeasured = TrialRecord(fake_trial("new", Trial.RUNNING), 0, 20)
        assert est.iteration_time(unmeasured) == want, step


def test_a_trial_measured_at_two_widths_keeps_its_share_of_the_packing_estimate():
    # Six trials' first iterations decide that packing is free (three alone, three packed
    # in pairs); then the packed ones also run alone, each gaining its own alpha_i. Those
    # rest on the same first iterations: the estimate keeps every trial's sample (it must
    # not fall back towards the prior as trials are measured better).
    store = TrialStore()
    est = new_estimator(store, Tunables())
    recs = [TrialRecord(fake_trial(f"t{i}", Trial.RUNNING), 0, 20, fresh_start=False)
            for i in range(6)]
    for rec in recs:
        store.add(rec)
        est.track(rec)
    base = [9.8, 10.0, 10.2, 9.9, 10.1, 10.0]
    for step in range(2):
        for k, (rec, t) in enumerate(zip(recs, base, strict=True)):
            packed = k >= 3
            est.observe(rec, t * (1.01 if packed else 1.0), now=10.0 * step,
                        width=0.5 if packed else 1.0, clean=True, exposure=float(packed))
    decided = est.packing_estimate
    assert est.packing_measured and decided.n == 6, decided
    for k, rec in enumerate(recs[3:], start=3):
        est.observe(rec, base[k] * (1.0 + 0.002 * k), now=30.0, width=1.0, clean=True,
                    exposure=None)
        assert rec.trial_id in store.own_alphas
        assert est.packing_measured and est.packing_estimate.n >= decided.n, est.packing_estimate


def test_the_spread_of_beta_is_what_the_trials_measured_pooled_with_the_prior() -> None:
    # Trials whose gangs of two scale differently: the spread a resize judges an unmeasured
    # beta_i by is the prior until two trials measured theirs, then moves towards theirs.
    import math
    import statistics

    tunables = Tunables()
    store = TrialStore()
    est = new_estimator(store, tunables)
    betas = [1.2, 1.6, 1.3, 1.9, 1.45]
    spreads = [est.beta_spread]
    for i, beta in enumerate(betas):
        rec = TrialRecord(fake_trial(f"t{i}", Trial.RUNNING), 0, 20, fresh_start=False)
        store.add(rec)
        est.track(rec)
        for step in range(3):
            est.observe(rec, 10.0, now=step, width=1.0)
        for step in range(3, 6):
            est.observe(rec, 10.0 / 2 * beta, now=step, width=2.0)
        spreads.append(est.beta_spread)
    assert sorted(store.own_betas.values()) == pytest.approx(sorted(betas), rel=1e-6)
    assert spreads[:2] == [tunables.prior_beta_spread] * 2
    measured = statistics.stdev(math.log(b) for b in betas)
    assert tunables.prior_beta_spread < spreads[-1] < measured
    assert spreads[-1] == pytest.approx(math.sqrt(
        (tunables.prior_beta_spread ** 2 + 4 * measured ** 2) / 5))
