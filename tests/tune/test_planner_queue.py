"""The planner on its own (no Ray instance), continued: the queue's priorities, pending
resizes, probes of packing and gangs and when they end, a plan as decisions applied later,
a searcher's in-flight bound, and trials without GPU. Sizing and the policy as the planner
applies it: tests/tune/test_planner.py."""

from __future__ import annotations

from collections import deque

import pytest
from ray.tune.experiment import Trial

from fluid.core import Tunables
from fluid.tune._records import Phase, TrialRecord

from .planning import elastic_planner as _setup
from .planning import elastic_records as _records
from .planning import fake_trial as _trial
from .planning import file_records, file_running, make_planner, plan

T = Tunables()


def test_the_queue_starts_higher_priorities_first():
    store, est, planner = _setup(gpus=1.0)
    recs = _records(store, 3)
    plan(planner, lambda: recs, False)
    assert planner.life.ready == ["t0"] and planner.life.queue == ["t1", "t2"]
    store.update(recs[2], priority=1)  # t2 was promoted while it waited
    planner.life.unplace(recs[0])
    store.move(recs[0], Phase.DONE)
    plan(planner, lambda: [], False)
    assert planner.life.ready[-1] == "t2" and planner.life.queue == ["t1"]


def test_a_resize_is_a_pending_decision_until_the_trial_restarts():
    store, est, planner = _setup(gpus=4.0, beta=1.1, eps=0.01)
    (rec,) = file_running(store, planner, [1.0])
    planner.replan(0)
    plan(planner, lambda: [], True)
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
    plan(planner, lambda: [], True)
    assert planner.life.pending.get("t0") is None and planner.life.pool.idle_count() == 3
    store.move(restarting, Phase.RUNNING)
    planner.restarted(restarting)
    assert planner.due
    plan(planner, lambda: [], True)
    assert planner.life.pending.get("t0") >= 2.0


def test_an_unmeasured_straggler_is_probed_then_undone_once_it_shows_gangs_lose():
    store, est, planner = _setup(gpus=4.0, eps=1.0)
    (rec,) = file_running(store, planner, [1.0], until=200)
    plan(planner, lambda: [], False)
    assert rec.width == float(T.probe_d) and planner.life.pending.get("t0") == 2.0
    # restarted as a gang; its first gang iteration is slower than one GPU
    store.update(rec, actual=2.0, budget_resizes=1, raw={**rec.raw, 2.0: deque([1.5])})
    est.refine_overheads(rec)
    assert rec.own_beta is not None and est.beta_of(rec) > 2.0
    planner.replan(0)
    plan(planner, lambda: [], False)
    assert rec.width == 1.0 and len(planner.life.pool.where("t0")) == 1
    assert [e["kind"] for e in planner.plan_log] == ["probe", "dynamic"]
    planner.replan(0)
    plan(planner, lambda: [], False)
    assert rec.width == 1.0 and len(planner.plan_log) == 2


def test_no_probe_when_the_gang_would_need_cpus_the_cluster_lacks():
    for cpus, probed in ((3.0, True), (2.0, False)):  # a gang of two: 1 + 2 x 1 CPUs
        store, est, planner = make_planner(4.0, cpus, alpha=None, beta=None, eps=1.0,
                                           cpus_per_trial=1.0, cpus_per_worker=1.0)
        (rec,) = file_running(store, planner, [1.0], until=200)
        plan(planner, lambda: [], False)
        assert (rec.width == 2.0) is probed, cpus


def test_queue_follows_a_priority_change_of_a_queued_trial():
    # The queue is sorted by priority only when it may be out of order (it grew, or a queued
    # trial changed): a promotion while queued must still start that trial first.
    store, _, planner = make_planner(2.0, options={"c": 1, "d": 1}, default_iteration_time=2.0)
    recs = file_records(store, 5, status=Trial.RUNNING)
    plan(planner, lambda: recs, False)
    assert planner.life.ready == ["t0", "t1"] and planner.life.queue == ["t2", "t3", "t4"]
    plan(planner, lambda: [], False)  # sorted: nothing changes the order
    assert planner.life.queue == ["t2", "t3", "t4"]
    store.update(recs[4], priority=1)  # promoted while queued
    planner.life.unplace(recs[0])
    plan(planner, lambda: [], False)
    assert planner.life.ready[-1] == "t4" and planner.life.queue == ["t2", "t3"]


def test_a_plan_is_decisions_that_change_nothing_until_applied():
    store, _, planner = make_planner(gpus=2, alpha=2.0)  # packing costs: a GPU each
    life = planner.life
    recs = file_records(store, 3)
    before = ([(r.phase, r.width) for r in recs], life.pool.placement(), list(life.queue),
              list(life.ready))
    decisions = list(planner.plan(lambda: recs, False))
    assert ([(r.phase, r.width) for r in recs], life.pool.placement(), list(life.queue),
            list(life.ready)) == before
    static = next(d for d in decisions if d.widths)
    assert static.widths == {"t0": 1.0, "t1": 1.0, "t2": 1.0}
    assert (static.placed, static.queued) == (("t0", "t1"), ("t2",))
    for decision in decisions:
        life.apply(decision)
    assert life.ready == ["t0", "t1"] and life.queue == ["t2"]
    assert [r.phase for r in recs] == [Phase.READY, Phase.READY, Phase.QUEUED]


@pytest.mark.parametrize(("gpus", "fields", "bound", "why"), [
    # CPU trials: as many as the CPUs run at once (plain Tune's), on a cluster with GPUs too.
    (0.0, {"no_gpu": True, "cpus": 1.0}, 2, "on the CPUs"),
    (4.0, {"no_gpu": True, "cpus": 0.5}, 16, "on the CPUs"),
    # One GPU each on 4 GPUs, packing unmeasured (c = 1): the GPUs run 4, so does plain Tune;
    # and the packing probes, pairs beside them, until packing is measured.
    (4.0, {"asked": 1.0, "cpus": 0.5}, 4 + 2 * Tunables().probe_pairs, "and 4 packing probes"),
    # Half a GPU each: plain Tune runs 8 at once, more than Fluid's own bound would allow.
    (4.0, {"asked": 0.5, "w_min": 0.5, "cpus": 0.25}, 8, "under plain Tune"),
])
def test_a_searchers_bound_is_never_below_what_plain_tune_runs_at_once(gpus, fields, bound,
                                                                       why):
    _, _, planner = make_planner(gpus, 2.0 if gpus == 0 else 8.0, alpha=None)
    store = planner.life.store
    file_records(store, 1, **fields)
    got, reason = planner.in_flight_bound(None)
    assert got == bound and why in reason, (got, reason)
    assert planner.in_flight_bound(3) == (3, "max_outstanding")


def test_trials_without_gpu_start_when_the_base_would_cpus_free_or_not():
    # 2 CPUs, 4 one-CPU trials the base would start: Tune holds what Ray cannot run yet as
    # PENDING (plain Tune's staging, which actor reuse needs); a GPU trial waits for CPUs
    # (and while one does, trials without GPU start only as CPUs fit:
    # tests/tune/test_requests.py).
    store, _, planner = make_planner(4.0, 2.0)
    cpu = file_records(store, 4, no_gpu=True, cpus=1.0, w_min=0.0)
    plan(planner, lambda: [r for r in cpu if r.phase is Phase.HELD])
    assert planner.life.ready == ["t0", "t1", "t2", "t3"]
    assert planner.cpus.free() == -2.0
    gpu = TrialRecord(_trial("g"), 0, 10, cpus=1.0)
    store.add(gpu)
    plan(planner, lambda: [gpu])
    assert gpu.phase is Phase.HELD
