"""Who computes on each GPU (``fluid.tune._residency``): what an iteration of a packed trial
measures. No Ray instance needed."""

from __future__ import annotations

import pytest

from fluid.tune._residency import Residency


def test_an_iteration_alone_on_its_gpu_measures_one_gpu_and_beside_a_mate_two() -> None:
    r = Residency()
    r.arrive("host", (0,), now=0.0)
    r.began("host", at=3.0)  # its actor started: it computes from 3 s
    assert r.degree("host", start=3.0) == 1
    r.arrive("mate", (0,), now=10.0)
    assert r.degree("host", start=8.0) is None  # the mate arrived during that iteration
    r.began("mate", at=14.0)
    assert r.degree("host", start=12.0) is None  # nor does the one the mate started in
    assert r.degree("host", start=15.0) == 2 and r.degree("mate", start=15.0) == 2


def test_a_trial_that_leaves_makes_its_mates_iteration_measure_nothing() -> None:
    r = Residency()
    for t in ("a", "b"):
        r.arrive(t, (0,), now=0.0)
    r.leave("b", now=20.0)
    assert r.degree("a", start=18.0) is None and r.degree("a", start=21.0) == 1
    assert r.degree("b", start=21.0) is None  # not placed


def test_trials_on_other_gpus_and_gangs_measure_no_packing() -> None:
    r = Residency()
    r.arrive("a", (0,), now=0.0)
    r.arrive("b", (1,), now=5.0)
    assert r.degree("a", start=1.0) == 1  # b arrived on another GPU
    r.arrive("gang", (2, 3), now=0.0)
    assert r.degree("gang", start=1.0) is None


def test_exposure_beside_a_long_trial_keeps_only_what_a_question_can_overlap():
    # A long trial on GPU 0 reports every second while 200 short ones come and go beside it
    # (each for half a second): its exposure stays a half, and what is kept does not grow.
    r = Residency()
    r.arrive("long", (0,), now=0.0)
    r.began("long", at=0.0)
    for i in range(200):
        r.arrive(f"s{i}", (0,), now=i + 0.25)
        r.began(f"s{i}", at=i + 0.25)
        r.leave(f"s{i}", now=i + 0.75)
        assert r.exposure("long", start=float(i), end=i + 1.0) == pytest.approx(0.5)
    assert len(r._spans[0]) <= 3
