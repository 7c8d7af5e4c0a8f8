"""An overhead measured across trials, with an interval, and its shrinkage towards a prior.

Packing's cost is a ratio of iteration times: ``T^p = T^1 alpha^(p-1)`` (the paper's model),
so ``log T = log T^1 + x log alpha`` where ``x`` is how many other trials computed beside the
iteration on its GPU (averaged over its duration: a mate that joined half way counts a half).
Trials of one experiment differ in ``T^1`` (their configurations), so one trial run packed
says little by itself; across a wave of trials, some packed and the rest alone, the slope of
``log T`` on ``x`` estimates ``log alpha`` without any trial measured twice, and the spread
of the trials around that line is what its interval rests on (``exposure_slope``). Trials
packed at random (not by their configuration) make that slope the packing's cost, not the
cost of the configurations that happened to be packed.

The estimate is then weighed against the prior by their precisions (``shrink``): a prior of
``log alpha`` with a standard deviation, a measurement with its standard error; a wide
interval moves the prior little, a narrow one moves it almost all the way.

``config_numbers`` and ``config_covariates`` turn the trials' configs into the covariates the
slope is fitted beside; ``pooled_spread`` is how much an overhead differs across
configurations (the trials' own measurements pooled with a prior spread).

Example (four trials alone, four packed in pairs, packing costs 10%):
    >>> solo, packed = [1.0, 1.2, 0.9, 1.1], [1.1 * t for t in (1.05, 0.95, 1.15, 1.0)]
    >>> est = exposure_slope([0, 0, 0, 0, 1, 1, 1, 1], solo + packed)
    >>> round(est.value, 3), [round(v, 2) for v in est.interval()]
    (1.09, [0.91, 1.31])
    >>> post = shrink(LogEstimate.of(2.0, 0.354), est)
    >>> round(post.value, 3)
    1.119
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Two-sided 95% quantiles of Student's t by degrees of freedom (standard tables); beyond the
#: last, the normal's 1.96 is within 1% of them.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z975 = 1.96


def t975(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else Z975


@dataclass(frozen=True)
class LogEstimate:
    """An overhead in log space: ``mean`` (the log of the value), its standard error ``se``,
    the samples ``n`` it rests on and the degrees of freedom ``df`` of its interval
    (``0``: a normal interval, as for a prior)."""

    mean: float
    se: float
    n: int = 0
    df: int = 0

    @classmethod
    def of(cls, value: float, log_sd: float) -> LogEstimate:
        """A prior: ``value`` with a standard deviation of ``log_sd`` in log space."""
        return cls(math.log(value), log_sd)

    @property
    def value(self) -> float:
        """The estimate itself (``exp(mean)``)."""
        return math.exp(self.mean)

    def interval(self) -> tuple[float, float]:
        """The 95% interval of the value (Student's t on ``df`` degrees of freedom)."""
        half = (t975(self.df) if self.df else Z975) * self.se
        return math.exp(self.mean - half), math.exp(self.mean + half)


def exposure_slope(exposure: Sequence[float], times: Sequence[float],
                   covariates: Sequence[Sequence[float]] | None = None,
                   floor: float = 1.0) -> LogEstimate | None:
    """``alpha`` from iteration ``times`` of different trials at their ``exposure`` (the mean
    number of other trials computing beside each on its GPU): the least-squares slope of
    ``log time`` on exposure, its standard error from the residuals. ``covariates`` (a row per
    time: what the trials' configurations say of their speed, e.g. log batch size) enter the
    fit one at a time, the one that explains most of what is left first, and the fit whose
    slope is narrowest is kept: a configuration's own speed then no longer counts as noise.
    Each covariate examined counts against the residuals' degrees of freedom, taken or not
    (chosen on those very residuals, they would otherwise narrow the interval below 95%), so
    covariates are examined only where that leaves two degrees of freedom at least.
    ``None`` where the data cannot say: fewer than two trials mostly packed (exposure above a
    half) or two mostly alone (the spread of one side is then unknown: a single trial there
    would pass its configuration's speed for packing's). The value is at least ``floor``
    (packing never speeds a trial up).

    Example (one-GPU times set by a batch size, two of six trials packed at alpha 1.25):
        >>> x, b = [0, 1, 0, 1, 0, 0], [1, 1, 2, 2, 3, 3]
        >>> t = [2.0 ** k * 1.25 ** e for k, e in zip(b, x)]
        >>> exposure_slope(x, t).value  # the packed ones happen to be the fast configurations
        1.0
        >>> est = exposure_slope(x, t, [[k] for k in b])
        >>> round(est.value, 6), est.se < 1e-9, est.df
        (1.25, True, 3)
    """
    if len(exposure) != len(times):
        raise ValueError(f"exposure and times differ in length: {len(exposure)} != {len(times)}")
    t = np.asarray(times, dtype=float)
    if np.any(t <= 0):
        raise ValueError("times must be > 0 seconds")
    x = np.asarray(exposure, dtype=float)
    n = len(x)
    packed = int(np.sum(x > 0.5))
    if min(packed, n - packed) < 2:
        return None  # one trial on a side is its configuration's speed as much as packing's
    y = np.log(t)
    design, z = np.column_stack([np.ones(n), x]), _informative(covariates, n)
    # Without two degrees of freedom left after every covariate: the slope and intercept alone
    # (which leave n - 2 >= 2: two trials a side).
    df = n - 2 - z.shape[1]
    if df < 2:
        z, df = z[:, :0], n - 2
    slope, var, _ = _fit(design, y)
    left = list(range(z.shape[1]))
    while left:  # the one that explains most of what is left first; the narrowest slope kept
        wider = {j: np.column_stack([design, z[:, j]]) for j in left}
        fits = {j: _fit(d, y) for j, d in wider.items()}
        j = min(fits, key=lambda i: fits[i][2])
        left.remove(j)
        if np.linalg.matrix_rank(wider[j]) <= design.shape[1]:
            continue  # collinear with those taken
        design = wider[j]
        if fits[j][1] < var:
            slope, var, _ = fits[j]
    return LogEstimate(max(slope, math.log(floor)), math.sqrt(var / df), n, df)


def _fit(design: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least squares of ``y`` on ``design`` (intercept, exposure, covariates): the exposure's
    coefficient, ``(X'X)^-1`` at it times the residual sum of squares (the coefficient's
    variance once divided by the degrees of freedom), and that sum."""
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    resid = y - design @ coef
    rss = float(resid @ resid)
    return float(coef[1]), max(float(np.linalg.pinv(design.T @ design)[1, 1]), 0.0) * rss, rss


def _informative(covariates: Sequence[Sequence[float]] | None, n: int) -> np.ndarray:
    """The covariates' columns that vary, as an ``(n, k)`` array (``k`` may be 0)."""
    if covariates is None or not len(covariates):
        return np.zeros((n, 0))
    z = np.asarray(covariates, dtype=float).reshape(n, -1)
    keep = [j for j in range(z.shape[1]) if float(np.ptp(z[:, j])) > 1e-12]
    return z[:, keep]


def shrink(prior: LogEstimate, measured: LogEstimate | None) -> LogEstimate:
    """``measured`` weighed against ``prior`` by their precisions (a normal prior on the log
    of the overhead, a normal likelihood): the posterior mean and standard deviation. A
    measurement with no spread at all is taken as it is; none leaves the prior.

    Example (a measurement as precise as the prior: half way, in log space):
        >>> post = shrink(LogEstimate.of(2.0, 0.2), LogEstimate.of(1.0, 0.2))
        >>> round(post.value, 4), round(post.se, 4)
        (1.4142, 0.1414)
    """
    if measured is None:
        return prior
    if measured.se <= 0:
        return measured
    wp, wm = 1.0 / prior.se ** 2, 1.0 / measured.se ** 2
    mean = (wp * prior.mean + wm * measured.mean) / (wp + wm)
    return LogEstimate(mean, math.sqrt(1.0 / (wp + wm)), measured.n, measured.df)


def combine(estimates: Sequence[LogEstimate | None]) -> LogEstimate | None:
    """Independent estimates of one overhead as one, each weighed by its precision (a
    standard error of zero: that one alone); ``None`` when there is none.

    Example:
        >>> est = combine([LogEstimate(0.0, 0.1, 4, 3), None, LogEstimate(0.3, 0.1, 6, 5)])
        >>> round(est.mean, 3), round(est.se, 4), est.n, est.df
        (0.15, 0.0707, 10, 8)
    """
    known = [e for e in estimates if e is not None]
    if not known:
        return None
    exact = [e for e in known if e.se <= 0]
    if exact:
        return exact[0]
    weights = [1.0 / e.se ** 2 for e in known]
    mean = sum(w * e.mean for w, e in zip(weights, known, strict=True)) / sum(weights)
    return LogEstimate(mean, math.sqrt(1.0 / sum(weights)), sum(e.n for e in known),
                       sum(e.df for e in known))


def pooled_spread(values: Sequence[float], prior: float, prior_weight: float) -> float:
    """The standard deviation of ``log values`` pooled with a ``prior`` one that counts as
    ``prior_weight`` samples (their variances weighed by degrees of freedom); the prior alone
    for fewer than two values.

    Example (three values that differ by about 5%, against a prior of 0.1 worth one sample):
        >>> round(pooled_spread([1.0, 1.05, 1.1], 0.1, 1.0), 3)
        0.07
    """
    if len(values) < 2:
        return prior
    logs = np.log(np.asarray(values, dtype=float))
    df = len(logs) - 1
    variance = (prior_weight * prior ** 2 + df * float(logs.var(ddof=1))) / (prior_weight + df)
    return math.sqrt(variance)


def mean_of_logs(values: Sequence[float]) -> LogEstimate | None:
    """The mean of ``log values`` with its standard error (``n - 1`` degrees of freedom);
    ``None`` for fewer than two values (a spread needs two).

    Example:
        >>> est = mean_of_logs([1.1, 1.2, 1.15])
        >>> round(est.value, 3), est.n, est.df
        (1.149, 3, 2)
    """
    if len(values) < 2:
        return None
    logs = np.log(np.asarray(values, dtype=float))
    return LogEstimate(float(logs.mean()), float(logs.std(ddof=1)) / math.sqrt(len(logs)),
                       len(logs), len(logs) - 1)


def config_numbers(config: Any, prefix: str = "") -> dict[str, float]:
    """The numeric values of a trial's config, nested keys joined by ``/``.

    Example:
        >>> config_numbers({"lr": 0.1, "net": {"width": 64, "act": "relu"}, "deep": True})
        {'lr': 0.1, 'net/width': 64.0}
    """
    out: dict[str, float] = {}
    for key, value in (config or {}).items() if isinstance(config, dict) else ():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(config_numbers(value, f"{name}/"))
        elif (isinstance(value, numbers.Real) and not isinstance(value, bool)
              and math.isfinite(value)):  # numpy's too (a ConfigSpace searcher's choices)
            out[name] = float(value)
    return out


def config_covariates(numbers: list[dict[str, float]]) -> list[list[float]]:
    """What the trials' configs (``config_numbers``) say of their speed, a row per trial for
    ``exposure_slope``: every number all of them have, on a log scale where all are positive
    (a batch size, a width: iteration times scale with their ratios)."""
    keys = sorted(set.intersection(*(set(n) for n in numbers))) if numbers else []
    logs = {k for k in keys if all(n[k] > 0 for n in numbers)}
    return [covariate_row(n, keys, logs) for n in numbers]


def covariate_row(numbers: dict[str, float], keys: Sequence[str],
                  logs: Collection[str]) -> list[float]:
    """One trial's row of ``config_covariates``: its number of each of ``keys``, the log of
    those in ``logs``."""
    return [math.log(numbers[k]) if k in logs else numbers[k] for k in keys]
