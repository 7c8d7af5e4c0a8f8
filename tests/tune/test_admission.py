"""What a trial is when Fluid first sees it (no Ray instance): trainables looked up once, and
the trials left paused at the end of their budget with nothing else to run."""

from __future__ import annotations

from types import SimpleNamespace

from ray.tune.experiment import Trial

from fluid.tune._records import Phase, TrialRecord, TrialStore

from .planning import fake_trial as _trial


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
