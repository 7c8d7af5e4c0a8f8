"""The guard of the time-to-target policy (``fluid.core.guard``): never delay the leaders."""

from __future__ import annotations

import pytest

from fluid.core import TrialSpec
from fluid.core.guard import is_safe, plain_time, plan_time


def _specs():
    # "lead": 100 s of one-GPU work, scales well (beta 1.1), packs badly (alpha 1.8);
    # "other": 40 s, packs almost for free.
    return {"lead": TrialSpec("lead", 100.0, alpha=1.8, beta=1.1),
            "other": TrialSpec("other", 40.0, alpha=1.02, beta=1.5)}


def test_plain_time_is_the_latest_leader_alone_on_one_gpu():
    specs = _specs()
    assert plain_time(specs, ["lead", "other"]) == 100.0
    assert plain_time(specs, []) == 0.0


def test_plan_time_adds_eps_only_for_leaders_it_resizes():
    specs = _specs()
    widths = {"lead": 2.0, "other": 1.0}
    assert plan_time(specs, widths, None, ["lead"], eps=5.0) == pytest.approx(55.0)
    moved = plan_time(specs, widths, {"lead": 1.0, "other": 1.0}, ["lead"], eps=5.0)
    assert moved == pytest.approx(55.0 + 5.0)


def test_a_plan_that_packs_a_leader_is_refused():
    specs = _specs()
    # Packing the leader two to a GPU: 100 * 1.8 = 180 s > 100 s alone.
    assert not is_safe(specs, {"lead": 0.5, "other": 0.5}, None, ["lead"], eps=0.0)
    # Packing a trial that does not lead is not the guard's business.
    assert is_safe(specs, {"lead": 1.0, "other": 0.5}, None, ["lead"], eps=0.0)


def test_a_gang_must_pay_for_its_resize():
    specs = {"lead": TrialSpec("lead", 10.0, beta=1.1)}
    now = {"lead": 1.0}
    # A gang of 2: 10 / 2 * 1.1 = 5.5 s, plus eps.
    assert is_safe(specs, {"lead": 2.0}, now, ["lead"], eps=4.0)  # 9.5 < 10
    assert not is_safe(specs, {"lead": 2.0}, now, ["lead"], eps=5.0)  # 10.5 > 10


def test_shrinking_a_gang_that_turned_out_slow_is_allowed():
    # Measured: the gang of 2 is slower than one GPU (beta 2.5: 2.5/2 = 1.25 x).
    specs = {"lead": TrialSpec("lead", 100.0, beta=2.5)}
    assert is_safe(specs, {"lead": 1.0}, {"lead": 2.0}, ["lead"], eps=5.0)
    assert not is_safe(specs, {"lead": 2.0}, {"lead": 1.0}, ["lead"], eps=5.0)


def test_docstring_examples():
    import doctest

    import fluid.core.guard

    assert doctest.testmod(fluid.core.guard).failed == 0
