"""The time-to-target policy in FluidExecutor's parts (no Ray instance): the conservative
prior, per-trial overheads learned from a trial's own iteration times, priority, the bounded
resizes and the guard."""

from __future__ import annotations

from collections import deque

import pytest

from fluid.tune._estimator import PRIOR_ALPHA, PRIOR_BETA
from fluid.tune._group import TrialGroup
from fluid.tune._records import Phase
from fluid.tune._resizing import IDLE_GAIN, MAX_RESIZES, PROBE_D, PROBE_MIN_EPS, RESIZE_GAIN

from .planning import file_records, make_planner


def _setup(gpus=4.0, alpha=None, beta=None, eps=1.0, **options):
    return make_planner(gpus, options=options, alpha=alpha, beta=beta, eps=eps)


def _records(book, n, until=10, **kw):
    return file_records(book, n, until, elastic=True, **kw)


def test_without_a_profile_equal_trials_use_every_gpu_one_each():
    # FluidExecutor() defaults: 8 equal trials on 4 GPUs run 4 at a time, one GPU each (as plain
    # Tune), never 8 packed on one GPU with three idle.
    book, est, planner = _setup(gpus=4.0)
    assert (est.prior_alpha, est.prior_beta) == (PRIOR_ALPHA, PRIOR_BETA)
    recs = _records(book, 8)
    planner.plan(lambda: recs)
    assert all(r.width == 1.0 for r in recs)
    used = {g for r in recs if r.phase is Phase.READY for g in planner.pool.where(r.trial_id)}
    assert used == {0, 1, 2, 3} and len(planner.queue) == 4


def test_a_measured_cheap_packing_is_used_and_a_costly_one_is_not():
    # A single packed sample is not enough against the prior (no packing on one sample).
    book1, est1, _ = _setup()
    (one,) = _records(book1, 1)
    one.raw = {1.0: deque([10.0]), 0.5: deque([10.5])}
    est1.refine_overheads(one)
    assert est1.alpha_of(one) > 1.2
    book, est, planner = _setup(gpus=1.0)
    cheap, costly = _records(book, 2)
    # Each ran alone at 10 s per iteration, then at half a GPU: 10.5 s (alpha 1.05), 18 s (1.8).
    for rec, packed in ((cheap, 10.5), (costly, 18.0)):
        rec.raw = {1.0: deque([10.0] * 5), 0.5: deque([packed] * 5)}
        est.refine_overheads(rec)
    assert rec.own_alpha == (pytest.approx(1.8), 5)
    # Shrunk towards the prior 2.0, in log space, the prior worth one sample of the five.
    assert est.alpha_of(cheap) == pytest.approx((1.05**5 * 2.0) ** (1 / 6))
    assert est.alpha_of(cheap) < 1.2 < est.alpha_of(costly)
    assert planner.spec(cheap).c == 2 and planner.spec(costly).c == 1


def test_one_gpu_time_of_a_trial_is_its_own_measured_time():
    book, est, _ = _setup()
    (rec,) = _records(book, 1)
    rec.actual, rec.fresh_start = 1.0, False
    assert est.observe(rec, 7.0, now=0.0)  # its first sample
    assert est.iteration_time(rec) == 7.0
    rec.actual = 2.0  # then a gang of two at 4.2 s per iteration: beta_i = 2 * 4.2 / 7 = 1.2
    est.observe(rec, 4.2, now=2.0)
    assert rec.own_beta[0] == pytest.approx(1.2)
    assert est.beta_of(rec) == pytest.approx((1.2 * PRIOR_BETA) ** 0.5)
    assert est.iteration_time(rec) == 7.0  # still its own one-GPU time


def test_a_promoted_trial_is_never_packed_without_its_own_measurement():
    book, est, planner = _setup(gpus=1.0, alpha=1.01)  # a profile says packing is nearly free
    fresh, promoted = _records(book, 2)
    book.add_group(TrialGroup.of([fresh.trial], 10, "g"))
    book.add_group(TrialGroup.of([promoted.trial], 10, "g", priority=1))
    assert (fresh.priority, promoted.priority) == (0, 1)
    assert planner.spec(fresh).c == 2 and planner.spec(promoted).c == 1
    planner.plan(lambda: [fresh, promoted])
    assert promoted.width == 1.0 and promoted.phase is Phase.READY


