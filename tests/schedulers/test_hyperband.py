"""Fluid's HyperBand family names rung groups by the bracket's index, not by ``id()``."""

from __future__ import annotations

import pytest
from ray.tune.experiment import Trial

from fluid.schedulers import HyperBandForBOHB, HyperBandScheduler, SyncBOHB


class _Recorder:
    """Stands in for the FluidExecutor: records the groups a scheduler declares."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def add_group(self, group) -> None:
        self.names.append(group.name)


def _declared(cls, n: int) -> list[str]:
    sched = cls(time_attr="training_iteration", metric="m", mode="max", max_t=27,
                reduction_factor=3)
    sched._fluid_executor = rec = _Recorder()
    for i in range(n):
        sched.on_trial_add(None, Trial("__fake", config={}, trial_id=f"t{i}", stub=True))
    return list(dict.fromkeys(rec.names))  # distinct, in order


@pytest.mark.parametrize("cls", [HyperBandScheduler, HyperBandForBOHB, SyncBOHB])
def test_brackets_are_numbered_in_the_order_they_fill(cls):
    names = _declared(cls, 40)
    assert [n.split(" r=")[0] for n in names] == [f"bracket {i}" for i in range(len(names))]
    assert len(names) >= 3  # several live brackets, each its own group


def test_names_do_not_depend_on_what_ran_before():
    first = _declared(HyperBandScheduler, 40)
    keep = [_declared(HyperBandScheduler, 7) for _ in range(5)]  # other live schedulers
    assert keep and _declared(HyperBandScheduler, 40) == first
