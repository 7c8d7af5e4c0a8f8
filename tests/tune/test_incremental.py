"""The planner's incremental state (issue 14) against a recomputation from scratch.

The planner keeps each trial's spec while its record is unchanged (``TrialStore.take_changed``)
and the live trials of each group in an index, and the store the largest budget; all must
always equal what a scan of the store and a planner with nothing cached compute, whatever
happens to the records in between.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from ray.tune.experiment import Trial

from fluid.core import Tunables
from fluid.tune._cpus import CpuAccount
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._options import FluidOptions
from fluid.tune._planner import Planner
from fluid.tune._records import LIVE, TRANSITIONS, Phase, TrialRecord, TrialStore

from .planning import file_records, make_planner, new_planner

WIDTHS = [None, 0.5, 1.0, 2.0, 3.0]


def _trial(tid: str) -> SimpleNamespace:
    return SimpleNamespace(trial_id=tid, status=Trial.RUNNING, last_result={})


TUNABLES = Tunables(default_iteration_time=2.0)


def _estimator(store: TrialStore, gpu_memory: float | None, prior: float | None,
               ) -> OverheadEstimator:
    return OverheadEstimator(store, alpha=prior, beta=prior, eps=None, refine=True,
                             trial_memory=None, gpu_memory=gpu_memory, tunables=TUNABLES)


def _planner(store: TrialStore, est: OverheadEstimator, policy, **kw) -> Planner:  # noqa: ANN001
    return new_planner(store, est, policy, TUNABLES, **kw)


def _step(rng: random.Random, store: TrialStore, est: OverheadEstimator, planner: Planner,
          recs: list[TrialRecord], now: float) -> None:
    """One random thing that happens to a trial (what the executor's hooks do)."""
    rec = rng.choice(recs)
    kind = rng.randrange(11)
    if kind == 0:  # a new record for the same trial (Tune re-adds it after a failure)
        new = TrialRecord(rec.trial, rng.randrange(3), rng.choice([None, 10, 20]),
                          phase=rng.choice(list(Phase)), elastic=rec.elastic,
                          width=rng.choice(WIDTHS))
        recs[next(k for k, r in enumerate(recs) if r is rec)] = new
        store.add(new)
    elif kind == 1:
        store.move(rec, rng.choice(sorted(TRANSITIONS[rec.phase] | {rec.phase}, key=str)))
    elif kind == 2:
        store.update(rec, width=rng.choice(WIDTHS))
    elif kind == 3:
        store.update(rec, group=rng.randrange(3))
    elif kind == 4:  # a result: the iteration moves, the estimator may take a sample
        store.update(rec, iteration=rec.iteration + 1, actual=rng.choice(WIDTHS[1:]),
                     fresh_start=False)
        if rng.random() < 0.3:
            rec.trial.last_result = {"fluid_peak_gpu_memory": rng.choice([4, 8]) * 2**30}
        est.observe(rec, rng.uniform(1.0, 5.0), now)
    elif kind == 5:
        store.update(rec, until=rng.choice([None, 5, 10, 20, 40]))
    elif kind == 6:
        store.update(rec, priority=rng.randrange(2))
    elif kind == 7:
        store.update(rec, min_share=rng.choice([None, 0.5, 1.0]))
    elif kind == 8:
        store.update(rec, checkpoints=rng.random() < 0.8, budget_resizes=rng.randrange(3))
    elif kind == 9:
        planner.life.unplace(rec)
    else:  # a node joined or left
        gpus = rng.choice([4.0, 8.0, 16.0])
        planner.sync_cluster(SimpleNamespace(gpus=lambda: gpus))


@pytest.mark.parametrize("gpu_memory", [None, 16.0])
@pytest.mark.parametrize("prior", [None, 1.0])  # 1.0: packed and ganged, d_i up to the GPUs
@pytest.mark.parametrize("seed", range(3))
def test_cached_specs_and_live_index_equal_a_recomputation(seed, prior, gpu_memory):
    rng = random.Random(seed)
    store = TrialStore()
    est = _estimator(store, gpu_memory, prior)
    policy = FluidOptions(gpu_memory=gpu_memory).policy
    planner = _planner(store, est, policy)
    planner.start(8.0)
    recs = [TrialRecord(_trial(f"t{i}"), i % 3, 20, elastic=i % 2 == 0) for i in range(30)]
    for rec in recs:
        store.add(rec)
    specs = planner.specs
    for step in range(1500):
        _step(rng, store, est, planner, recs, float(step))
        if step % 3:
            continue
        got = {r.trial_id: specs.spec(r) for r in recs}
        placing = {r.trial_id: specs.placing_spec(r) for r in recs}
        live = {g: specs.live_trials(specs.live_of(g)) for g in range(3)}
        # The reference: a planner with nothing cached, on the same store (changes taken).
        fresh = _planner(store, est, policy)
        fresh.start(planner.gpus)
        known = [r.until for r in store.records.values() if r.until is not None]
        for r in recs:
            assert store.default_until(r) == (max(known) if known else r.iteration + 1)
            want = fresh.specs.spec(r)
            assert got[r.trial_id] == want, (step, r.trial_id)
            p = placing[r.trial_id]
            assert (p.id, p.c, p.memory) == (want.id, want.c, want.memory)
        for g in range(3):
            scan = [r for r in store.in_phase(LIVE) if r.group == g and r.width is not None]
            assert [id(r) for r in specs.live_of(g)] == [id(r) for r in scan], (step, g)
            assert live[g] == [fresh.specs.live_trial(r) for r in scan], (step, g)


def test_queue_follows_a_priority_change_of_a_queued_trial():
    # The queue is sorted by priority only when it may be out of order (it grew, or a queued
    # trial changed): a promotion while queued must still start that trial first.
    store, _, planner = make_planner(2.0, options={"c": 1, "d": 1}, default_iteration_time=2.0)
    recs = file_records(store, 5, status=Trial.RUNNING)
    planner.plan(lambda: recs, False)
    assert planner.life.ready == ["t0", "t1"] and planner.life.queue == ["t2", "t3", "t4"]
    planner.plan(lambda: [], False)  # sorted: nothing changes the order
    assert planner.life.queue == ["t2", "t3", "t4"]
    store.update(recs[4], priority=1)  # promoted while queued
    planner.life.unplace(recs[0])
    planner.plan(lambda: [], False)
    assert planner.life.ready[-1] == "t4" and planner.life.queue == ["t2", "t3"]


def test_mean_iteration_time_equals_statistics_mean_over_the_book():
    # The estimator keeps the mean one-GPU time of measured trials as an exact running sum;
    # it must be the very float statistics.mean gives over every measured record now.
    import statistics
    from collections import deque

    rng = random.Random(5)
    store = TrialStore()
    est = _estimator(store, None, None)
    recs = []
    for step in range(3000):
        if not recs or rng.random() < 0.05:  # a new trial, now and then restored measured
            samples = deque()
            if rng.random() < 0.3:
                samples.extend([(rng.uniform(1, 9), 1.0), (rng.uniform(1, 9), 0.5)])
            rec = TrialRecord(_trial(f"t{len(recs)}"), 0, 20, samples=samples)
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
        unmeasured = TrialRecord(_trial("new"), 0, 20)
        assert est.iteration_time(unmeasured) == want, step


@pytest.mark.parametrize("cpus_per_trial", [None, 1, 0.5])
def test_remembered_shape_cpus_equal_those_of_the_built_shape(cpus_per_trial):
    from fluid.tune._placement_groups import cpus_in

    account = CpuAccount(TrialStore(), cpus_per_trial, 0.5)
    for width in [1 / 3, 0.5, 1.0, 2.0, 5.0]:
        for cpus in [1.0, 2.0, 0.25]:
            rec = TrialRecord(_trial("t"), 0, 5, cpus=cpus)
            for _ in range(2):  # built, then remembered
                assert account.needed(rec, width) == cpus_in(account.shape(rec, width))