def test_the_queue_starts_higher_priorities_first():
    book, est, planner = _setup(gpus=1.0)
    recs = _records(book, 3)
    planner.plan(lambda: recs)
    assert planner.ready == ["t0"] and planner.queue == ["t1", "t2"]
    recs[2].priority = 1  # t2 was promoted while it waited
    planner.release(recs[0])
    recs[0].phase = Phase.DONE
    planner.plan(lambda: [])
    assert planner.ready[-1] == "t2" and planner.queue == ["t1"]


def _running(planner, recs, widths):
    for r, w in zip(recs, widths, strict=True):
        assert planner.pool.place(r.trial_id, w) is not None
        r.width = r.actual = w
        r.phase, r.checkpoints = Phase.RUNNING, True
        r.raw = {1.0: deque([1.0, 1.0])}  # its one-GPU time is known
        r.samples = deque([(1.0, 1.0), (1.0, 1.0)])


def test_idle_gpus_go_to_the_straggler_only_when_its_gain_beats_idle_gain_eps():
    # One straggler left on 4 GPUs, beta 1.1 (profiled): 10 iterations of 1 s. A gang of two
    # gains 10 - 5.5 = 4.5 s; growing into idle GPUs moves nobody else, so it is made if that
    # beats IDLE_GAIN x eps (not RESIZE_GAIN x eps). h_i1 = 10 s is below PROBE_MIN_EPS x eps
    # in both cases: no probe either.
    # While the search algorithm may still add trials, idle GPUs may soon be theirs: then the
    # growth needs RESIZE_GAIN x eps.
    cases = ((4.4 / IDLE_GAIN, True, 2.0), (4.6 / IDLE_GAIN, True, 1.0),
             (4.4 / IDLE_GAIN, False, 1.0))
    for eps, search_done, width in cases:
        assert RESIZE_GAIN * eps > 4.5 and PROBE_MIN_EPS * eps > 10.0
        book, est, planner = _setup(gpus=4.0, beta=1.1, eps=eps)
        planner.search_done = search_done
        (rec,) = _records(book, 1)
        _running(planner, [rec], [1.0])
        planner.replan(0)
        planner.plan(lambda: [])
        assert rec.width == width, eps  # 2.0: PROBE_D, a gang of two before beta_i is known


def _unmeasured_gang(planner, rec):
    """``rec`` running on one GPU, its one-GPU time measured (1 s), its beta_i not."""
    _running(planner, [rec], [1.0])


def test_an_unmeasured_straggler_is_probed_as_a_gang_on_idle_gpus():
    # FluidExecutor() defaults (prior beta 2: a gang gains nothing) and idle GPUs: the long
    # trial is probed at PROBE_D once it has PROBE_MIN_EPS x eps of work left; not before.
    for until, probed in ((int(1.5 * PROBE_MIN_EPS), True), (int(0.75 * PROBE_MIN_EPS), False)):
        book, est, planner = _setup(gpus=4.0, eps=1.0)
        (rec,) = _records(book, 1, until=until)
        _unmeasured_gang(planner, rec)
        assert (planner.spec(rec).runtime >= PROBE_MIN_EPS * est.eps) is probed
        planner.plan(lambda: [])
        assert rec.width == (float(PROBE_D) if probed else 1.0)
        assert [e["kind"] for e in planner.plan_log] == (["probe"] if probed else [])


