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


def _ids(starts) -> list[tuple[str, float, tuple[int, ...]]]:
    return sorted((a.trial_id, a.width, a.gpus) for a in starts)


def test_probes_start_in_pairs_each_on_half_a_gpu() -> None:
    pool = GpuPool(2)
    specs = [TrialSpec(t, 5.0) for t in ("a", "b", "c", "d")]
    starts, after = pair_probes(specs, pool, wanted=2)
    # a pair to one GPU: no trial needs iterations of its own alone and beside another
    assert [(w, g) for _, w, g in _ids(starts)] == [(0.5, (0,)), (0.5, (0,))]
    assert len(after.placement()[0]) == 2 and pool.placement() == {}


def test_which_trials_are_probed_does_not_follow_the_searchers_order() -> None:
    # A grid's first trials share values: the probes are drawn by a hash of the trial ids.
    specs = [TrialSpec(f"trial_{i:05d}", 5.0) for i in range(40)]
    chosen = {a.trial_id for a in pair_probes(specs, GpuPool(8), wanted=8)[0]}
    assert len(chosen) == 8 and chosen != {s.id for s in specs[:8]}
    again = {a.trial_id for a in pair_probes(list(reversed(specs)), GpuPool(8), wanted=8)[0]}
    assert again == chosen  # the order given does not matter either


@pytest.mark.parametrize(("gpus", "waiting", "probed"), [(4, 2, 0), (4, 4, 0), (4, 5, 2),
                                                        (2, 3, 2), (4, 6, 4), (4, 12, 4)])
def test_no_probe_starts_while_an_idle_gpu_waits_for_each_trial(gpus, waiting, probed) -> None:
    # With a whole GPU for every waiting trial packing is never used: a probe only slows it.
    specs = [TrialSpec(f"t{i}", 5.0) for i in range(waiting)]
    starts, _ = pair_probes(specs, GpuPool(gpus), wanted=4)
    assert len(starts) == probed


def test_a_half_gpu_holding_one_trial_is_filled_first_and_memory_is_respected() -> None:
    pool = GpuPool(2, memory=10.0)
    pool.place("h", 0.5, 2, memory=6.0)
    specs = [TrialSpec("big", 5.0, memory=6.0), TrialSpec("small", 5.0, memory=3.0),
             TrialSpec("x", 5.0, memory=3.0)]
    starts, after = pair_probes(specs, pool, wanted=1)
    assert len(starts) == 1
    a = starts[0]
    assert (a.gpus == (0,)) == (a.trial_id != "big")  # the big one does not fit beside h


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
