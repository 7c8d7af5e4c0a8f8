"""Ray Tune's actor-reuse cases with trials side by side (``python/ray/tune/tests/
test_actor_reuse.py``, Ray 2.60's API: 4 CPUs and 4 of a custom resource ``extra``), each run
as Ray wrote it and with only the scheduler wrapped (``FluidExecutor()`` for FIFO), and held
to Ray's own assertions."""

from __future__ import annotations

import pytest
from ray import tune

from tests.dropin import ray_cases
from tests.dropin.ray_cases import UNDER, UNDER_TUNE_SLOW, local_ray
from tests.dropin.ray_reuse_trainables import ResettableClass, resettable_function
from tests.dropin.test_ray_actor_reuse import KINDS

four_cpus_extra = local_ray(num_cpus=4, resources={"extra": 4})  # as Ray's fixture


def run(trainable, under: str, tmp_path, **kwargs):
    """``tune.run`` with actor reuse; the trials' last results."""
    trials = ray_cases.run(under, trainable, tmp_path, reuse_actors=True, **kwargs).trials
    return [t.last_result for t in trials]


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
@pytest.mark.parametrize("kind", ["class", pytest.param("function", marks=pytest.mark.slow)])
def test_two_actors_side_by_side_are_both_reused(under, kind, tmp_path, monkeypatch):
    """Two trials of 2 CPUs at a time: the third and the fourth each reuse one of their actors
    (a trial sleeps 2 s per iteration, so the third is still running when the fourth
    starts)."""
    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "2")
    results = run(KINDS[kind], under, tmp_path, resources_per_trial={"cpu": 2},
                  config={"message": tune.grid_search(["1", "2", "3", "4"]), "id": -1,
                          "sleep": 2})
    assert [r["num_resets"] for r in results[2:]] == [1, 1]


@pytest.mark.slow  # Ray's race: trial 1 still runs when trial 3's actor starts (2 s steps)
@pytest.mark.parametrize("under", UNDER)
def test_a_failed_trials_actor_is_not_reused_beside_another(under, tmp_path, monkeypatch):
    """Trial 2 fails: trial 3, started after it, gets a fresh actor; trial 4 reuses trial 1's."""
    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "2")
    results = run(ResettableClass, under, tmp_path, resources_per_trial={"cpu": 2},
                  raise_on_failed_trial=False,
                  config={"fail": tune.grid_search([False, True, False, False]), "id": -1,
                          "sleep": 2})
    assert [results[i].get("num_resets") for i in (0, 2, 3)] == [0, 0, 1]


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_one_trial_at_a_time_still_reuses_its_actor(under, tmp_path):
    """``max_concurrent_trials=1``: no trial waits while another runs, and each of the six
    reuses the one actor."""
    results = run(resettable_function, under, tmp_path, config={"id": -1}, num_samples=6,
                  max_concurrent_trials=1)
    assert sorted(r["num_resets"] for r in results) == [0, 1, 2, 3, 4, 5]


@pytest.mark.slow  # six trials one after the other
@pytest.mark.parametrize("under", UNDER)
def test_actors_are_reused_by_trials_of_the_same_request(under, tmp_path, monkeypatch):
    """Six trials of three requests, one at a time (each takes every ``extra``): the second
    trial of each request reuses the first one's actor."""
    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "6")
    requests = [{"cpu": c, "custom_resources": {"extra": 4}} for c in (4, 2, 1, 2, 1, 4)]
    results = run(ResettableClass, under, tmp_path,
                  config={"required_resources": tune.grid_search(requests), "id": -1})
    assert sorted(r["num_resets"] for r in results) == [0, 0, 0, 1, 1, 1]
