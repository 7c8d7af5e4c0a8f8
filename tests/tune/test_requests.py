"""Requests mean what they say: a trial that asks for no GPU gets none, a share asked for is
the share planned, GPUs held outside the experiment are left out of the plan, and the worker
groups dead Ray Train controllers left are removed (the tests named ``ray4`` start Ray)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import ray
from ray.tune import PlacementGroupFactory
from ray.tune.experiment import Trial
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group

from fluid.core import PolicyConfig, TrialFacts, Tunables, trial_limits
from fluid.shapes.bundles import ElasticTrainable
from fluid.tune import _ray_compat as compat
from fluid.tune._actions import ShapeColumn
from fluid.tune._admission import TrainableKind, new_record
from fluid.tune._records import Phase, TrialRecord, TrialStore
from fluid.tune._resources import OutsideGpus
from tests.tune.planning import fake_trial, file_records, make_planner, plan


def _trial(bundles: list[dict]) -> SimpleNamespace:
    return SimpleNamespace(trial_id="a", trainable_name="a", status="PAUSED",
                           stopping_criterion={}, last_result={},
                           placement_group_factory=PlacementGroupFactory(bundles),
                           get_trainable_cls=lambda: ElasticTrainable)


@pytest.mark.parametrize(("bundles", "elastic", "resize", "expected"), [
    ([{"CPU": 1}], False, None, (True, 0.0, True)),  # a CPU trial: its own request
    ([{"CPU": 1}], True, None, (False, None, False)),  # Fluid-aware: sized freely
    ([{"CPU": 0.5, "GPU": 0.5}], False, None, (False, 0.5, True)),  # a share: kept
    ([{"CPU": 0.5, "GPU": 0.5}], False, False, (False, 0.5, True)),
    ([{"CPU": 0.5, "GPU": 0.5}], False, True, (False, None, False)),  # sized by Fluid
    ([{"CPU": 1, "GPU": 1}], False, None, (False, None, False)),  # one GPU: sized
])
def test_a_request_is_kept_unless_fluid_may_size_it(bundles, elastic, resize, expected):
    rec = new_record(TrialStore(), _trial(bundles), TrainableKind(elastic, True), None, resize)
    assert (rec.no_gpu, rec.w_min, rec.request is not None) == expected


@pytest.mark.parametrize("facts", [
    TrialFacts(2.0, 2.0, w_min=0.5, own_request=True, asked=0.5),  # unmeasured
    TrialFacts(2.0, 2.0, w_min=0.5, own_request=True, asked=0.5, priority=3),  # a leader
    TrialFacts(1.0, 1.0, w_min=0.5, own_request=True, asked=0.5, alpha_measured=True),
    TrialFacts(2.0, 2.0, w_min=0.5, own_request=True, asked=0.5, keeps_shape=True),  # PBT
])
def test_a_share_asked_for_is_planned_as_asked(facts):
    assert trial_limits(facts, PolicyConfig(), Tunables(), 4) == (2, 1, 0.5)


def test_trials_without_gpu_start_beside_a_full_gpu_plan_as_cpus_allow():
    store, _, planner = make_planner(2.0, cpus=5.0, alpha=None)
    gpu = file_records(store, 2, elastic=True)
    cpu = [TrialRecord(fake_trial(f"c{i}"), 0, 10, no_gpu=True, w_min=0.0,
                       request=PlacementGroupFactory([{"CPU": 1}])) for i in range(6)]
    for rec in cpu:
        store.add(rec)
    plan(planner, lambda: gpu + cpu)
    ready = [store[i] for i in planner.life.ready]
    assert sorted(r.width for r in ready if r.no_gpu) == [0.0, 0.0, 0.0]  # 5 CPUs - 2 (GPU)
    assert all(r.width >= 1 for r in ready if not r.no_gpu) and len(ready) == 5
    assert set(planner.life.pool.trials()) == {r.trial_id for r in gpu}  # no GPU slot for them
    assert all(cpu[i].phase is Phase.HELD for i in range(3, 6))  # they wait for CPUs


def test_gpus_held_outside_count_only_once_they_stay_so():
    now, busy = [0.0], [3.0]
    outside = OutsideGpus(lambda: now[0], refresh_s=1.0, settle_s=5.0)
    view = SimpleNamespace(busy_gpus=lambda: busy[0])
    store = TrialStore()
    rec = file_records(store, 1)[0]
    for phase in (Phase.QUEUED, Phase.READY, Phase.RUNNING):  # handed to Tune: 1 GPU
        store.move(rec, phase, width=1.0)
    readings = []
    for t in range(12):
        now[0] = float(t)
        busy[0] = 1.0 if t == 8 else 3.0  # one read where they were free again
        readings.append(outside.read(view, store))
    # 3 busy, 1 claimed by the plan: 2 outside, counted after 5 s; the dip at 8 s resets it
    assert readings == [0, 0, 0, 0, 0, 2, 2, 2, 0, 0, 0, 0]
    assert outside.seen  # the last read found them: trials start only into Ray's free GPUs
    assert OutsideGpus(lambda: 0.0, 1.0, 5.0).read(SimpleNamespace(), store) == 0


def test_what_ray_holds_is_not_read_while_the_trials_claim_every_gpu():
    now, reads = [0.0], []
    outside = OutsideGpus(lambda: now[0], refresh_s=1.0, settle_s=0.0)
    view = SimpleNamespace(gpus=lambda: 2.0, busy_gpus=lambda: reads.append(now[0]) or 2.0)
    store = TrialStore()
    recs = file_records(store, 2)
    for rec in recs:  # handed to Tune, 1 GPU each: every GPU of the cluster claimed
        for phase in (Phase.QUEUED, Phase.READY, Phase.RUNNING):
            store.move(rec, phase, width=1.0)
    assert outside.read(view, store) == 0 and reads == []
    store.move(recs[0], Phase.DONE)  # one GPU unclaimed: what Ray holds is read
    now[0] = 1.0
    assert outside.read(view, store) == 1 and reads == [1.0]


def test_trials_still_starting_do_not_hide_gpus_others_hold():
    now, busy = [0.0], [2.0]  # another job holds 2 GPUs
    outside = OutsideGpus(lambda: now[0], refresh_s=1.0, settle_s=5.0)
    view = SimpleNamespace(busy_gpus=lambda: busy[0])
    store = TrialStore()
    recs = file_records(store, 2)
    for t in range(2):
        now[0] = float(t)
        outside.read(view, store)
    assert outside.seen
    for rec in recs:  # handed to Tune; Ray has not given them their GPUs yet
        for phase in (Phase.QUEUED, Phase.READY, Phase.RUNNING):
            store.move(rec, phase, width=1.0, fresh_start=True)
    for t in range(2, 4):  # 2 busy, 2 claimed: none outside, as far as these reads can tell
        now[0] = float(t)
        outside.read(view, store)
    assert outside.seen, "the starts hid the other job: the gate would let more trials in"
    for rec in recs:
        rec.trial.status = Trial.RUNNING
    busy[0], now[0] = 2.0, 4.0  # the job left; the trials hold their 2
    outside.read(view, store)
    assert not outside.seen


def test_worker_groups_of_dead_train_controllers_are_removed_when_gpus_are_outside():
    busy, searches = [3.0], []

    def remove_orphans():
        searches.append(busy[0])
        busy[0] = 1.0
        return 1

    view = SimpleNamespace(busy_gpus=lambda: busy[0], remove_orphans=remove_orphans)
    now = [10.0]
    outside = OutsideGpus(lambda: now[0], refresh_s=1.0, settle_s=0.0)
    assert outside.read(view, TrialStore()) == 1 and busy == [1.0]
    busy[0], now[0] = 0.0, 12.0  # nothing outside: no search of the cluster's groups
    assert outside.read(view, TrialStore()) == 0 and searches == [3.0]


class TrainController:
    """Named as Ray Train's controller: makes a placement group of one GPU, as it does for
    its workers."""

    def group(self) -> PlacementGroup:
        pg = placement_group([{"GPU": 1}])
        ray.get(pg.ready())
        return pg


class Another(TrainController):
    """Any other actor that makes a placement group."""


def test_placement_groups_of_dead_train_controllers_are_removed_and_no_others(ray4):
    dead, other, alive = (ray.remote(num_cpus=0)(cls).remote()
                          for cls in (TrainController, Another, TrainController))
    groups = [ray.get(actor.group.remote()) for actor in (dead, other, alive)]
    ray.kill(dead)
    ray.kill(other)
    removed, deadline = 0, time.monotonic() + 30
    while not removed and time.monotonic() < deadline:  # until the GCS records the deaths
        removed = compat.remove_orphaned_train_groups()
        time.sleep(0.2)
    try:
        states = [ray.util.placement_group_table(g)["state"] for g in groups]
        assert removed == 1 and states == ["REMOVED", "CREATED", "CREATED"]
        assert compat.remove_orphaned_train_groups() == 0
    finally:
        for group in groups[1:]:
            remove_placement_group(group)
        ray.kill(alive)


def test_a_result_the_base_paused_at_shows_the_shape_it_ran_at():
    store = TrialStore()
    rec = file_records(store, 1)[0]
    store.update(rec, actual=None, result_width=0.5)  # unplaced when the base paused it
    result: dict = {}
    controller = SimpleNamespace(_callbacks=None)
    ShapeColumn([], store, None, controller).on_trial_result(
        iteration=1, trials=[], trial=rec.trial, result=result)
    assert result == {"fluid_shape": "0.5 GPU", "fluid_gpus": 0.5}


@pytest.mark.slow
def test_gpus_another_job_holds_are_left_out_of_the_plan(ray4, tmp_path, caplog):
    import logging

    from fluid import FluidExecutor, tune
    from tests.tune.trainables import modeled

    other = placement_group([{"CPU": 0.01, "GPU": 1}] * 2)  # another job's 2 GPUs
    ray.get(other.ready())
    tunables = Tunables(resources_refresh_s=0.2, outside_settle_s=1.0)
    ex = FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.1, tunables=tunables)
    try:
        with caplog.at_level(logging.INFO, logger="fluid"):
            analysis = tune.run(modeled, trial_executor=ex, storage_path=str(tmp_path),
                                config={"t": 0.6, "iters": 4,
                                        "n": tune.grid_search(list(range(4)))}, verbose=0)
    finally:
        remove_placement_group(other)
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    said = [r.getMessage() for r in caplog.records]
    assert any("2 of 4 held outside this experiment's trials" in m for m in said), said
    # Never more GPUs in Fluid's trials than the 2 left free.
    events = sorted((at, w or 0.0, t.trial_id) for t in analysis.trials
                    for at, w, _ in ex.shape_timeline(t.trial_id))
    held: dict[str, float] = {}
    for _at, width, tid in events:
        held[tid] = width
        assert sum(held.values()) <= 2.0 + 1e-9, held


@pytest.mark.parametrize("growth, share, expected", [(2.0, 0.25, 0.5), (1.5, 0.5, 0.75),
                                                     (2.0, 0.75, 1.0)])
def test_a_packed_trial_out_of_gpu_memory_grows_its_least_share(growth, share, expected):
    from fluid.tune._admission import widen_after_oom

    store = TrialStore()
    rec = file_records(store, 1)[0]
    store.update(rec, actual=share)
    oom = RuntimeError("torch.OutOfMemoryError: CUDA out of memory")
    assert widen_after_oom(store, rec, oom, growth) and store[rec.trial_id].min_share == expected
    assert not widen_after_oom(store, rec, RuntimeError("another failure"), growth)
