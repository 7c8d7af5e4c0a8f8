"""The same seed gives the same numbers whatever ran before it in the process."""

from __future__ import annotations

import pytest

from fluid.sim import compare, get_workload

#: Wall-clock fields: they differ between runs.
WALL_CLOCK = ("sim_seconds", "hook_seconds")


def _numbers(comp):
    return [{k: v for k, v in r.public().items() if k not in WALL_CLOCK} for r in comp.results]


@pytest.mark.parametrize("algorithm", ["hyperband", "bohb", "pbt"])
def test_a_cell_run_twice_with_another_in_between_gives_identical_numbers(algorithm):
    cifar = get_workload("cifar10")
    cifar.max_t = 9
    cell = {"algorithm": algorithm, "workload": cifar, "gpus": 4, "seeds": [2],
            "executors": ("tune", "fluid"), "samples": 12}
    first = compare(**cell)
    other = get_workload("synthetic", iter_time=5.0, max_t=9, trials=6)
    compare("pbt", other, 4, [0], ("tune", "fluid"), samples=6)  # draws from global random
    compare("hyperband", cifar, 4, [0, 1], ("fluid",), samples=18)  # other brackets, trials
    again = compare(**cell)
    assert _numbers(again) == _numbers(first)
    assert again.speedup_stats() == first.speedup_stats()
