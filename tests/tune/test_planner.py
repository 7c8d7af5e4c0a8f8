"""The planner on its own (no Ray instance): groups sized and handed out in order, CPUs,
requests and keep-shape groups, the queue's priorities, pending resizes, re-plans in rounds;
the time-to-target policy as it applies it (the conservative prior, per-trial overheads from a
trial's own iteration times). The rules themselves: tests/core/test_policy.py."""

from __future__ import annotations

import math
from collections import deque
from types import SimpleNamespace

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler

from fluid.core import Tunables
from fluid.tune._group import TrialGroup
from fluid.tune._records import Phase, TrialRecord, TrialStore

from .planning import elastic_planner as _setup
from .planning import elastic_records as _records
from .planning import fake_trial as _trial
from .planning import file_records, make_planner, plan


class _LeastFirst(FIFOScheduler):
    """Chooses, like PBT, the PENDING or PAUSED trial that comes first in ``order``."""

    def __init__(self, order):
        super().__init__()
        self.order = order

    def choose_trial_to_run(self, tc):
        waiting = [t for t in tc.trials if t.status in (Trial.PENDING, Trial.PAUSED)]
        return min(waiting, key=lambda t: self.order.index(t.trial_id), default=None)


def test_planner_sizes_a_group_and_hands_out_ready_trials_in_order():
    store, _, planner = make_planner(2.0, options={"c": 1, "d": 1}, now=7.0)
    recs = file_records(store, 3)
    plan(planner, lambda: recs, False)
    assert [r.width for r in recs] == [1.0, 1.0, 1.0]  # c = d = 1: one GPU each
    assert planner.life.ready == ["t0", "t1"] and planner.life.queue == ["t2"]
    assert [r.phase for r in recs] == [Phase.READY, Phase.READY, Phase.QUEUED]
    assert planner.plan_log[0]["kind"] == "static" and planner.plan_log[0]["time"] == 7.0
    assert planner.life.take_ready() is recs[0]
    planner.life.unplace(recs[0])  # t0 left: its GPU goes to the queued trial at the next plan
    plan(planner, lambda: [], False)
    assert planner.life.queue == [] and recs[2].phase is Phase.READY


def test_planner_starts_only_what_the_cpus_hold_and_spreads_it():
    store, _, planner = make_planner(4.0, 4.0, options={"c": 8})
    recs = file_records(store, 8, cpus=1.0)
    plan(planner, lambda: [r for r in recs if r.phase is Phase.HELD], False)
    assert planner.life.ready == ["t0", "t1", "t2", "t3"]  # 4 CPUs: 4 one-CPU trials
    assert [r.phase for r in recs[4:]] == [Phase.HELD] * 4  # not sized yet
    assert sorted(g for r in recs[:4] for g in planner.life.pool.where(r.trial_id)) == [0, 1, 2, 3]
    planner.life.unplace(recs[0])
    store.move(recs[0], Phase.DONE)
    plan(planner, lambda: [r for r in recs if r.phase is Phase.HELD], False)
    assert planner.life.ready[-1] == "t4" and recs[5].phase is Phase.HELD


def test_planner_keeps_a_request_and_its_placement_group():
    from ray.tune import PlacementGroupFactory

    from fluid.tune._state_file import apply_saved

    store, _, planner = make_planner(options={"c": 8}, cpus_per_trial=0.5)
    asked = PlacementGroupFactory([{"CPU": 2, "GPU": 2}])
    rec = TrialRecord(_trial("two"), 0, 10, asked=2.0, w_min=2.0, request=asked)
    free = TrialRecord(_trial("free"), 0, 10)
    for r in (rec, free):
        store.add(r)
    plan(planner, lambda: [rec, free], False)
    assert rec.width == 2.0 and planner.cpus.shape(rec, rec.width) is asked
    assert planner.cpus.needed(rec) == 2.0 and planner.cpus.needed(free, 0.5) == 0.5
    # A restored trial's placement group is Fluid's shape; the saved state keeps the request.
    restored = TrialRecord(_trial("two"), 0, 10)
    apply_saved(store, restored, {"asked": 2.0, "w_min": 2.0, "request": asked.bundles})
    assert restored.w_min == 2.0 and restored.request.bundles == asked.bundles


