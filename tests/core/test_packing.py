"""Packing rules for the time to target: leaders, packing probes, the in-flight bound
(``fluid.core.packing``), leaders unpacked (``fluid.core.policy.unpack_leaders``)."""

from __future__ import annotations

import pytest

from fluid.core import GpuPool, LiveTrial, TrialSpec, Tunables
from fluid.core.packing import in_flight_bound, is_leader, pair_probes
from fluid.core.policy import unpack_leaders

T = Tunables()


@pytest.mark.parametrize(("priority", "runs_to_end", "leads"), [
    (0, False, False), (1, False, True), (3, False, True), (0, True, True)])
def test_a_leader_is_waited_on_or_runs_to_its_end(priority, runs_to_end, leads) -> None:
    assert is_leader(priority, runs_to_end) is leads


@pytest.mark.parametrize(("gpus", "c", "alpha", "bound"), [
    (8, 1, 1.5, 8), (8, 2, 1.0, 16), (8, 2, 1.004, 15), (8, 2, 1.167, 13), (4, 3, 1.0, 12),
    (4, 3, 1.1, 9), (0.5, 1, 1.0, 1), (0, 2, 1.0, 1), (7.9999999999, 1, 1.0, 8)])
def test_a_searcher_has_in_flight_what_the_gpus_run_at_full_speed(gpus, c, alpha, bound) -> None:
    # c = 1 is plain Tune with max_concurrent_trials = GPUs (the careful user's set-up); c to a
    # GPU run c / alpha^(c-1) times as fast as one trial alone.
    assert in_flight_bound(gpus, c, alpha) == bound


def test_a_probe_opens_with_a_host_that_has_iterations_to_measure_alone_and_beside() -> None:
    pool = GpuPool(2)
    specs = [(TrialSpec("short", 5.0), False), (TrialSpec("long", 50.0), True),
             (TrialSpec("c", 5.0), False)]
    starts, opened, after = pair_probes(specs, [], pool, wanted=1)
    # the host is the first trial with two iterations left; it starts alone on a half GPU
    assert [(a.trial_id, a.width) for a in starts] == [("long", 0.5)] and opened == 1
    assert after.placement() == {0: [("long", 0.5)]} and pool.placement() == {}


def test_no_probe_opens_without_a_host() -> None:
    # Two short trials packed together are measured alone only once one is promoted: on the
    # trial the algorithm then waits on.
    specs = [(TrialSpec(t, 5.0), False) for t in ("a", "b", "c")]
    pool = GpuPool(2)
    starts, opened, after = pair_probes(specs, [], pool, wanted=1)
    assert starts == [] and opened == 0 and after is pool


@pytest.mark.parametrize(("gpus", "waiting", "opened"), [(4, 2, 0), (4, 4, 0), (4, 5, 1),
                                                        (2, 3, 1)])
def test_no_probe_opens_while_an_idle_gpu_waits_for_each_trial(gpus, waiting, opened) -> None:
    # With a whole GPU for every waiting trial packing is never used: a probe only slows it.
    specs = [(TrialSpec(f"t{i}", 5.0), True) for i in range(waiting)]
    starts, n, _ = pair_probes(specs, [], GpuPool(gpus), wanted=1)
    assert n == opened and len(starts) == opened


def test_a_host_measured_alone_gets_a_mate_and_no_probe_opens_on_a_full_pool() -> None:
    pool = GpuPool(1)
    pool.place("h", 0.5, 1)
    specs = [(TrialSpec("m", 5.0), True), (TrialSpec("n", 5.0), True)]
    starts, opened, after = pair_probes(specs, ["h"], pool, wanted=3)
    assert [(a.trial_id, a.width, a.gpus) for a in starts] == [("m", 0.5, (0,))]
    assert opened == 0 and after.placement() == {0: [("h", 0.5), ("m", 0.5)]}


def test_a_mate_that_does_not_fit_in_memory_is_passed_over() -> None:
    pool = GpuPool(1, memory=10.0)
    pool.place("h", 0.5, 1, memory=6.0)
    specs = [(TrialSpec("big", 5.0, memory=6.0), True), (TrialSpec("small", 5.0, memory=3.0), True)]
    starts, _, _ = pair_probes(specs, ["h"], pool, wanted=0)
    assert [a.trial_id for a in starts] == ["small"]


def _running(pool: GpuPool, spec: TrialSpec, width: float, priority: int) -> LiveTrial:
    assert pool.place(spec.id, width, 2) is not None
    return LiveTrial.of(spec, width, T, pausable=True, priority=priority, elastic=True)


def test_a_promoted_trial_on_a_share_takes_a_whole_gpu_first() -> None:
    pool = GpuPool(2)
    lead = _running(pool, TrialSpec("lead", 100.0, alpha=1.5, c=1), 0.5, priority=1)
    _running(pool, TrialSpec("low", 10.0, alpha=1.5, c=2), 0.5, priority=0)
    moved, after = unpack_leaders([lead], pool, eps=5.0)
    assert [(z.trial_id, z.new_width) for z in moved] == [("lead", 1.0)]
    assert after.where("lead") == (1,) and pool.where("lead") == (0,)  # the input is unchanged


def test_a_leader_stays_packed_when_the_restart_costs_more_than_it_gains() -> None:
    pool = GpuPool(2)
    lead = _running(pool, TrialSpec("lead", 10.0, alpha=1.2, c=1), 0.5, priority=1)
    # on its share it takes 12 s, alone 10 s: a restart of 5 s does not pay
    assert unpack_leaders([lead], pool, eps=5.0)[0] == []
    assert [z.trial_id for z in unpack_leaders([lead], pool, eps=1.0)[0]] == ["lead"]
