"""The time-to-target policy as FluidExecutor's parts apply it (no Ray instance): the
conservative prior, per-trial overheads learned from a trial's own iteration times, priority
in specs and in the queue, and the planner carrying out ``fluid.core.policy``'s decisions (a
pending resize per trial, the plan log). The rules themselves: tests/core/test_policy.py."""

from __future__ import annotations

from collections import deque

import pytest

from fluid.core import Tunables
from fluid.tune._group import TrialGroup
from fluid.tune._records import Phase

from .planning import file_records, file_running, make_planner

T = Tunables()


def _setup(gpus=4.0, alpha=None, beta=None, eps=1.0, **options):
    return make_planner(gpus, options=options, alpha=alpha, beta=beta, eps=eps)


def _records(store, n, until=10, **kw):
    return file_records(store, n, until, elastic=True, **kw)


def test_without_a_profile_equal_trials_use_every_gpu_and_probe_packing():
    # FluidExecutor() defaults: 8 equal trials on 4 GPUs use every GPU, one trial each, never
    # 8 packed on one GPU with three idle; ``probe_pairs`` of them start alone on a half GPU,
    # hosts of a packing probe (measured alone first, beside a mate later).
    store, est, planner = _setup(gpus=4.0)
    assert (est.prior_alpha, est.prior_beta) == (T.prior_alpha, T.prior_beta)
    recs = _records(store, 8)
    planner.plan(lambda: recs, False)
    ready = [r for r in recs if r.phase is Phase.READY]
    assert sorted(r.width for r in ready) == [0.5] * T.probe_pairs + [1.0] * (4 - T.probe_pairs)
    assert all(r.probe == (r.width == 0.5) for r in ready)
    used = [g for r in ready for g in planner.life.pool.where(r.trial_id)]
    assert sorted(used) == [0, 1, 2, 3] and len(planner.life.queue) == 4
    assert all(r.width == 1.0 for r in recs if r.phase is Phase.QUEUED)


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
    # Two trials measured (``probe_pairs``): their median 1.425 is what an unmeasured trial
    # gets, and each one's own is shrunk towards it in log space, worth one sample of the five.
    assert est.packing_measured and est.fresh_alpha == pytest.approx(1.425)
    assert est.alpha_of(cheap) == pytest.approx((1.05**5 * 1.425) ** (1 / 6))
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
    planner.plan(lambda: [fresh, promoted], False)
    # either way, placed first (its priority), water-filling gives it the GPU there is
    assert promoted.phase is Phase.READY and promoted.width == 1.0


def test_the_queue_starts_higher_priorities_first():
    store, est, planner = _setup(gpus=1.0)
    recs = _records(store, 3)
    planner.plan(lambda: recs, False)
    assert planner.life.ready == ["t0"] and planner.life.queue == ["t1", "t2"]
    store.update(recs[2], priority=1)  # t2 was promoted while it waited
    planner.life.unplace(recs[0])
    store.move(recs[0], Phase.DONE)
    planner.plan(lambda: [], False)
    assert planner.life.ready[-1] == "t2" and planner.life.queue == ["t1"]


def test_a_resize_is_a_pending_decision_until_the_trial_restarts():
    store, est, planner = _setup(gpus=4.0, beta=1.1, eps=0.01)
    (rec,) = file_running(store, planner, [1.0])
    planner.replan(0)
    planner.plan(lambda: [], True)
    assert rec.width == 2.0 and rec.actual == 1.0 and planner.life.pending.get("t0") == 2.0
    assert [e["kind"] for e in planner.plan_log] == ["dynamic"]
    planner.life.resize_started(rec, now=5.0)
    assert rec.phase is Phase.RESIZING and planner.life.pending.get("t0") is None
    assert (rec.resizes, rec.budget_resizes, planner.life.ready) == (1, 1, ["t0"])


def test_gpus_freed_while_a_trial_restarts_are_planned_once_it_runs_again():
    # A re-plan while a trial restarts cannot resize it; once its first result is in, the
    # GPUs that came free meanwhile are planned, not left idle until some later event.
    store, est, planner = _setup(gpus=4.0, beta=1.0, eps=0.01)
    restarting, other = file_running(store, planner, [1.0, 2.0], until=100)
    store.move(restarting, Phase.RESIZING)
    planner.life.unplace(other)
    store.move(other, Phase.DONE)
    planner.departed(other)
    planner.plan(lambda: [], True)
    assert planner.life.pending.get("t0") is None and planner.life.pool.idle_count() == 3
    store.move(restarting, Phase.RUNNING)
    planner.restarted(restarting)
    assert planner.due
    planner.plan(lambda: [], True)
    assert planner.life.pending.get("t0") >= 2.0


def test_an_unmeasured_straggler_is_probed_then_undone_once_it_shows_gangs_lose():
    store, est, planner = _setup(gpus=4.0, eps=1.0)
    (rec,) = file_running(store, planner, [1.0], until=200)
    planner.plan(lambda: [], False)
    assert rec.width == float(T.probe_d) and planner.life.pending.get("t0") == 2.0
    # restarted as a gang; its first gang iteration is slower than one GPU
    store.update(rec, actual=2.0, budget_resizes=1, raw={**rec.raw, 2.0: deque([1.5])})
    est.refine_overheads(rec)
    assert rec.own_beta is not None and est.beta_of(rec) > 2.0
    planner.replan(0)
    planner.plan(lambda: [], False)
    assert rec.width == 1.0 and len(planner.life.pool.where("t0")) == 1
    assert [e["kind"] for e in planner.plan_log] == ["probe", "dynamic"]
    planner.replan(0)
    planner.plan(lambda: [], False)
    assert rec.width == 1.0 and len(planner.plan_log) == 2


def test_no_probe_when_the_gang_would_need_cpus_the_cluster_lacks():
    for cpus, probed in ((3.0, True), (2.0, False)):  # a gang of two: 1 + 2 x 1 CPUs
        store, est, planner = make_planner(4.0, cpus, alpha=None, beta=None, eps=1.0,
                                           cpus_per_trial=1.0, cpus_per_worker=1.0)
        (rec,) = file_running(store, planner, [1.0], until=200)
        planner.plan(lambda: [], False)
        assert (rec.width == 2.0) is probed, cpus