def test_planner_keeps_plain_tunes_shape_for_a_keep_shape_group():
    # Packing and gangs look free (alpha = beta = 1) and GPUs are idle: any other group's
    # trials would be ganged; a keep_shape group's (PBT's population) stay as Tune runs them.
    from fluid.tune._group import TrialGroup

    store, _, planner = make_planner(6.0, options={"c": 8})
    store.add_group(TrialGroup([], {}, "population", keep_shape=True))
    plain = TrialRecord(_trial("plain"), 0, 10, elastic=True)
    asked = TrialRecord(_trial("asked"), 0, 10, elastic=True, asked=2.0)
    # Asked for 2 GPUs, but neither a gang nor kept as its own placement group (the user let
    # Fluid resize requests): one GPU.
    stiff = TrialRecord(_trial("stiff"), 0, 10, elastic=False, asked=2.0)
    for r in (plain, asked, stiff):
        store.add(r)
    plan(planner, lambda: [plain, asked, stiff], False)
    assert (plain.width, asked.width, stiff.width) == (1.0, 2.0, 1.0)
    while planner.life.take_ready():  # handed to Tune: running and measured
        pass
    for r in (plain, asked):
        store.move(r, Phase.RUNNING, actual=r.width, checkpoints=True)
        store.add_sample(r, 1.0, r.width, kept=5)
    planner.replan(0)
    plan(planner, lambda: [], False)
    assert (plain.width, asked.width) == (1.0, 2.0) and not planner.plan_log[1:]


def test_a_keep_shape_member_restarts_one_per_step_as_under_plain_tune():
    from fluid.tune._base_view import eligible
    from fluid.tune._group import TrialGroup

    store = TrialStore()
    store.add_group(TrialGroup([], {}, "population", keep_shape=True))
    exploited = TrialRecord(_trial("exploited"), 0, 4, phase=Phase.PAUSED, base_status="PAUSED")
    waiting = TrialRecord(_trial("waiting"), 0, 4, phase=Phase.PAUSED, base_status="PAUSED")
    new = TrialRecord(_trial("new"), 0, 4)  # held: the base sees it PENDING
    starting = TrialRecord(_trial("starting", Trial.PENDING), 0, 4, phase=Phase.RUNNING)
    recs = [exploited, waiting, new, starting]
    for r in recs:
        store.add(r)
    tc = SimpleNamespace(trials=[r.trial for r in recs])
    calls = []
    ask = lambda base: eligible(base, store, tc, 256, lambda: calls.append(1))  # noqa: E731
    # The base's choice and every new member start now; the other paused member waits for
    # the base to choose it at a later step, as Tune asks its scheduler once per step.
    base = _LeastFirst(["exploited", "new", "waiting", "starting"])
    assert ask(base) == ([exploited, new], True) and calls == [1]
    # The base chooses a member Tune is still starting: ask again once it runs.
    base.order = ["starting", "exploited", "new", "waiting"]
    assert ask(base) == ([new], True)
    starting.trial.status = Trial.RUNNING
    assert ask(base) == ([exploited, new], True)


def test_a_trial_tune_is_still_starting_does_not_hide_new_ones_from_the_scan():
    # HyperBandForBOHB chooses the first PENDING trial of its brackets: one whose actor Tune
    # is still starting (PENDING under plain Tune too). Plain Tune starts its other PENDING
    # trials in the same step whatever the scheduler chose; so does Fluid.
    from fluid.tune._base_view import eligible
    from fluid.tune._group import TrialGroup

    store = TrialStore()
    store.add_group(TrialGroup([], {}, "rung"))
    starting = TrialRecord(_trial("starting", Trial.PENDING), 0, 4, phase=Phase.RUNNING)
    running = TrialRecord(_trial("running", Trial.RUNNING), 0, 4, phase=Phase.RUNNING)
    new = [TrialRecord(_trial(f"new{i}"), 0, 4) for i in range(2)]  # held: PENDING to the base
    recs = [starting, running, *new]
    for r in recs:
        store.add(r)
    tc = SimpleNamespace(trials=[r.trial for r in recs])
    base = _LeastFirst(["starting", "new0", "new1"])
    assert eligible(base, store, tc, 256, lambda: None) == (new, False)
    assert starting.trial.status == Trial.PENDING  # shown RUNNING to the base only meanwhile
    base.order = ["new1", "starting", "new0"]
    assert eligible(base, store, tc, 1, lambda: None) == ([new[1]], False)  # scan: 1 question


@pytest.mark.parametrize("running", [4, 40])
def test_small_changes_re_plan_a_large_group_in_rounds(running: int):
    # Small changes to a group of `running` trials (new alpha_i, shares freed), one by one: a
    # re-plan once those since the last one are round_share of the running trials (each
    # re-plan visits every running trial), at every one in a group of fewer than 10.
    store, _, planner = make_planner(float(running))
    recs = file_records(store, running)
    plan(planner, lambda: recs, False)
    while planner.life.take_ready():  # handed to Tune: running
        pass
    for r in recs:
        store.move(r, Phase.RUNNING)
    per_round = max(1, math.ceil(Tunables.round_share * running))
    triggered = []
    for _ in range(2 * per_round):
        planner.replan_batched(0)
        triggered.append(planner.due)
        if planner.due:
            plan(planner, lambda: [], False)  # the re-plan starts a new round
    assert triggered == ([False] * (per_round - 1) + [True]) * 2


