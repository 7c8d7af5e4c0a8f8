"""The runtime model h_i(w) (paper section 4.2.2) and TrialSpec validation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings

from fluid.core import TrialSpec, allowed_widths, slowdown
from fluid.core.model import gpus_of, is_packed

from .strategies import alphas, betas, runtimes


def test_packed_runtime_is_alpha_to_the_one_over_w_minus_one() -> None:
    spec = TrialSpec("t", runtime=10.0, alpha=1.5)
    assert spec.runtime_at(0.5) == pytest.approx(15.0)  # 1.5 ** 1
    assert spec.runtime_at(1 / 3) == pytest.approx(22.5)  # 1.5 ** 2
    assert spec.runtime_at(0.25) == pytest.approx(10 * 1.5**3)


def test_gang_runtime_is_h_over_w_times_beta_to_the_w_minus_one() -> None:
    spec = TrialSpec("t", runtime=30.0, beta=1.1)
    assert spec.runtime_at(1) == 30.0
    assert spec.runtime_at(2) == pytest.approx(30 / 2 * 1.1)
    assert spec.runtime_at(4) == pytest.approx(30 / 4 * 1.1**3)


def test_no_overheads_packing_is_free_and_scaling_is_linear() -> None:
    spec = TrialSpec("t", runtime=12.0)
    assert [spec.runtime_at(w) for w in (0.25, 0.5, 1, 2, 3)] == [12.0, 12.0, 12.0, 6.0, 4.0]


@given(h=runtimes, alpha=alphas, beta=betas)
@settings(max_examples=100, deadline=None)
def test_model_is_continuous_at_one_gpu_and_overheads_only_slow_down(
    h: float, alpha: float, beta: float
) -> None:
    spec = TrialSpec("t", h, alpha, beta)
    assert spec.runtime_at(1.0) == pytest.approx(h)
    assert spec.runtime_at(1 - 1e-12) == pytest.approx(h)  # the packed branch meets it
    for k in range(2, 9):
        assert spec.runtime_at(1 / k) >= h * (1 - 1e-12)  # packing never speeds a trial up
        assert spec.runtime_at(1 / k) >= spec.runtime_at(1 / (k - 1)) * (1 - 1e-12)
    for w in range(1, 9):
        assert spec.runtime_at(w) >= h / w * (1 - 1e-12)  # no super-linear scaling
        assert spec.slowdown(w) == pytest.approx(slowdown(w, alpha, beta))


def test_slowdown_rejects_non_positive_width() -> None:
    for w in (0, -1):
        with pytest.raises(ValueError, match="width must be > 0"):
            slowdown(w)


def test_packed_and_gang_helpers() -> None:
    assert is_packed(0.5) and is_packed(1 / 8)
    assert not is_packed(1.0) and not is_packed(1 - 1e-12) and not is_packed(3.0)
    assert [gpus_of(w) for w in (0.25, 1.0, 3.0)] == [0, 1, 3]


def test_allowed_widths() -> None:
    assert allowed_widths(4, 3) == [0.25, 1 / 3, 0.5, 1.0, 2.0, 3.0]
    assert allowed_widths(1, 1) == [1.0]
    assert allowed_widths(2, 8, n=3) == [0.5, 1.0, 2.0, 3.0]  # never more GPUs than exist


def test_with_runtime_keeps_everything_else() -> None:
    spec = TrialSpec("t", 10.0, alpha=1.2, beta=1.1, c=3, d=2, memory=4.0)
    other = spec.with_runtime(2.5)
    assert other.runtime == 2.5 and other.runtime_at(2) == pytest.approx(2.5 / 2 * 1.1)
    assert (other.id, other.alpha, other.beta, other.c, other.d, other.memory) == (
        "t",
        1.2,
        1.1,
        3,
        2,
        4.0,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"runtime": 0.0}, "runtime must be > 0"),
        ({"runtime": -3.0}, "runtime must be > 0"),
        ({"runtime": math.nan}, "runtime must be a finite number"),
        ({"runtime": math.inf}, "runtime must be a finite number"),
        ({"runtime": "30"}, "runtime must be a finite number"),
        ({"runtime": 1.0, "alpha": 0.99}, "alpha must be >= 1"),
        ({"runtime": 1.0, "alpha": math.nan}, "alpha must be a finite number >= 1, got nan"),
        ({"runtime": 1.0, "alpha": math.inf}, "alpha must be a finite number >= 1, got inf"),
        ({"runtime": 1.0, "beta": math.inf}, "beta must be a finite number >= 1, got inf"),
        ({"runtime": 1.0, "c": 2.5}, "c must be None or an integer >= 1, got 2.5"),
        ({"runtime": 1.0, "beta": 0.5}, "beta must be >= 1"),
        ({"runtime": 1.0, "c": 0}, "c must be >= 1"),
        ({"runtime": 1.0, "d": 0}, "d must be >= 1"),
        ({"runtime": 1.0, "memory": 0.0}, "memory must be > 0"),
    ],
)
def test_trialspec_rejects_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrialSpec("t", **kwargs)


def test_with_runtime_copies_the_checked_fields_and_checks_the_runtime() -> None:
    spec = TrialSpec("t", 4.0, alpha=1.5, beta=1.2, c=2, d=3, memory=8.0, w_min=0.5)
    other = spec.with_runtime(2.5)
    assert other == TrialSpec("t", 2.5, alpha=1.5, beta=1.2, c=2, d=3, memory=8.0, w_min=0.5)
    assert spec.runtime == 4.0 and hash(other) == hash(TrialSpec(**{**vars(other)}))
    with pytest.raises(ValueError, match="runtime must be > 0"):
        spec.with_runtime(0.0)
    assert spec.with_runtime(3).runtime == 3  # an int goes through the usual checks
