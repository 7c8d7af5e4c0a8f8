"""FluidExecutor's parts on their own (no Ray instance): options, the trial store, the base
view, the planner."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler

from fluid.core import Tunables
from fluid.tune._base_view import base_view
from fluid.tune._options import FluidConfigError, FluidOptions
from fluid.tune._records import TRANSITIONS, Phase, PhaseError, TrialRecord, TrialStore

from .planning import fake_trial as _trial
from .planning import file_records, make_planner


@pytest.mark.parametrize("bad, says", [
    ({"beta": 0.9}, "beta must be >= 1, got 0.9"),
    ({"trial_memory": 0}, "trial_memory must be > 0 GB, got 0"),
    ({"cpus_per_worker": -1}, "cpus_per_worker must be >= 0, got -1"),
    ({"default_iteration_time": 0}, "default_iteration_time must be > 0 seconds, got 0"),
    ({"mps": object()}, "mps must be a fluid.gpu.MPSManager"),
])
def test_options_name_the_parameter_and_range(bad, says):
    with pytest.raises(FluidConfigError, match=says):
        FluidOptions(**bad)


def test_options_build_the_policy_and_map_onto_the_tunables():
    opts = FluidOptions(c=3, d=2, gpu_memory=16.0)
    assert (opts.policy.c, opts.policy.d, opts.policy.gpu_memory) == (3, 2, 16.0)
    assert (opts.policy.o_th, opts.policy.c_max) == (Tunables.o_th, Tunables.c_max)
    mine = Tunables(c_max=4, resize_gain=6.0)
    opts = FluidOptions(o_th=0.2, tunables=mine)
    assert (opts.tunables.o_th, opts.tunables.c_max, opts.tunables.resize_gain) == (0.2, 4, 6.0)
    assert (opts.policy.o_th, opts.policy.c_max) == (0.2, 4)
    with pytest.raises(FluidConfigError, match="tunables must be a fluid.core.Tunables"):
        FluidOptions(tunables={"resize_gain": 6.0})  # type: ignore[arg-type]


def test_the_store_moves_a_record_only_to_a_phase_that_may_follow_its_own():
    store = TrialStore()
    rec = TrialRecord(_trial("t"), 0, 5)
    store.add(rec)
    with pytest.raises(PhaseError, match="t: RUNNING may not follow HELD"):
        store.move(rec, Phase.RUNNING)  # a held trial runs only once planned and ready
    assert rec.phase is Phase.HELD and store.in_phase(frozenset({Phase.HELD})) == [rec]
    for phase in (Phase.QUEUED, Phase.READY, Phase.RUNNING, Phase.RESIZING, Phase.RUNNING,
                  Phase.PAUSED, Phase.QUEUED, Phase.DONE):
        store.move(rec, phase)
    with pytest.raises(PhaseError, match="RUNNING may not follow DONE"):
        store.move(rec, Phase.RUNNING)
    store.move(rec, Phase.HELD)  # Tune retries it: held again
    with pytest.raises(ValueError, match="TrialStore.move"):
        store.update(rec, phase=Phase.QUEUED)
    with pytest.raises(AttributeError):
        rec.width = 1.0  # records are written by their store only
    assert all(Phase.HELD not in TRANSITIONS[p] for p in Phase if p is not Phase.DONE)


def test_the_store_notes_what_changed_for_the_planner():
    store = TrialStore()
    a, b = TrialRecord(_trial("a"), 0, 5), TrialRecord(_trial("b"), 0, 5, priority=1)
    store.update(a, width=1.0)  # not filed yet: nothing to note
    store.add(a)
    store.add(b)
    assert store.take_changed() == ({"a", "b"}, False)  # filing is a change, not a promotion
    assert store.take_changed() == (set(), False)
    store.update(b, priority=2)
    store.move(a, Phase.QUEUED)
    assert store.take_changed() == ({"a", "b"}, True)
    assert store.add_sample(a, 3.0, 0.5, kept=2) and not store.add_sample(a, 2.0, 0.5, kept=2)
    store.add_sample(a, 1.0, 0.5, kept=2)
    assert list(a.samples) == [(2.0, 0.5), (1.0, 0.5)] and list(a.raw[0.5]) == [2.0, 1.0]
    assert store.take_changed() == ({"a"}, False)


def test_base_view_shows_what_the_base_expects_then_restores():
    store = TrialStore()
    held = TrialRecord(_trial("held"), 0, 5)  # Tune: PAUSED, base: PENDING
    resizing = TrialRecord(_trial("resizing"), 0, 5, phase=Phase.RESIZING, base_status="RUNNING")
    running = TrialRecord(_trial("running", Trial.RUNNING), 0, 5, phase=Phase.RUNNING)
    for rec in (held, resizing, running):
        store.add(rec)
    with base_view(store, {"running": Trial.PENDING}):
        assert [r.trial.status for r in (held, resizing, running)] == [
            Trial.PENDING, Trial.RUNNING, Trial.PENDING]
        resizing.trial.status = Trial.TERMINATED  # the base stopped it meanwhile
    assert [r.trial.status for r in (held, resizing, running)] == [
        Trial.PAUSED, Trial.TERMINATED, Trial.RUNNING]


def test_in_phase_follows_every_phase_change_in_the_order_trials_were_added():
    # TrialStore indexes records by phase; a scan of every record is the reference.
    rng = random.Random(0)
    store = TrialStore()
    phases = list(Phase)
    recs = [TrialRecord(_trial(f"t{i}"), 0, 5, phase=rng.choice(phases)) for i in range(40)]
    for step in range(2000):
        rec = rng.choice(recs)
        if rec.trial_id not in store.records or step % 97 == 0:  # new, or a replacing record
            rec = TrialRecord(rec.trial, 0, 5, phase=rng.choice(phases))
            recs[int(rec.trial_id[1:])] = rec
            store.add(rec)
        else:
            store.move(rec, rng.choice(sorted(TRANSITIONS[rec.phase] | {rec.phase}, key=str)))
        wanted = frozenset(rng.sample(phases, rng.randint(1, 4)))
        expected = [r for r in store.records.values() if r.phase in wanted]
        assert [id(r) for r in store.in_phase(wanted)] == [id(r) for r in expected]


def test_planner_sizes_a_group_and_hands_out_ready_trials_in_order():
    store, _, planner = make_planner(2.0, options={"c": 1, "d": 1}, now=7.0)
    recs = file_records(store, 3)
    planner.plan(lambda: recs, False)
    assert [r.width for r in recs] == [1.0, 1.0, 1.0]  # c = d = 1: one GPU each
    assert planner.life.ready == ["t0", "t1"] and planner.life.queue == ["t2"]
    assert [r.phase for r in recs] == [Phase.READY, Phase.READY, Phase.QUEUED]
    assert planner.plan_log[0]["kind"] == "static" and planner.plan_log[0]["time"] == 7.0
    assert planner.life.take_ready() is recs[0]
    planner.life.unplace(recs[0])  # t0 left: its GPU goes to the queued trial at the next plan
    planner.plan(lambda: [], False)
    assert planner.life.queue == [] and recs[2].phase is Phase.READY


def test_planner_starts_only_what_the_cpus_hold_and_spreads_it():
    store, _, planner = make_planner(4.0, 4.0, options={"c": 8})
    recs = file_records(store, 8, cpus=1.0)
    planner.plan(lambda: [r for r in recs if r.phase is Phase.HELD], False)
    assert planner.life.ready == ["t0", "t1", "t2", "t3"]  # 4 CPUs: 4 one-CPU trials
    assert [r.phase for r in recs[4:]] == [Phase.HELD] * 4  # not sized yet
    assert sorted(g for r in recs[:4] for g in planner.life.pool.where(r.trial_id)) == [0, 1, 2, 3]
    planner.life.unplace(recs[0])
    store.move(recs[0], Phase.DONE)
    planner.plan(lambda: [r for r in recs if r.phase is Phase.HELD], False)
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
    planner.plan(lambda: [rec, free], False)
    assert rec.width == 2.0 and planner.cpus.shape(rec, rec.width) is asked
    assert planner.cpus.needed(rec) == 2.0 and planner.cpus.needed(free, 0.5) == 0.5
    # A restored trial's placement group is Fluid's shape; the saved state keeps the request.
    restored = TrialRecord(_trial("two"), 0, 10)
    apply_saved(store, restored, {"asked": 2.0, "w_min": 2.0, "request": asked.bundles})
    assert restored.w_min == 2.0 and restored.request.bundles == asked.bundles


def test_only_a_trial_paused_at_its_budgets_end_with_nothing_left_is_stranded():
    from fluid.tune._admission import stranded

    def book_of(*recs):
        store = TrialStore()
        for rec in recs:
            store.add(rec)
        return store

    def paused(tid, iteration, until=8, status=Trial.PAUSED):
        return TrialRecord(_trial(tid, status), 0, until, phase=Phase.PAUSED,
                           base_status="PAUSED", iteration=iteration)

    done = SimpleNamespace(_search_alg=SimpleNamespace(is_finished=lambda: True))
    more = SimpleNamespace(_search_alg=SimpleNamespace(is_finished=lambda: False))
    end, rung = paused("end", 8), paused("rung", 4)
    assert stranded(book_of(end, rung), done) == [end]  # mid-budget pauses are the base's
    assert stranded(book_of(paused("end", 8)), more) == []  # new trials may still come
    assert stranded(book_of(paused("end", 8)), SimpleNamespace()) == []  # no search algorithm
    running = TrialRecord(_trial("r", Trial.RUNNING), 0, 8, phase=Phase.RUNNING)
    assert stranded(book_of(paused("end", 8), running), done) == []  # something still runs
    held = TrialRecord(_trial("h"), 0, 8)  # held: may still start
    assert stranded(book_of(paused("end", 8), held), done) == []
    saving = paused("s", 8, status=Trial.RUNNING)  # the base's pause is still saving
    assert stranded(book_of(paused("end", 8), saving), done) == []


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
    planner.plan(lambda: [plain, asked, stiff], False)
    assert (plain.width, asked.width, stiff.width) == (1.0, 2.0, 1.0)
    while planner.life.take_ready():  # handed to Tune: running and measured
        pass
    for r in (plain, asked):
        store.move(r, Phase.RUNNING, actual=r.width, checkpoints=True)
        store.add_sample(r, 1.0, r.width, kept=5)
    planner.replan(0)
    planner.plan(lambda: [], False)
    assert (plain.width, asked.width) == (1.0, 2.0) and not planner.plan_log[1:]


class _LeastFirst(FIFOScheduler):
    """Chooses, like PBT, the PENDING or PAUSED trial that comes first in ``order``."""

    def __init__(self, order):
        super().__init__()
        self.order = order

    def choose_trial_to_run(self, tc):
        waiting = [t for t in tc.trials if t.status in (Trial.PENDING, Trial.PAUSED)]
        return min(waiting, key=lambda t: self.order.index(t.trial_id), default=None)


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


def test_state_writes_are_throttled_by_their_own_cost_and_forced_ones_always_happen(
        tmp_path, monkeypatch):
    # Writes of a large state (it grows with every trial) take at most 1 / save_share of the
    # wall clock; a forced write (the last trial out) is never skipped.
    import json

    from fluid.tune import _state_file as state_file

    now = [0.0]
    store = state_file.StateFile(lambda: now[0], Tunables())
    store.directory = str(tmp_path)
    ticks = iter([0.0, 0.05] + [10.0, 10.0] * 10)  # the first write takes 50 ms
    monkeypatch.setattr(state_file.time, "perf_counter", lambda: next(ticks))
    writes = []

    def state() -> dict:
        writes.append(now[0])
        return {"n": len(writes)}

    store.save(state)
    for now[0] in (2.0, 10.0, 49.9):  # past save_every_s, but not 1000 x 50 ms
        store.save(state)
    assert writes == [0.0]
    now[0] = 50.0
    store.save(state)
    store.save(state, force=True)
    assert writes == [0.0, 50.0, 50.0]
    assert json.loads((tmp_path / state_file.STATE_FILE).read_text()) == {"n": 3}


def test_the_trainable_class_is_looked_up_once_per_trainable(monkeypatch):
    from fluid.tune import _admission as admission

    looked: list[str] = []

    def kind(trial):
        looked.append(trial.trainable_name)
        return admission.TrainableKind(trial.trainable_name == "gang", False)

    monkeypatch.setattr(admission, "trainable_kind", kind)
    kinds = admission.TrainableKinds()
    trials = [SimpleNamespace(trainable_name=n) for n in ("gang", "plain", "gang", "plain")]
    assert [kinds.of(t).elastic for t in trials] == [True, False, True, False]
    assert looked == ["gang", "plain"]


@pytest.mark.parametrize("running", [4, 40])
def test_small_changes_re_plan_a_large_group_in_rounds(running: int):
    # Small changes to a group of `running` trials (new alpha_i, shares freed), one by one: a
    # re-plan once those since the last one are round_share of the running trials (each
    # re-plan visits every running trial), at every one in a group of fewer than 10.
    store, _, planner = make_planner(float(running))
    recs = file_records(store, running)
    planner.plan(lambda: recs, False)
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
            planner.plan(lambda: [], False)  # the re-plan starts a new round
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
    planner.plan(lambda: recs, False)
    while planner.life.take_ready():
        pass
    for r in recs:
        store.move(r, Phase.RUNNING, actual=r.width, fresh_start=False)
    assert {r.width for r in recs} == {0.5} and planner.life.pool.idle_count() == 0
    planner.replan(0)
    planner.plan(lambda: [], False)  # the re-plan that measures the group's load
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
