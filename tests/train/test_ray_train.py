"""``fluid.train.ray_train``, ``scaling_config`` and ``run_config`` inside a trial (the trial's
Tune context faked; no Ray started)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pyarrow.fs
import pytest
import ray.train
from ray.tune import Checkpoint, PlacementGroupFactory

import fluid.train as ft
from fluid.shapes.train_workers import WorkerRange, driver_bundles, worker_range
from fluid.train import _ray_train, _result_handoff


@pytest.fixture
def context(monkeypatch, tmp_path):
    """The trial's Tune context: its resources, storage and checkpoint (set by each test)."""
    ctx = SimpleNamespace(bundles=[{"CPU": 1}], checkpoint=None, handoff=None)
    storage = SimpleNamespace(trial_fs_path=str(tmp_path / "trial"),
                              storage_filesystem=pyarrow.fs.LocalFileSystem())
    fake = SimpleNamespace(
        get_trial_resources=lambda: PlacementGroupFactory(ctx.bundles),
        get_storage=lambda: storage)
    monkeypatch.setattr(_ray_train.tune, "get_context", lambda: fake)
    monkeypatch.setattr(_ray_train.tune, "get_checkpoint", lambda: ctx.checkpoint)
    ctx.handoff = ray.train.UserCallback()  # the hand-off to Tune (tested below)
    monkeypatch.setattr(_ray_train, "handoff_callback", lambda: ctx.handoff)
    monkeypatch.setattr(_ray_train, "_running", None)
    return ctx


def _marked(num_workers):
    seen = {}

    @ft.ray_train(num_workers=num_workers)
    def driver(config):
        seen["scaling"] = ft.scaling_config(placement_strategy="SPREAD")
        seen["run"] = ft.run_config()

    return driver, seen


def test_the_mark_is_on_the_function_and_the_class_tune_builds():
    driver, _ = _marked((1, 4))
    assert worker_range(driver) == WorkerRange(1, 4)
    cls = type("ImplicitFunc", driver.__mixins__, {})  # Tune's class adds __mixins__
    assert worker_range(cls) == WorkerRange(1, 4)
    assert driver.__name__ == "driver"


def test_under_fluid_the_trainer_gets_fluids_worker_count(context):
    driver, seen = _marked((1, 4))
    context.bundles = driver_bundles(3, 1, 0.5)
    driver({})
    scaling = seen["scaling"]
    assert scaling.num_workers == 3 and scaling.use_gpu
    assert scaling.resources_per_worker == {"GPU": 1}  # CPUs: in the trial's bundles
    assert scaling.placement_strategy == "SPREAD"
    run = seen["run"]
    assert run.name == "ray_train" and run.storage_path == context_path(context)
    assert run.callbacks == [context.handoff]


def context_path(context):
    return _ray_train.tune.get_context().get_storage().trial_fs_path


@pytest.mark.parametrize(("num_workers", "expected"), [(2, 2), ((1, 3), None), (None, 1)])
def test_under_plain_tune_the_trainer_asks_for_the_marked_workers(context, num_workers,
                                                                  expected):
    driver, seen = _marked(num_workers)
    driver({})
    got = seen["scaling"].num_workers
    if expected is None:  # a range: Ray Train's own elastic range where it has one
        from ray.train import ScalingConfig

        assert got == ((1, 3) if hasattr(ScalingConfig, "elasticity_enabled") else 3)
    else:
        assert got == expected


def test_outside_a_marked_trainable_the_helpers_say_what_is_missing(context):
    with pytest.raises(RuntimeError, match="fluid.train.ray_train"):
        ft.scaling_config()
    with pytest.raises(RuntimeError, match="fluid.train.ray_train"):
        ft.run_config()


def test_worker_cpus_belong_to_fluid_and_the_count_to_the_mark(context):
    _ray_train._start(WorkerRange(1, 2))
    context.bundles = driver_bundles(2, 1, 1)
    with pytest.raises(ValueError, match="cpus_per_worker"):
        ft.scaling_config(resources_per_worker={"CPU": 4})
    with pytest.raises(ValueError, match="num_workers"):
        ft.scaling_config(num_workers=8)
    assert ft.scaling_config(resources_per_worker={"licence": 1}).resources_per_worker == {
        "licence": 1, "GPU": 1}


def test_another_trials_checkpoint_is_refused(context, tmp_path):
    _ray_train._start(WorkerRange())
    pointer = tmp_path / "pointer"
    pointer.mkdir()
    other = str(tmp_path / "other" / "c")
    (pointer / _result_handoff.POINTER).write_text(json.dumps({"path": other}))
    context.checkpoint = Checkpoint.from_directory(str(pointer))
    with pytest.raises(RuntimeError, match="PBT's exploit is not supported"):
        ft.run_config()
    own = context_path(context) + "/ray_train/checkpoint_1"
    (pointer / _result_handoff.POINTER).write_text(json.dumps({"path": own}))
    assert ft.run_config().name == "ray_train"


def test_a_result_reaches_tune_with_a_pointer_to_trains_checkpoint(monkeypatch, tmp_path):
    reported = []

    def report(metrics, checkpoint=None):
        pointer = None
        if checkpoint is not None:
            with checkpoint.as_directory() as d:
                pointer = _result_handoff.checkpoint_owner(Checkpoint.from_directory(d))
        reported.append((metrics, pointer))

    monkeypatch.setattr(_result_handoff.tune, "report", report)
    train_checkpoint = ray.train.Checkpoint(str(tmp_path / "ray_train" / "checkpoint_7"))
    _result_handoff.report({"loss": 1.0}, train_checkpoint)
    _result_handoff.report({"loss": 0.5}, None)
    assert reported == [({"loss": 1.0, "checkpoint_path": train_checkpoint.path},
                         train_checkpoint.path), ({"loss": 0.5}, None)]
