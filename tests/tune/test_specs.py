"""The spec cache (no Ray instance): specs kept while a record is unchanged, and the live
trials indexed by group, always equal what a planner with nothing cached computes, whatever
happens to the trials in between."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from ray.tune.experiment import Trial

from fluid.core import Tunables
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._options import FluidOptions
from fluid.tune._planner import Planner
from fluid.tune._records import LIVE, TRANSITIONS, Phase, TrialRecord, TrialStore

from .planning import fake_trial, file_records, make_planner, new_estimator, new_planner

WIDTHS = [None, 0.5, 1.0, 2.0, 3.0]
TUNABLES = Tunables(default_iteration_time=2.0)


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
        planner.life.cluster_changed(planner.sync_cluster(SimpleNamespace(gpus=lambda: gpus)))


@pytest.mark.parametrize("gpu_memory", [None, 16.0])
@pytest.mark.parametrize("prior", [None, 1.0])  # 1.0: packed and ganged, d_i up to the GPUs
@pytest.mark.parametrize("seed", range(3))
def test_cached_specs_and_live_index_equal_a_recomputation(seed, prior, gpu_memory):
    rng = random.Random(seed)
    store = TrialStore()
    est = new_estimator(store, TUNABLES, gpu_memory, prior)
    policy = FluidOptions(gpu_memory=gpu_memory).policy
    planner = _planner(store, est, policy)
    planner.life.open(8, gpu_memory)
    planner.start(8.0)
    recs = [TrialRecord(fake_trial(f"t{i}", Trial.RUNNING), i % 3, 20, elastic=i % 2 == 0)
            for i in range(30)]
    for rec in recs:
        store.add(rec)
    specs = planner.specs
    for step in range(1500):
        _step(rng, store, est, planner, recs, float(step))
        if step % 3:
            continue
        ones = {r.trial_id for r in specs.with_c(recs, 1)}  # (before: cached if settled)
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
            assert (r.trial_id in ones) == (want.c == 1), (step, r.trial_id)
            p = placing[r.trial_id]
            assert (p.id, p.c, p.memory) == (want.id, want.c, want.memory)
        for g in range(3):
            scan = [r for r in store.in_phase(LIVE) if r.group == g and r.width is not None]
            assert [id(r) for r in specs.live_of(g)] == [id(r) for r in scan], (step, g)
            assert live[g] == [fresh.specs.live_trial(r) for r in scan], (step, g)


def test_trials_pack_for_throughput_once_one_ran_its_whole_budget_under_fifo():
    # alpha 1.4: a pair adds 43% throughput, too costly for a target, enough for a grid
    for whole_budget in (True, False):  # False: a scheduler may stop trials early
        store, _, planner = make_planner(8.0, alpha=1.4)
        planner.start(8.0, whole_budget=whole_budget)
        recs = file_records(store, 3)
        assert [planner.specs.spec(r).c for r in recs] == [1, 1, 1]  # the first wave: alone
        store.move(recs[0], Phase.DONE)
        packs = 2 if whole_budget else 1
        assert [planner.specs.spec(r).c for r in recs[1:]] == [packs, packs]
        assert planner.specs.fresh_c() == packs
