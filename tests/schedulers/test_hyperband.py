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
