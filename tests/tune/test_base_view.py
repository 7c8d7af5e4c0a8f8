"""What the wrapped base scheduler sees (no Ray instance): every held trial with the status it
expects, the real ones back afterwards."""

from __future__ import annotations

from ray.tune.experiment import Trial

from fluid.tune._base_view import base_view
from fluid.tune._records import Phase, TrialRecord, TrialStore

from .planning import fake_trial as _trial


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
