"""The one registry of tuning algorithms, used by the simulator and the experiments alike."""

from __future__ import annotations

import doctest

import pytest

import fluid.algorithms
from fluid.algorithms import (
    ALGORITHMS,
    AlgorithmOptions,
    build_scheduler,
    build_searcher,
    num_samples,
)


def test_docstring_examples():
    assert doctest.testmod(fluid.algorithms).failed == 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("adapted", [True, False])
def test_every_scheduler_counts_iterations(algorithm, adapted):
    sched = build_scheduler(algorithm, AlgorithmOptions(max_t=9, mutations={"lr": [0.1, 0.2]}),
                            adapted=adapted, log_config=False)  # fmt: skip
    if algorithm in ("grid", "random", "hyperopt"):
        assert sched is None
        return
    assert sched._time_attr == "training_iteration"
    fluid_class = type(sched).__module__.startswith("fluid.schedulers")
    assert fluid_class == (adapted or algorithm == "syncbohb")


def test_pbt_interval_defaults_to_a_ninth_of_max_t():
    def interval(**kw):
        options = AlgorithmOptions(mutations={"lr": [0.1, 0.2]}, **kw)
        return build_scheduler("pbt", options, log_config=False)._perturbation_interval

    assert (interval(max_t=27), interval(max_t=4)) == (3, 1)
    assert interval(max_t=27, perturbation_interval=5) == 5


def test_searchers_and_samples():
    assert type(build_searcher("bohb", seed=1)).__name__ == "TuneBOHB"
    assert type(build_searcher("hyperopt", seed=1)).__name__ == "HyperOptSearch"
    assert build_searcher("asha") is None
    assert (num_samples("grid", 64), num_samples("asha", 64)) == (1, 64)


def test_bad_names_and_options_are_clear_errors():
    with pytest.raises(ValueError, match="unknown algorithm 'sgd'; known: grid, random"):
        build_scheduler("sgd", AlgorithmOptions(max_t=3))
    with pytest.raises(ValueError, match="max_t"):
        AlgorithmOptions(max_t=0)
    with pytest.raises(ValueError, match="reduction_factor"):
        AlgorithmOptions(max_t=3, reduction_factor=1)
