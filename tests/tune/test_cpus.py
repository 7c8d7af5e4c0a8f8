"""CPU accounting (no Ray instance): the CPUs a trial's shape asks for, remembered per trial,
equal those of the shape built."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.tune.experiment import Trial

from fluid.tune._cpus import CpuAccount
from fluid.tune._records import TrialRecord, TrialStore


def _trial(tid: str) -> SimpleNamespace:
    return SimpleNamespace(trial_id=tid, status=Trial.RUNNING, last_result={})


@pytest.mark.parametrize("cpus_per_trial", [None, 1, 0.5])
def test_remembered_shape_cpus_equal_those_of_the_built_shape(cpus_per_trial):
    from fluid.tune._placement_groups import cpus_in

    account = CpuAccount(TrialStore(), cpus_per_trial, 0.5)
    for width in [1 / 3, 0.5, 1.0, 2.0, 5.0]:
        for cpus in [1.0, 2.0, 0.25]:
            rec = TrialRecord(_trial("t"), 0, 5, cpus=cpus)
            for _ in range(2):  # built, then remembered
                assert account.needed(rec, width) == cpus_in(account.shape(rec, width))
