"""Fluid's HyperBand family names rung groups by the bracket's index, not by ``id()``."""

from __future__ import annotations

import pytest
from ray.tune.experiment import Trial

from fluid.schedulers import HyperBandForBOHB, HyperBandScheduler, SyncBOHB


def _declared(cls, n: int) -> list[str]:
    sched = cls(time_attr="training_iteration", metric="m", mode="max", max_t=27,
                reduction_factor=3)
    sched.collect_trial_groups()  # as FluidExecutor does
    names = []
    for i in range(n):
        sched.on_trial_add(None, Trial("__fake", config={}, trial_id=f"t{i}", stub=True))
        names += [g.name for g in sched.take_trial_groups()]
    return list(dict.fromkeys(names))  # distinct, in order


@pytest.mark.parametrize("cls", [HyperBandScheduler, HyperBandForBOHB, SyncBOHB])
def test_brackets_are_numbered_in_the_order_they_fill(cls):
    names = _declared(cls, 40)
    assert [n.split(" r=")[0] for n in names] == [f"bracket {i}" for i in range(len(names))]
    assert len(names) >= 3  # several live brackets, each its own group


def test_names_do_not_depend_on_what_ran_before():
    first = _declared(HyperBandScheduler, 40)
    keep = [_declared(HyperBandScheduler, 7) for _ in range(5)]  # other live schedulers
    assert keep and _declared(HyperBandScheduler, 40) == first


class _Controller:
    """What Ray's HyperBand asks of the Tune controller when it halves a rung: stopping a
    paused trial removes it from the scheduler, as ``TuneController.stop_trial`` does."""

    def __init__(self, scheduler: HyperBandScheduler) -> None:
        self.scheduler = scheduler
        self.stopped: list[str] = []

    def stop_trial(self, trial: Trial) -> None:
        self.scheduler.on_trial_remove(self, trial)
        trial.set_status(Trial.TERMINATED)
        self.stopped.append(trial.trial_id)


def test_a_halved_rungs_survivors_form_the_next_group_ranked_by_their_rung():
    sched = HyperBandScheduler(time_attr="training_iteration", metric="m", mode="max", max_t=9,
                               reduction_factor=3)
    sched.collect_trial_groups()
    trials = [Trial("__fake", config={}, trial_id=f"t{i}", stub=True) for i in range(17)]
    for trial in trials:  # brackets of 3, 5 and 9 trials, the last to r=1
        sched.on_trial_add(None, trial)
    first = sched.take_trial_groups()
    assert {p for g in first for p in g.priority.values()} == {0}
    rung = trials[8:]
    assert {g.name for g in first if set(g.priority) <= {t.trial_id for t in rung}} == {
        "bracket 2 r=1"}
    controller = _Controller(sched)
    for m, trial in enumerate(rung):  # all but the last wait, paused, at the milestone
        trial.set_status(Trial.RUNNING if trial is rung[-1] else Trial.PAUSED)
        sched.on_trial_result(controller, trial, {"training_iteration": 1, "m": m})
    (survivors,) = sched.take_trial_groups()
    best = [t.trial_id for t in rung[-3:]]  # the best third: m = 6, 7, 8
    assert survivors.priority == dict.fromkeys(best, 1)
    assert survivors.name == "bracket 2 r=3" and survivors.budget == dict.fromkeys(best, 3)
    assert controller.stopped == [t.trial_id for t in rung[:6]]
