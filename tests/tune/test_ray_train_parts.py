"""``fluid.tune._ray_train`` without Ray: how a Ray Train trial is sized, shaped and gated."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.tune import PlacementGroupFactory

from fluid.core.ray_train import RAY_TRAIN_ATTR, WorkerRange
from fluid.tune import FluidConfigError
from fluid.tune import _ray_compat as compat
from fluid.tune._planner import Planner
from fluid.tune._ray_train import RayTrainTrials, starting_claims, train_shape
from fluid.tune._records import Phase, TrialBook, TrialRecord


def _trial(name: str, workers: WorkerRange | None, status: str = "PAUSED"):
    cls = type("T", (), {RAY_TRAIN_ATTR: workers} if workers else {})
    return SimpleNamespace(trial_id=name, trainable_name=name, status=status,
                           get_trainable_cls=lambda: cls,
                           placement_group_factory=PlacementGroupFactory([{"CPU": 1}]))


def _rec(trial) -> TrialRecord:
    return TrialRecord(trial, 0, 4)


@pytest.mark.parametrize(("workers", "resize", "expected"), [
    (WorkerRange(2, 2), False, (False, 2.0, 2.0)),  # exactly 2
    (WorkerRange(2, 2), True, (True, None, None)),  # resize_requests: sized freely
    (WorkerRange(1, 4), False, (True, None, 4.0)),
    (WorkerRange(2, 4), False, (True, 2.0, 4.0)),
    (WorkerRange(), False, (True, None, None)),
])
def test_a_ray_train_trial_is_sized_by_its_mark(workers, resize, expected):
    rec = _rec(_trial("a", workers))
    RayTrainTrials(cpus_per_worker=1.0, resize_requests=resize).configure(rec)
    assert rec.ray_train and (rec.elastic, rec.w_min, rec.w_max) == expected


def test_an_unmarked_trial_is_left_alone():
    rec = _rec(_trial("plain", None))
    RayTrainTrials(1.0, False).configure(rec)
    assert not rec.ray_train and rec.w_max is None


def test_worker_bundles_need_cpus_and_train_needs_v2(monkeypatch):
    with pytest.raises(FluidConfigError, match="cpus_per_worker must be above 0"):
        RayTrainTrials(0.0, False).configure(_rec(_trial("a", WorkerRange(2, 2))))
    monkeypatch.setattr(compat, "train_v2_enabled", lambda: False)
    with pytest.raises(FluidConfigError, match="RAY_TRAIN_V2_ENABLED=1"):
        RayTrainTrials(1.0, False).configure(_rec(_trial("b", WorkerRange(2, 2))))


def test_the_planner_gives_tune_the_driver_and_worker_cpus_only():
    rec = _rec(_trial("a", WorkerRange(1, 4)))
    RayTrainTrials(0.5, False).configure(rec)
    planner = Planner.__new__(Planner)
    planner._cpus_per_trial, planner._cpus_per_worker = None, 0.5
    assert planner.shape(rec, 3.0).bundles == [{"CPU": 1.0}] + [{"CPU": 0.5}] * 3
    assert planner.cpus_needed(rec, 1.0) == 1.5  # the driver and its one worker
    assert train_shape(2.0, 1, 0.5).bundles == [{"CPU": 1.0}, {"CPU": 0.5}, {"CPU": 0.5}]


def _placed(book, name, width, ray_train, fresh, status):
    rec = _rec(_trial(name, WorkerRange() if ray_train else None, status))
    rec.ray_train, rec.width, rec.fresh_start = ray_train, width, fresh
    book.add(rec)
    rec.phase = Phase.RUNNING if status == "RUNNING" else Phase.READY
    return rec


def test_a_train_trial_starts_only_when_ray_holds_its_workers():
    book = TrialBook()
    trains = RayTrainTrials(1.0, False)
    candidate = _placed(book, "c", 2.0, True, True, "PAUSED")
    # a Train trial started but not reported yet: its workers may not hold their GPUs
    starting = _placed(book, "s", 1.0, True, True, "RUNNING")
    _placed(book, "r", 1.0, True, False, "RUNNING")  # reported: holds its GPUs
    _placed(book, "p", 0.5, False, True, "PAUSED")  # handed to Tune, not running yet
    assert starting_claims(book, candidate) == 1.5
    view = SimpleNamespace(available_gpus=lambda: 3.0)
    assert not trains.fits(candidate, book, view)  # 3 free - 1.5 claimed < 2
    starting.fresh_start = False
    assert trains.fits(candidate, book, SimpleNamespace(available_gpus=lambda: 2.5))
    assert trains.fits(candidate, book, SimpleNamespace())  # a view that cannot say