@pytest.mark.parametrize(("seconds", "idle", "at_once"),
                         [(2.0, False, False), (10.0, False, True), (2.0, True, True)])


def test_a_first_iteration_re_plans_at_once_only_where_it_may_earn_a_gpu(
        seconds: float, idle: bool, at_once: bool):
    # 40 trials two to a GPU on 20 GPUs (prior alpha 1.1, 10 iterations of 1 s assumed each):
    # the group's load is sum_j h_j1 / n = 400 / 20 = 20 s per GPU. A first iteration of
    # `seconds` at half a GPU measures h_i1 = 9 x seconds / 1.1: 16.4 s is below the load
    # (batched unless a GPU is idle), 81.8 s above it (it may be due a GPU: at once).
    store, est, planner = make_planner(20.0, alpha=1.1)
    recs = file_records(store, 40)
    plan(planner, lambda: recs, False)
    while planner.life.take_ready():
        pass
    for r in recs:
        store.move(r, Phase.RUNNING, actual=r.width, fresh_start=False)
    assert {r.width for r in recs} == {0.5} and planner.life.pool.idle_count() == 0
    planner.replan(0)
    plan(planner, lambda: [], False)  # the re-plan that measures the group's load
    assert not planner.due
    if idle:  # both trials of a GPU other than t0's leave
        gpu = next(g for r in recs if (g := planner.life.pool.where(r.trial_id))
                   != planner.life.pool.where("t0"))
        for r in recs[1:]:
            if planner.life.pool.where(r.trial_id) == gpu:
                planner.life.unplace(r)
        assert planner.life.pool.idle_count() == 1
    rec = recs[0]
    store.update(rec, iteration=1)
    assert est.observe(rec, seconds, 1.0)
    assert planner.specs.spec(rec).runtime == pytest.approx(9 * seconds / 1.1)
    planner.measured(rec, first=True)
    assert planner.due is at_once


T = Tunables()


def test_without_a_profile_equal_trials_use_every_gpu_and_probe_packing():
    # FluidExecutor() defaults: 8 equal trials on 4 GPUs use every GPU, never 8 packed on one
    # GPU with three idle; ``probe_pairs`` pairs of them start packed, a pair to a GPU, beside
    # trials alone (packing is measured across them).
    store, est, planner = _setup(gpus=4.0)
    assert (est.prior_alpha, est.prior_beta) == (T.prior_alpha, T.prior_beta)
    recs = _records(store, 8)
    plan(planner, lambda: recs, False)
    ready = [r for r in recs if r.phase is Phase.READY]
    pairs = 2 * T.probe_pairs
    assert sorted(r.width for r in ready) == [0.5] * pairs + [1.0] * (4 - T.probe_pairs)
    assert all(r.probe == (r.width == 0.5) for r in ready)
    used = sorted(g for r in ready for g in planner.life.pool.where(r.trial_id))
    assert used == sorted([0, 0, 1, 1, 2, 3]) and len(planner.life.queue) == 8 - len(ready)
    assert all(r.width == 1.0 for r in recs if r.phase is Phase.QUEUED)


def test_a_probe_that_gave_its_samples_is_packed_only_as_the_estimate_says():
    # A probe is packed to measure packing; once the estimate has its two iterations it is
    # an ordinary trial: with the estimate undecided and not packing a fresh trial, its c_i is
    # 1 (it leaves its share for a GPU that frees up), where a probe's is 2.
    store, est, planner = _setup(gpus=4.0)
    recs = _records(store, 8)
    plan(planner, lambda: recs, False)
    probe = next(r for r in recs if r.probe)
    assert planner.specs.spec(probe).c == 2
    store.update(probe, fresh_start=False)
    for now in (10.0, 20.0):
        assert not est.sampled(probe)
        est.observe(probe, 10.0, now=now, width=0.5, clean=True, exposure=1.0)
    assert est.sampled(probe) and not est.packing_measured
    assert planner.specs.spec(probe).c == planner.specs.fresh_c() == 1


def _wave(est, recs, times, exposures):
    """Each trial's first iteration: ``times[i]`` seconds beside ``exposures[i]`` others."""
    for rec, t, x in zip(recs, times, exposures, strict=True):
        est.observe(rec, t, now=100.0, width=1.0 / (1 + x), clean=True, exposure=x)


