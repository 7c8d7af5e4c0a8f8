"""Ray Train trials without Ray: how one is sized (``admission.new_record``, the policy's
``trial_limits``), shaped (``CpuAccount``) and gated (``_train_trials``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.tune import PlacementGroupFactory

from fluid.core import PolicyConfig, TrialFacts, Tunables, trial_limits
from fluid.shapes.train_workers import RAY_TRAIN_ATTR, WorkerRange
from fluid.tune import FluidConfigError
from fluid.tune import _ray_compat as compat
from fluid.tune._admission import new_record, trainable_kind
from fluid.tune._cpus import CpuAccount
from fluid.tune._records import Phase, TrialRecord, TrialStore
from fluid.tune._resources import StartGate, starting_claims
from fluid.tune._train_trials import check_ray_train, train_shape


def _trial(name: str, workers: WorkerRange | None, status: str = "PAUSED"):
    cls = type("T", (), {RAY_TRAIN_ATTR: workers} if workers else {})
    return SimpleNamespace(trial_id=name, trainable_name=name, status=status,
                           get_trainable_cls=lambda: cls, stopping_criterion={},
                           placement_group_factory=PlacementGroupFactory([{"CPU": 1}]))


def _rec(trial, resize_requests: bool = False) -> TrialRecord:
    return new_record(TrialStore(), trial, trainable_kind(trial), None, resize_requests)


@pytest.mark.parametrize(("workers", "resize", "expected"), [
    (WorkerRange(2, 2), False, (False, 2.0, 2.0)),  # exactly 2
    (WorkerRange(2, 2), True, (True, None, None)),  # resize_requests: sized freely
    (WorkerRange(1, 4), False, (True, None, 4.0)),
    (WorkerRange(2, 4), False, (True, 2.0, 4.0)),
    (WorkerRange(), False, (True, None, None)),
])
def test_a_ray_train_trial_is_sized_by_its_mark(workers, resize, expected):
    rec = _rec(_trial("a", workers), resize)
    assert rec.ray_train and (rec.elastic, rec.w_min, rec.w_max) == expected
    assert rec.request is None and rec.asked == (expected[1] or 0.0)


def test_an_unmarked_trial_is_left_alone():
    rec = _rec(_trial("plain", None))
    assert not rec.ray_train and rec.w_max is None and not rec.elastic


@pytest.mark.parametrize(("w_max", "w_min", "elastic", "expected"), [
    (4.0, None, True, (1, 4)),  # never packed, at most its range
    (2.0, 2.0, False, (1, 2)),  # a fixed count: exactly its workers
    (None, None, True, (1, 8)),  # no bound of its own: as any elastic trial
])
def test_the_policy_never_packs_a_ray_train_trial_and_caps_it_at_its_range(
        w_max, w_min, elastic, expected):
    # Packing and gangs measured free: a plain trial could share a GPU or take all eight.
    facts = TrialFacts(1.0, 1.0, alpha_measured=True, beta_measured=True, measured=True,
                       elastic=elastic, w_min=w_min, ray_train=True, w_max=w_max)
    c, d, _ = trial_limits(facts, PolicyConfig(), Tunables(), 8)
    assert (c, d) == expected
    plain = trial_limits(TrialFacts(1.0, 1.0, alpha_measured=True, beta_measured=True,
                                    measured=True, elastic=True), PolicyConfig(), Tunables(), 8)
    assert plain[0] > 1 and plain[1] == 8


def test_worker_bundles_need_cpus_and_train_needs_v2(monkeypatch):
    rec = _rec(_trial("a", WorkerRange(2, 2)))
    with pytest.raises(FluidConfigError, match="cpus_per_worker must be above 0"):
        check_ray_train(rec, 0.0)
    check_ray_train(_rec(_trial("plain", None)), 0.0)  # not a Ray Train trial: no worker bundles
    monkeypatch.setattr(compat, "train_v2_enabled", lambda: False)
    with pytest.raises(FluidConfigError, match="RAY_TRAIN_V2_ENABLED=1"):
        check_ray_train(rec, 1.0)


def test_tune_gets_the_driver_and_worker_cpus_only():
    rec = _rec(_trial("a", WorkerRange(1, 4)))
    account = CpuAccount(TrialStore(), None, 0.5)
    assert account.shape(rec, 3.0).bundles == [{"CPU": 1.0}] + [{"CPU": 0.5}] * 3
    assert account.needed(rec, 1.0) == 1.5  # the driver and its one worker
    assert train_shape(2.0, 1, 0.5).bundles == [{"CPU": 1.0}, {"CPU": 0.5}, {"CPU": 0.5}]


def _placed(store, name, width, ray_train, fresh, status, handed=True):
    """A placed trial: handed to Tune (``RUNNING`` in Fluid, ``status`` in Tune) or not yet."""
    rec = TrialRecord(_trial(name, None, status), 0, 4, ray_train=ray_train)
    store.add(rec)
    for phase in (Phase.QUEUED, Phase.READY) + ((Phase.RUNNING,) if handed else ()):
        store.move(rec, phase)
    store.update(rec, width=width, fresh_start=fresh)
    return rec


def test_a_trial_starts_only_when_ray_holds_its_gpus():
    store = TrialStore()
    gate = StartGate()
    candidate = _placed(store, "c", 2.0, True, True, "PAUSED", handed=False)
    # a Train trial started but not reported yet: its workers may not hold their GPUs
    starting = _placed(store, "s", 1.0, True, True, "RUNNING")
    _placed(store, "r", 1.0, True, False, "RUNNING")  # reported: holds its GPUs
    _placed(store, "p", 0.5, False, True, "PENDING")  # handed to Tune, not running yet
    _placed(store, "w", 1.0, False, True, "PAUSED", handed=False)  # waits its turn too
    assert starting_claims(store, candidate) == 1.5
    assert not gate.fits(candidate, store, lambda: 3.0)  # 3 free - 1.5 claimed < 2
    store.update(starting, fresh_start=False)
    assert gate.fits(candidate, store, lambda: 2.5)
    assert gate.fits(candidate, store, None)  # a view that cannot say
    # Any trial with GPUs waits the same way while others hold GPUs; one without never does.
    plain = store["w"]
    assert gate.fits(plain, store, lambda: 0.9)  # only Fluid's trials hold GPUs: the plan's
    assert not gate.fits(plain, store, lambda: 0.9, True)  # 0.9 free - 0.5 (p) claimed < 1
    assert gate.fits(plain, store, lambda: 1.5, True)
    store.update(plain, width=0.0)
    assert gate.fits(plain, store, lambda: 0.0, True)


@pytest.mark.parametrize("ray_train", [False, True])
def test_a_ray_train_trial_is_never_a_packing_probe(ray_train):
    # No profile: packing is unmeasured, so the planner opens probes (two trials on a half
    # GPU each) among the trials the algorithm does not wait on; never a Ray Train trial.
    from tests.tune.planning import file_records, make_planner, plan

    store, _, planner = make_planner(4.0, alpha=None)
    recs = file_records(store, 6, elastic=True, ray_train=ray_train)
    plan(planner, lambda: recs, False)
    widths = [r.width for r in recs]
    if ray_train:
        assert min(widths) >= 1.0 and not any(r.probe for r in recs), widths
    else:
        assert min(widths) == 0.5 and any(r.probe for r in recs), widths
