"""Packing and scaling limits c and d: from measured times and from the overheads."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fluid.core import (
    PolicyConfig,
    TrialSpec,
    c_from_alpha,
    d_from_beta,
    fit_alpha,
    fit_beta,
    packing_limit,
    scaling_limit,
)
from fluid.core.overheads import marginal_benefits
from fluid.core.tunables import DEFAULTS

O_TH, S_TH, C_MAX = DEFAULTS.makespan_o_th, DEFAULTS.s_th, DEFAULTS.makespan_c_max


def test_the_makespan_thresholds_are_policy_configs_defaults() -> None:
    assert (O_TH, S_TH, C_MAX) == (0.10, 0.05, 8)
    config = PolicyConfig()
    assert (config.o_th, config.s_th, config.c_max) == (O_TH, S_TH, C_MAX)


def test_packing_limit_from_measured_iteration_times() -> None:
    # O_2 = 1 - 1/2 * 1.2 = 0.4; O_3 = 1 - 2/3 * 1.9/1.2 < 0: two trials per GPU.
    assert packing_limit({1: 1.0, 2: 1.2, 3: 1.9}) == 2
    # Packing is free: every p adds throughput.
    assert packing_limit({1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}) == 4
    # The first extra trial halves speed: O_2 = 1 - 1/2 * 2 = 0.
    assert packing_limit({1: 1.0, 2: 2.0}) == 1


def test_packing_limit_uses_o_th_strictly() -> None:
    times = {1: 1.0, 2: 1.8}  # O_2 = 1 - 0.5 * 1.8 = 0.1 (up to round-off)
    assert packing_limit(times, o_th=0.2) == 1
    assert packing_limit(times, o_th=0.05) == 2
    # A later p that pays again does not count once one p did not pay.
    assert packing_limit({1: 1.0, 2: 2.0, 3: 2.0}, o_th=0.0) == 1


def test_scaling_limit_from_measured_gang_times() -> None:
    # Benefits of the 2nd, 3rd, 4th worker: 0.45, 0.236, 0.024 (< S_TH = 0.05).
    assert scaling_limit({1: 10.0, 2: 5.5, 3: 4.2, 4: 4.1}) == 3
    assert scaling_limit({1: 10.0, 2: 5.5, 3: 4.2, 4: 4.1}, s_th=0.01) == 4
    assert scaling_limit({1: 10.0}) == 1
    assert scaling_limit({1: 10.0, 2: 11.0}) == 1  # slower on two workers


@pytest.mark.parametrize("times", [{}, {2: 1.0}, {1: 1.0, 3: 2.0}, {1: 1.0, 2: 0.0}, {1: -1.0}])
def test_limits_reject_gaps_and_non_positive_times(times: dict[int, float]) -> None:
    with pytest.raises(ValueError, match="iter_times"):
        packing_limit(times)
    with pytest.raises(ValueError, match="iter_times"):
        scaling_limit(times)


def test_c_and_d_from_overheads() -> None:
    assert c_from_alpha(1.0) == C_MAX  # free packing: only the cap stops it
    assert c_from_alpha(1.0, c_max=3) == 3
    assert c_from_alpha(1.5) == 2  # O_2 = 0.25, O_3 = 0
    assert c_from_alpha(2.0) == 1  # O_2 = 0
    assert d_from_beta(1.0, d_max=16) == 16
    assert d_from_beta(1.1) == 7  # S_7 = 1 - 6/7 * 1.1 = 0.057, S_8 = 0.0375
    with pytest.raises(ValueError, match="alpha must be >= 1"):
        c_from_alpha(0.9)
    with pytest.raises(ValueError, match="beta must be >= 1"):
        d_from_beta(0.5)
    for bad in (math.inf, math.nan):  # inf once divided by zero here
        with pytest.raises(ValueError, match="alpha must be a finite number >= 1"):
            c_from_alpha(bad)
        with pytest.raises(ValueError, match="beta must be a finite number >= 1"):
            d_from_beta(bad)


@given(alpha=st.floats(1.0, 3.0), cap=st.integers(2, 64))
@settings(max_examples=200, deadline=None)
def test_paper_range_alpha_below_c_over_c_minus_one_iff_o_c_positive(
    alpha: float, cap: int
) -> None:
    """With O_th = 0: c = largest p with alpha < p / (p - 1), i.e. alpha in [1, c/(c-1))."""
    c = c_from_alpha(alpha, o_th=0.0, c_max=cap)
    assert 1 <= c <= cap
    # Stay off the exact boundaries, where round-off decides.
    assume(all(abs(alpha - p / (p - 1)) > 1e-9 for p in range(2, cap + 2)))
    if c > 1:
        assert alpha < c / (c - 1)  # O_c > 0
        assert 1 - (c - 1) / c * alpha > 0
    if c < cap:
        assert alpha >= (c + 1) / c  # O_(c+1) <= 0
        assert 1 - c / (c + 1) * alpha <= 0


@given(beta=st.floats(1.0, 3.0), cap=st.integers(2, 64))
@settings(max_examples=200, deadline=None)
def test_d_from_beta_with_zero_threshold(beta: float, cap: int) -> None:
    """With S_th = 0: d = largest w with beta < w / (w - 1) (S_w = 1 - (w-1)/w * beta > 0)."""
    d = d_from_beta(beta, s_th=0.0, d_max=cap)
    assume(all(abs(beta - w / (w - 1)) > 1e-9 for w in range(2, cap + 2)))
    if d > 1:
        assert beta < d / (d - 1)
    if d < cap:
        assert beta >= (d + 1) / d


@given(x=st.floats(1.0, 2.0), th=st.floats(0.0, 0.5), cap=st.integers(1, 40))
@settings(max_examples=200, deadline=None)
def test_limits_decrease_with_overhead_and_threshold(x: float, th: float, cap: int) -> None:
    c = c_from_alpha(x, th, cap)
    assert c_from_alpha(min(x * 1.05, 2.5), th, cap) <= c
    assert c_from_alpha(x, min(th + 0.05, 0.99), cap) <= c
    assert d_from_beta(x, th, cap) == c  # the same law for packing and scaling


@given(alpha=st.floats(1.0, 2.0), k=st.integers(1, 12), t1=st.floats(0.01, 10.0))
@settings(max_examples=150, deadline=None)
def test_measured_times_that_follow_the_model_give_the_model_limits(
    alpha: float, k: int, t1: float
) -> None:
    packed = {p: t1 * alpha ** (p - 1) for p in range(1, k + 1)}
    gang = {w: t1 / w * alpha ** (w - 1) for w in range(1, k + 1)}
    benefits = [1 - (p - 1) / p * alpha for p in range(2, k + 1)]
    # Off the threshold boundaries, measured and model limits agree.
    assume(all(abs(b - O_TH) > 1e-9 and abs(b - S_TH) > 1e-9 for b in benefits))
    assert packing_limit(packed) == c_from_alpha(alpha, c_max=k)
    assert scaling_limit(gang) == d_from_beta(alpha, d_max=k)
    # The marginal benefits are the paper's O_p = 1 - (p-1)/p * avg(T^p)/avg(T^(p-1)).
    thr = [p / packed[p] for p in packed]
    assert marginal_benefits(thr) == pytest.approx(benefits)


@given(alpha=st.floats(1.0, 2.0), beta=st.floats(1.0, 1.5), t1=st.floats(0.01, 10.0))
@settings(max_examples=100, deadline=None)
def test_fit_recovers_overheads_from_model_times(alpha: float, beta: float, t1: float) -> None:
    assert fit_alpha({p: t1 * alpha ** (p - 1) for p in range(1, 5)}) == pytest.approx(alpha)
    assert fit_beta({w: t1 / w * beta ** (w - 1) for w in range(1, 5)}) == pytest.approx(beta)
    assert fit_alpha({1: t1}) == 1.0  # one measurement: no overhead known
    assert fit_alpha({1: 1.0, 2: 0.8}) == 1.0  # faster when packed: clamped to 1


def test_policy_config_derives_c_and_d_per_trial_capped_by_the_groups() -> None:
    cheap, costly = TrialSpec("a", 1.0, alpha=1.0, beta=1.0), TrialSpec("b", 1.0, 1.5, 1.1)
    derived = PolicyConfig()
    assert derived.c_of(cheap) == C_MAX and derived.c_of(costly) == 2
    assert derived.d_of(cheap, 4) == 4  # never more than the GPUs there are
    assert derived.d_of(costly, 64) == 7
    group = PolicyConfig(c=3, d=2)
    # The group's c and d cap what alpha_i, beta_i allow: never more packed or wider than that.
    assert group.c_of(costly) == 2 and group.d_of(costly, 64) == 2
    assert group.c_of(cheap) == 3 and group.d_of(cheap, 64) == 2
    assert PolicyConfig(c=8, d=64).c_of(costly) == 2 and PolicyConfig(d=64).d_of(costly, 64) == 7
    assert group.c_of_all([costly, cheap]) == [group.c_of(costly), group.c_of(cheap)]
    own = TrialSpec("c", 1.0, alpha=1.5, c=5, d=6)
    assert group.c_of(own) == 5 and group.d_of(own, 64) == 6 and group.d_of(own, 4) == 4
    assert PolicyConfig(o_th=0.4).c_of(TrialSpec("d", 1.0, alpha=1.3)) == 1  # O_2 = 0.35
    assert PolicyConfig(o_th=0.3).c_of(TrialSpec("d", 1.0, alpha=1.3)) == 2  # O_3 = 0.13
    assert PolicyConfig(c_max=4).c_of(cheap) == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"c": 0}, "c must be >= 1"),
        ({"d": 0}, "d must be >= 1"),
        ({"eps": -1.0}, "eps must be >= 0"),
        ({"o_th": 1.0}, r"o_th must be in \[0, 1\)"),
        ({"s_th": -0.1}, r"s_th must be in \[0, 1\)"),
        ({"c_max": 0}, "c_max must be >= 1"),
        ({"gpu_memory": 0.0}, "gpu_memory must be > 0"),
    ],
)
def test_policy_config_rejects_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PolicyConfig(**kwargs)
