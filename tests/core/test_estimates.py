"""The packing estimate across trials, its interval and its shrinkage (``fluid.core.estimates``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fluid.core.estimates import (
    LogEstimate,
    combine,
    config_numbers,
    exposure_slope,
    mean_of_logs,
    shrink,
    t975,
)


def _wave(alpha: float, packed: int, alone: int, spread: float, seed: int = 0):
    """Iteration times of trials whose one-GPU times differ by configuration (log-normal
    ``spread``), ``packed`` of them beside one other trial."""
    rng = np.random.default_rng(seed)
    base = np.exp(rng.normal(0.0, spread, packed + alone))
    x = [1.0] * packed + [0.0] * alone
    return x, [float(b * alpha ** e) for b, e in zip(base, x, strict=True)]


@pytest.mark.parametrize("alpha", [1.0, 1.05, 1.3, 1.6])
def test_the_interval_covers_the_packing_cost_about_as_often_as_it_says(alpha) -> None:
    covered = 0
    for seed in range(200):
        est = exposure_slope(*_wave(alpha, 4, 6, 0.3, seed))
        low, high = est.interval()
        covered += low <= alpha <= high or (alpha == 1.0 and est.value == 1.0)
    assert covered >= 0.9 * 200  # 95% nominal; the floor at 1 only widens it


def test_more_trials_narrow_the_interval() -> None:
    widths = []
    for n in (4, 16, 64):
        low, high = exposure_slope(*_wave(1.2, n, n, 0.3)).interval()
        widths.append(math.log(high / low))
    assert widths[0] > widths[1] > widths[2]


def test_a_mate_there_for_half_the_iteration_counts_half() -> None:
    x = [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]
    est = exposure_slope(x, [2.0 * 1.5 ** e for e in x])
    assert est.value == pytest.approx(1.5) and est.se == pytest.approx(0.0, abs=1e-12)


def test_the_data_that_cannot_say_gives_no_estimate_and_bad_input_is_named() -> None:
    assert exposure_slope([0, 1], [1.0, 1.1]) is None  # no residual to say the spread
    assert exposure_slope([1, 1, 1], [1.0, 1.1, 1.2]) is None  # nobody ran alone
    # one trial alone: its configuration's speed would pass for packing's
    assert exposure_slope([0, 1, 1, 1], [1.0, 1.5, 1.6, 1.55]) is None
    with pytest.raises(ValueError, match="times"):
        exposure_slope([0, 1, 0], [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="length"):
        exposure_slope([0, 1], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="df"):
        t975(0)


def test_packing_never_measures_faster_than_alone() -> None:
    x, t = _wave(1.0, 3, 3, 0.0)
    est = exposure_slope(x, [v * (0.9 if e else 1.0) for v, e in zip(t, x, strict=True)])
    assert est.value == 1.0


def test_shrinkage_follows_the_interval_not_a_fixed_weight() -> None:
    prior = LogEstimate.of(2.0, 0.354)
    wide = shrink(prior, LogEstimate(math.log(1.05), 0.5, 4, 2))
    narrow = shrink(prior, LogEstimate(math.log(1.05), 0.02, 40, 38))
    assert 1.05 < narrow.value < 1.06 < wide.value < 2.0
    assert narrow.se < wide.se < prior.se
    assert shrink(prior, None) is prior


def test_estimates_combine_by_precision() -> None:
    a, b = LogEstimate(0.0, 0.1, 3, 2), LogEstimate(0.4, 0.3, 3, 2)
    both = combine([a, b])
    assert 0.0 < both.mean < 0.2 and both.se < a.se and both.n == 6
    assert combine([None]) is None and combine([a]) == a
    assert mean_of_logs([1.2]) is None
    assert mean_of_logs([1.1, 1.1 * 1.21]).value == pytest.approx(1.21)


def test_what_configurations_say_of_their_speed_narrows_the_interval() -> None:
    # One-GPU times set by a batch size (2x per doubling) and a small per-trial luck: the
    # batch size, given as a covariate, no longer counts as noise.
    rng = np.random.default_rng(3)
    batch = rng.choice([32, 64, 128, 256, 512], 16)
    x = [1.0 if k % 2 else 0.0 for k in range(16)]
    t = [b / 32 * 1.1 ** e * math.exp(rng.normal(0, 0.02)) for b, e in zip(batch, x, strict=True)]
    plain = exposure_slope(x, t)
    adjusted = exposure_slope(x, t, [[math.log(b)] for b in batch])
    assert adjusted.se < plain.se / 5 and adjusted.df == plain.df - 1
    low, high = adjusted.interval()
    assert low < 1.1 < high and high / low < 1.1


def test_covariates_that_would_eat_the_residuals_are_left_out() -> None:
    x, t = [0, 1, 0, 1], [1.0, 1.2, 1.1, 1.3]
    alone = exposure_slope(x, t)
    assert alone is not None
    assert exposure_slope(x, t, [[1, 2, 3], [2, 1, 3], [3, 3, 1], [1, 1, 1]]) == alone
    assert exposure_slope(x, t, [[5], [5], [5], [5]]) == alone  # a constant says nothing
    assert exposure_slope(x, t, [[0], [1], [0], [1]]) == alone  # collinear with exposure


def _configured_wave(n: int, relevant: int, rng: np.random.Generator):
    """``n`` trials, four packed at alpha 1.3, seven config numbers of which the first
    ``relevant`` set the one-GPU time (the others say nothing of it)."""
    x = np.array([1.0] * 4 + [0.0] * (n - 4))
    z = rng.normal(size=(n, 7))
    log_t = 0.8 * z[:, :relevant].sum(axis=1) + math.log(1.3) * x + rng.normal(0, 0.1, n)
    return list(x), [float(v) for v in np.exp(log_t)], z.tolist()


@pytest.mark.parametrize(("n", "relevant"), [(12, 0), (12, 2), (16, 3), (40, 3)])
def test_covariates_chosen_on_the_residuals_keep_the_interval_honest(n, relevant) -> None:
    # Which config numbers explain the times is chosen on the same residuals the interval
    # rests on: with seven to choose from and a dozen trials, it still covers about 95%.
    rng = np.random.default_rng(n + relevant)
    covered = 0
    for _ in range(300):
        low, high = exposure_slope(*_configured_wave(n, relevant, rng)).interval()
        covered += low <= 1.3 <= high
    assert covered >= 0.9 * 300


def test_the_covariates_that_matter_enter_before_all_of_them_fit() -> None:
    # Twelve trials cannot fit seven covariates beside two degrees of freedom per covariate,
    # but the two that set the times enter: the interval is a fraction of the plain fit's.
    rng = np.random.default_rng(1)
    x, t, z = _configured_wave(12, 2, rng)
    plain, adjusted = exposure_slope(x, t), exposure_slope(x, t, z)
    assert adjusted.df == 12 - 2 - 7
    low, high = adjusted.interval()
    assert low < 1.3 < high and high / low < 2.0
    assert adjusted.se < plain.se / 3


def test_numpy_numbers_of_a_config_are_covariates_as_python_ones_are() -> None:
    # A ConfigSpace searcher (BOHB) hands its integer choices as numpy integers: a batch
    # size so given must still explain a configuration's speed; flags and names do not.
    config = {"batch_size": np.int64(64), "lr": np.float32(0.5), "deep": {"width": 256},
              "flag": True, "np_flag": np.bool_(True), "cell": "LSTM", "nan": float("nan")}
    assert config_numbers(config) == {"batch_size": 64.0, "lr": 0.5, "deep/width": 256.0}
