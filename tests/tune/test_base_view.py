"""What the wrapped base scheduler sees (no Ray instance): every held trial with the status it
expects, the real ones back afterwards."""

from __future__ import annotations

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, HyperBandScheduler

from fluid.tune._base_view import base_view, chooses_idempotently, eligible
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


class _Controller:
    """What a scheduler's ``choose_trial_to_run`` reads of Tune's controller."""

    def __init__(self, store: TrialStore) -> None:
        self.store = store

    def get_trials(self):
        return [r.trial for r in self.store.in_phase(frozenset(Phase))]


class _FifoSubclass(FIFOScheduler):
    """A user's FIFO with hooks of its own (FIFO's choice, asked through the scan)."""


def _record(store: TrialStore, tid: str, phase: Phase, status: str) -> TrialRecord:
    gid, until = store.group_of_new(_trial(tid, status), 2)
    rec = TrialRecord(_trial(tid, status), gid, until, phase=phase,
                      base_status=Trial.PAUSED if phase is Phase.PAUSED else Trial.PENDING)
    store.add(rec)
    return rec


@pytest.mark.parametrize("base", [FIFOScheduler, _FifoSubclass])
def test_a_paused_trial_resumes_only_once_fifo_names_it_first(base):
    """As under plain Tune, FIFO resumes a trial it paused only once no trial is held or still
    starting (it answers those first, and Tune asks it once per step)."""
    store = TrialStore()
    paused = _record(store, "paused", Phase.PAUSED, Trial.PAUSED)
    held = _record(store, "held", Phase.HELD, Trial.PAUSED)

    def ask():
        found, again = eligible(base(), store, _Controller(store), 16, lambda: None)
        return [r.trial_id for r in found], again

    assert ask() == (["held"], True)  # the paused one waits for its turn
    store.move(held, Phase.QUEUED)
    store.move(held, Phase.READY)
    store.move(held, Phase.RUNNING)
    held.trial.status = Trial.PENDING  # handed to Tune, its actor still starting
    assert ask() == ([], True)
    held.trial.status = Trial.RUNNING
    assert ask() == (["paused"], False)  # nothing left to ask about
    assert paused.phase is Phase.PAUSED


def test_hyperband_answers_once_so_a_paused_trial_it_names_is_taken():
    """HyperBand takes the paused trial it answers off its list of trials to resume."""
    assert not chooses_idempotently(HyperBandScheduler())
    assert chooses_idempotently(FIFOScheduler()) and chooses_idempotently(_FifoSubclass())
