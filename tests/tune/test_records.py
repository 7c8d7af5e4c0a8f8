"""The trial store (no Ray instance): phases move only as ``TRANSITIONS`` allows, each index
follows every move, and the changes the planner has not taken are noted."""

from __future__ import annotations

import random

import pytest

from fluid.tune._records import LIVE, TRANSITIONS, Phase, PhaseError, TrialRecord, TrialStore

from .planning import fake_trial as _trial


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


def test_the_store_counts_the_packing_probes_of_its_filed_records():
    store = TrialStore()
    a, b = TrialRecord(_trial("a"), 0, 5), TrialRecord(_trial("b"), 0, 5, probe=True)
    store.update(a, probe=True)  # not filed yet
    assert store.probes == set()
    store.add(b)
    assert store.probes == {"b"}
    store.add(a)
    store.update(b, width=0.5)
    assert store.probes == {"a", "b"}
    store.add(TrialRecord(_trial("a"), 0, 5))  # replaced by a record that is no probe
    assert store.probes == {"b"} == {r.trial_id for r in store.records.values() if r.probe}


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


def test_the_first_trial_still_starting_is_named_when_none_is_released():
    """Tune gives an actor cached at a pause to the trial its scheduler names: the first one
    handed to Tune whose actor is still starting, in the order trials were added."""
    store = TrialStore()
    for tid, status in (("a", "RUNNING"), ("b", "PENDING"), ("c", "PENDING")):
        trial = _trial(tid, status)
        gid, until = store.group_of_new(trial, 2)
        store.add(TrialRecord(trial, gid, until, phase=Phase.RUNNING))
    assert store.first_starting().trial_id == "b"
    store.move(store["b"], Phase.DONE)
    assert store.first_starting().trial_id == "c"
    store.move(store["c"], Phase.DONE)
    assert store.first_starting() is None


def test_first_starting_follows_tune_starting_and_restarting_trials():
    # Tune makes a live trial PENDING only when it is handed over (moved into a live phase,
    # a resizing trial released again: a move to its own phase); its actor starts whenever.
    # A scan of every record is the reference.
    rng = random.Random(1)
    store = TrialStore()
    recs = [TrialRecord(_trial(f"t{i}", "PAUSED"), 0, 5) for i in range(30)]
    for rec in recs:
        store.add(rec)
    for _ in range(3000):
        rec = rng.choice(recs)
        if rng.random() < 0.5 and rec.trial.status == "PENDING":
            rec.trial.status = "RUNNING"  # its actor started
        else:
            phase = rng.choice(sorted(TRANSITIONS[rec.phase] | {rec.phase}, key=str))
            rec.trial.status = "PENDING" if phase in LIVE else rng.choice(("PAUSED", "PENDING"))
            store.move(rec, phase)
        starting = [r for r in store.records.values()
                    if r.phase in LIVE and r.trial.status == "PENDING"]
        assert store.first_starting() is (starting[0] if starting else None)


def test_a_trial_holding_several_gpus_in_one_process_is_not_called_a_gang():
    def rec(**kw):
        return TrialRecord(trial=_trial("t"), group=0, until=None, **kw)

    assert rec().shape(2.0) == "2 GPU"  # tune.with_resources(train, {"gpu": 2})
    assert rec(elastic=True).shape(2.0) == "gang of 2 GPU"
    assert rec(ray_train=True).shape(3.0) == "gang of 3 GPU"  # Ray Train's workers
    assert rec().shape(0.5) == "0.5 GPU" and rec().shape(None) == "-"