def test_no_probe_for_a_rigid_trial_a_users_d_of_one_a_measured_beta_or_a_kept_shape():
    cases = [({}, {"elastic": False}), ({"d": 1}, {}), ({}, {"own_beta": (2.5, 3)}),
             ({}, {"keep_shape": True})]
    for options, fields in cases:
        book, est, planner = _setup(gpus=4.0, eps=1.0, **options)
        (rec,) = _records(book, 1, until=200)
        if fields.pop("keep_shape", False):  # a PBT population: plain Tune's shapes
            book.add_group(TrialGroup.of([rec.trial], 100, "population", keep_shape=True))
        _unmeasured_gang(planner, rec)
        for k, v in fields.items():
            setattr(rec, k, v)
        planner.plan(lambda: [])
        assert rec.width == 1.0, (options, fields)


def test_the_probe_goes_to_what_the_algorithm_waits_on_then_the_longest():
    book, est, planner = _setup(gpus=3.0, eps=1.0)
    recs = _records(book, 2, until=200)
    _running(planner, recs, [1.0, 1.0])
    recs[0].until = 200  # longer, but t1 is what a rung waits on
    recs[1].priority = 1
    planner.plan(lambda: [])
    assert [r.width for r in recs] == [1.0, float(PROBE_D)]


def test_a_failed_probe_goes_back_to_one_gpu_and_is_not_probed_again():
    book, est, planner = _setup(gpus=4.0, eps=1.0)
    (rec,) = _records(book, 1, until=200)
    _unmeasured_gang(planner, rec)
    planner.plan(lambda: [])
    assert rec.width == 2.0
    rec.actual = 2.0  # restarted as a gang; its first gang iteration is slower than one GPU
    rec.budget_resizes = 1
    rec.raw[2.0] = deque([1.5])
    est.refine_overheads(rec)
    assert rec.own_beta is not None and est.beta_of(rec) > 2.0
    planner.replan(0)
    planner.plan(lambda: [])
    assert rec.width == 1.0 and len(planner.pool.where("t0")) == 1
    assert [e["kind"] for e in planner.plan_log] == ["probe", "dynamic"]
    planner.replan(0)
    planner.plan(lambda: [])
    assert rec.width == 1.0 and len(planner.plan_log) == 2


def test_resizes_per_trial_per_rung_are_bounded():
    book, est, planner = _setup(gpus=4.0, beta=1.1, eps=0.01)
    (rec,) = _records(book, 1)
    _running(planner, [rec], [1.0])
    rec.budget_resizes = MAX_RESIZES
    planner.replan(0)
    planner.plan(lambda: [])
    assert rec.width == 1.0  # no resize allowance left in this rung
    book.add_group(TrialGroup.of([rec.trial], 20, "g"))  # the next rung: a fresh allowance
    assert rec.budget_resizes == 0
    planner.replan(rec.group)
    planner.plan(lambda: [])
    assert rec.width == 2.0


def test_the_guard_refuses_a_plan_that_delays_the_leader(monkeypatch):
    import fluid.tune._resizing as resizing_module

    book, est, planner = _setup(gpus=4.0, beta=1.1, eps=0.01)
    (rec,) = _records(book, 1)
    _running(planner, [rec], [1.0])
    rec.own_beta = (1.1, 3)  # measured: not a probe (a probe is outside the model, unguarded)
    calls = []

    def refuse(*args, **kw):
        calls.append(args)
        return False

    monkeypatch.setattr(resizing_module, "is_safe", refuse)
    planner.replan(0)
    planner.plan(lambda: [])
    assert calls and rec.width == 1.0 and planner.pool.where("t0") == (0,)


def test_probes_stop_once_the_measured_trials_say_gangs_lose():
    # One trial already measured as a gang: beta_i 2.5 (a gang of two slower than one GPU)
    # stops the probes of this experiment; beta_i 1.2 (a gang of two at 0.6 of one GPU's time)
    # does not.
    for beta, probed in ((2.5, False), (1.2, True)):
        book, est, planner = _setup(gpus=4.0, eps=1.0)
        measured, rec = _records(book, 2, until=200)
        _running(planner, [rec], [1.0])
        measured.raw = {1.0: deque([1.0]), 2.0: deque([beta / 2])}
        est.refine_overheads(measured)
        assert est.measured_beta == pytest.approx(beta)
        planner.plan(lambda: [])
        assert rec.width == (float(PROBE_D) if probed else 1.0), beta
