"""The trials' lifecycle (no Ray instance): each named event moves a trial's phase, its place
in the pool, its residency, its pending resize, the ready list and the queue together."""

from __future__ import annotations

from ray.tune.experiment import Trial

from fluid.tune._records import Phase

from .planning import file_records, file_running, make_planner


def test_a_resize_is_one_pending_width_from_the_decision_to_the_restart():
    store, _, planner = make_planner(gpus=4)
    life = planner.life
    (rec,) = file_running(store, planner, [1.0])
    life.resize_asked(rec, 2.0)
    assert life.pending == {"t0": 2.0} and (rec.width, rec.actual) == (2.0, 1.0)
    life.resize_asked(rec, 1.0)  # the plan went back to the width it runs at: nothing to do
    assert life.pending == {}
    life.resize_asked(rec, 2.0)
    life.resize_started(rec, now=5.0)
    assert rec.phase is Phase.RESIZING and life.pending == {} and life.ready == ["t0"]
    assert (rec.resizes, rec.budget_resizes, rec.resize_at) == (1, 1, 5.0)
    assert life.take_ready() is None  # Tune is still saving it (RUNNING)
    rec.trial.status = Trial.PAUSED
    assert life.take_ready() is rec and life.ready == []
    life.released(rec)
    assert rec.phase is Phase.RESIZING and rec.actual == 2.0  # restarted: not reported yet
    life.reported(rec, checkpointed=True)
    assert rec.phase is Phase.RUNNING and not rec.fresh_start


def test_a_trial_tune_retries_leaves_the_plan_and_is_held_again():
    store, _, planner = make_planner(gpus=4)
    life = planner.life
    (rec,) = file_running(store, planner, [1.0], iteration=3)
    life.resize_asked(rec, 2.0)
    store.move(rec, Phase.DONE)  # it failed
    life.admitted(rec, iteration=3, again=True)
    assert rec.phase is Phase.HELD and rec.base_status == Trial.PENDING and rec.fresh_start
    assert life.pending == {} and life.pool.where("t0") == () and rec.width is None


def test_placed_trials_whose_cpus_do_not_fit_wait_first_in_the_queue():
    store, _, planner = make_planner(gpus=4)
    life = planner.life
    recs = file_records(store, 3)
    for rec in recs:
        life.sized(rec, 1.0)
        assert life.pool.place(rec.trial_id, 1.0) is not None
    life.placed(["t0", "t1", "t2"])
    assert [r.phase for r in recs] == [Phase.READY] * 3
    life.unready(recs[2])
    assert recs[2].phase is Phase.QUEUED and life.queue == ["t2"] and life.ready == ["t0", "t1"]
    assert life.pool.where("t2") == () and life.pool.idle_count() == 2


def test_the_queue_keeps_higher_priorities_first():
    store, _, planner = make_planner(gpus=1)
    life = planner.life
    low, high = file_records(store, 2)
    store.update(high, priority=1)
    life.queued(["t0"])
    life.queued(["t1"])  # a higher priority after a lower one: sorted at the next plan
    life.sort_queue()
    assert life.queue == ["t1", "t0"]
    life.started(["t1"])
    assert life.queue == ["t0"]


def test_the_highest_queued_priority_follows_the_queue_unsorted_and_reprioritized():
    store, _, planner = make_planner(gpus=1)
    life = planner.life
    recs = file_records(store, 4)
    assert life.queue_priority is None
    life.queued(["t0", "t1"])
    assert life.queue_priority == 0
    store.update(recs[2], priority=2)
    life.queued(["t2"])  # after lower ones, not sorted yet
    assert life.queue_priority == 2
    life.sort_queue()
    store.update(recs[0], priority=3)  # a queued trial promoted since the sort
    assert life.queue_priority == 3
    life.sort_queue()
    store.update(recs[0], priority=0)
    life.started(["t2"])
    assert life.queue_priority == 0 and life.queue == ["t0", "t1"]


def test_a_trial_paused_or_departed_frees_its_gpu_and_says_when():
    store, _, planner = make_planner(gpus=2, now=7.0)
    life = planner.life
    paused, done = file_running(store, planner, [1.0, 1.0])
    life.paused(paused)
    assert paused.phase is Phase.PAUSED and paused.base_status == Trial.PAUSED
    life.departed(done)
    assert done.phase is Phase.DONE and done.shapes[-1] == (7.0, None, ())
    assert life.pool.idle_count() == 2


def test_lost_gpus_leave_the_pool_only_as_they_fall_idle():
    store, _, planner = make_planner(gpus=4)
    life = planner.life
    file_running(store, planner, [1.0, 1.0, 1.0])  # GPUs 0-2 busy
    life.cluster_changed(1)  # three GPUs gone; one of them idle now: it leaves
    assert life.pool.n == 3 and life.deficit == 2
    life.cluster_changed(3)  # two came back: the deficit is paid, nothing added
    assert life.pool.n == 3 and life.deficit == 0
