"""Statistics over seeds: the geometric mean of ratios and its bootstrap 95% interval.

A speedup of one executor over another is a ratio of times (``slow / fast``) per seed. Ratios
multiply, so they are averaged on the log scale: the reported speedup is the geometric mean
``exp(mean(log r_i))`` of the per-seed ratios ``r_i``. Its 95% interval is a percentile
bootstrap over seeds: ``resamples`` times, draw as many seeds as there are with replacement,
take the geometric mean of the draw; the interval is the 2.5th and 97.5th percentiles of these
means. The resampling generator is seeded, so the same ratios always give the same interval.
With one seed there is nothing to resample: the interval is ``None`` (reported as ``null``).

Example:
    >>> round(geomean([1.0, 4.0]), 6)
    2.0
    >>> low, high = bootstrap_ci([1.0, 1.5, 2.0, 3.0])
    >>> low <= geomean([1.0, 1.5, 2.0, 3.0]) <= high
    True
    >>> bootstrap_ci([2.0]) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RESAMPLES = 10_000
LEVEL = 0.95
SEED = 0


def _positive(values: Sequence[float], name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers, got {values!r}")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {list(values)!r}")
    return x


def geomean(values: Sequence[float]) -> float:
    """Geometric mean ``exp(mean(log x))`` of positive ``values``."""
    return float(np.exp(np.mean(np.log(_positive(values, "values")))))


def bootstrap_ci(
    values: Sequence[float],
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval ``(low, high)`` of the geometric mean of ``values``.

    Deterministic given ``seed``. ``None`` for a single value (no spread to resample).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples!r}")
    logs = np.log(_positive(values, "values"))
    if logs.size == 1:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, logs.size, size=(resamples, logs.size))
    means = logs[idx].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(np.exp(low)), float(np.exp(high))


def summarize(ratios: Sequence[float]) -> tuple[float | None, tuple[float, float] | None]:
    """``(geometric mean, 95% interval)`` of per-seed ratios; ``(None, None)`` if none."""
    if not ratios:
        return None, None
    return geomean(ratios), bootstrap_ci(ratios)