@pytest.mark.parametrize(("packed", "decided", "c"), [(10.4, True, 2), (14.0, True, 1),
                                                       (11.5, False, None)])
def test_packing_measured_across_a_wave_decides_once_its_interval_does(packed, decided, c):
    # Configurations differ (one-GPU times 9.6 to 10.4 s): three run alone, three packed in
    # pairs; their iterations say alpha with an interval, from one iteration each.
    store, est, planner = _setup(gpus=2.0)
    recs = _records(store, 6, fresh_start=False)
    for r in recs:
        store.update(r, actual=1.0)
    base = [9.6, 10.0, 10.4, 10.4, 9.6, 10.0]
    _wave(est, recs, [b * (packed / 10.0 if k >= 3 else 1.0) for k, b in enumerate(base)],
          [0.0] * 3 + [1.0] * 3)
    low, high = est.packing_estimate.interval()
    assert low <= packed / 10.0 * 1.05 and high >= packed / 10.0 / 1.05
    assert est.packing_measured is decided
    # undecided: probes go on, unless the estimate packs every fresh trial anyway
    assert (planner.packing.wanted() == 0) is (decided or planner.specs.fresh_c() > 1)
    if c is not None:
        assert planner.specs.fresh_c() == c
    # shrunk towards the prior by its precision: between the two, nearer the narrower
    assert packed / 10.0 * 0.95 <= est.fresh_alpha < T.prior_alpha


def test_a_measured_cheap_packing_is_used_and_a_costly_one_is_not():
    # A single packed sample is not enough against the prior (no packing on one sample).
    store1, est1, _ = _setup()
    (one,) = _records(store1, 1, raw={1.0: deque([10.0]), 0.5: deque([10.5])})
    est1.refine_overheads(one)
    assert est1.alpha_of(one) > 1.2
    store, est, planner = _setup(gpus=1.0)
    # Each ran alone at 10 s per iteration, then at half a GPU: 10.5 s (alpha 1.05), 18 s (1.8).
    cheap, costly = _records(store, 2)
    for rec, packed in ((cheap, 10.5), (costly, 18.0)):
        store.update(rec, raw={1.0: deque([10.0] * 5), 0.5: deque([packed] * 5)})
        est.refine_overheads(rec)
    assert costly.own_alpha == (pytest.approx(1.8), 5)
    # Two trials that disagree leave the experiment's alpha undecided, between their mean and
    # the prior; each trial's own is shrunk towards it, worth one sample of the five.
    assert not est.packing_measured and 1.375 < est.fresh_alpha < T.prior_alpha
    assert est.alpha_of(cheap) == pytest.approx((1.05**5 * est.fresh_alpha) ** (1 / 6))
    assert est.alpha_of(cheap) < 1.2 < est.alpha_of(costly)
    assert planner.specs.spec(cheap).c == 2 and planner.specs.spec(costly).c == 1


def test_one_gpu_time_of_a_trial_is_its_own_measured_time():
    store, est, _ = _setup()
    (rec,) = _records(store, 1, actual=1.0, fresh_start=False)
    assert est.observe(rec, 7.0, now=0.0)  # its first sample
    assert est.iteration_time(rec) == 7.0
    store.update(rec, actual=2.0)  # then a gang of two at 4.2 s per iteration: beta_i 1.2
    est.observe(rec, 4.2, now=2.0)
    assert rec.own_beta[0] == pytest.approx(1.2)
    assert est.beta_of(rec) == pytest.approx((1.2 * T.prior_beta) ** 0.5)
    assert est.iteration_time(rec) == 7.0  # still its own one-GPU time


@pytest.mark.parametrize(("alpha", "promoted_c"), [(1.01, 2), (1.1, 1)])
def test_a_promoted_trial_is_packed_only_where_packing_is_measured_free(alpha, promoted_c):
    store, est, planner = _setup(gpus=1.0, alpha=alpha)  # a profile's alpha: a measurement
    fresh, promoted = _records(store, 2)
    store.add_group(TrialGroup.of([fresh.trial], 10, "g"))
    store.add_group(TrialGroup.of([promoted.trial], 10, "g", priority=1))
    assert (fresh.priority, promoted.priority) == (0, 1)
    # below priority_alpha (1.05) packing costs the trial the algorithm waits on nothing
    assert planner.specs.spec(fresh).c == 2 and planner.specs.spec(promoted).c == promoted_c
    plan(planner, lambda: [fresh, promoted], False)
    # either way, placed first (its priority), water-filling gives it the GPU there is
    assert promoted.phase is Phase.READY and promoted.width == 1.0
