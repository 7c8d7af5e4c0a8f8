"""``fluid.sim.stats``: geometric mean and bootstrap interval of per-seed ratios."""

from __future__ import annotations

import math

import pytest

from fluid.sim.stats import bootstrap_ci, geomean, summarize


def test_geomean_of_known_values():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([0.5, 2.0]) == pytest.approx(1.0)
    assert geomean([3.0]) == pytest.approx(3.0)
    assert geomean([1.0, 10.0, 100.0]) == pytest.approx(10.0)


def test_geomean_is_below_the_arithmetic_mean_of_unequal_ratios():
    xs = [0.3, 1.4, 2.9]
    assert geomean(xs) < sum(xs) / len(xs)


@pytest.mark.parametrize("bad", [[], [1.0, 0.0], [-1.0], [1.0, math.inf], [math.nan]])
def test_geomean_rejects_what_is_not_a_positive_ratio(bad):
    with pytest.raises(ValueError, match="values"):
        geomean(bad)


def test_interval_contains_the_mean_and_lies_within_the_data():
    xs = [0.29, 0.8, 1.1, 1.35, 1.6, 2.91, 1.0, 1.2, 0.9, 1.4]
    low, high = bootstrap_ci(xs)
    assert min(xs) <= low < geomean(xs) < high <= max(xs)


def test_interval_is_deterministic_given_its_seed():
    xs = [0.5, 1.2, 1.9, 1.1, 0.8, 2.3, 1.4]
    assert bootstrap_ci(xs, seed=3) == bootstrap_ci(xs, seed=3)
    # the seed is used: another seed draws other resamples
    assert bootstrap_ci(xs, resamples=100, seed=3) != bootstrap_ci(xs, resamples=100, seed=4)


def test_interval_narrows_as_the_level_falls():
    xs = [0.5, 1.2, 1.9, 1.1, 0.7, 1.5]
    lo95, hi95 = bootstrap_ci(xs, level=0.95)
    lo50, hi50 = bootstrap_ci(xs, level=0.5)
    assert lo95 <= lo50 and hi50 <= hi95 and (hi50 - lo50) < (hi95 - lo95)


def test_equal_ratios_give_a_point_interval():
    low, high = bootstrap_ci([1.5, 1.5, 1.5])
    assert low == pytest.approx(1.5) and high == pytest.approx(1.5)


def test_single_seed_has_no_interval():
    assert bootstrap_ci([1.7]) is None
    assert summarize([1.7]) == (pytest.approx(1.7), None)
    assert summarize([]) == (None, None)


@pytest.mark.parametrize(("kw", "name"), [({"level": 1.0}, "level"), ({"resamples": 0}, "resamples")])
def test_bad_options_name_the_parameter(kw, name):
    with pytest.raises(ValueError, match=name):
        bootstrap_ci([1.0, 2.0], **kw)
