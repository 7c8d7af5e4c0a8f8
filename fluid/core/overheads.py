"""Packing and scaling limits ``c`` and ``d`` and the overheads ``alpha``, ``beta`` (section 4.2.2).

Both limits come from one notion, the *marginal benefit* of one more unit of parallelism: the
share of aggregate throughput that the k-th unit adds, ``1 - thr(k-1) / thr(k)``.

* Packing ``p`` trials on one GPU, each taking ``T^p`` seconds an iteration, gives aggregate
  throughput ``p / avg(T^p)``, so the marginal benefit is the paper's
  ``O_p = 1 - (p-1)/p * avg(T^p) / avg(T^(p-1))``; ``c`` is the largest ``p`` with
  ``O_p > O_th`` (for every ``p' <= p``).
* A gang of ``w`` workers taking ``T_w`` seconds an iteration has throughput ``1 / T_w``; the
  marginal benefit of the w-th worker is ``1 - T_w / T_(w-1)``; ``d`` is the largest ``w`` with
  that benefit above ``S_th``.

Under the runtime model the two read ``O_p = 1 - (p-1)/p * alpha`` and
``S_w = 1 - (w-1)/w * beta``, so ``c`` and ``d`` also follow from ``alpha`` and ``beta`` alone
(the paper's ranges ``alpha in [1, c/(c-1))``, ``beta in [1, 1 + 1/d)`` are the case of a zero
threshold).

The thresholds default to a group's makespan objective (``Tunables.makespan_o_th``,
``s_th``, ``makespan_c_max``, each with its reason).

Example:
    >>> c_from_alpha(1.0)
    8
    >>> c_from_alpha(1.5)
    2
    >>> c_from_alpha(2.0)
    1
    >>> d_from_beta(1.1)
    7
    >>> packing_limit({1: 1.0, 2: 1.2, 3: 1.9})
    2
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

from fluid.core.checks import check_number
from fluid.core.tunables import DEFAULTS


def marginal_benefits(throughputs: Sequence[float]) -> list[float]:
    """``[1 - thr[k-1] / thr[k]]`` for ``k = 1 .. len-1``; ``throughputs[0]`` is at one unit."""
    for k, t in enumerate(throughputs):
        if not t > 0:
            raise ValueError(f"throughput at {k + 1} must be > 0, got {t}")
    return [1.0 - throughputs[k - 1] / throughputs[k] for k in range(1, len(throughputs))]


def limit_from_throughputs(throughputs: Sequence[float], threshold: float) -> int:
    """Largest ``k`` (1-based) such that every unit up to ``k`` adds more than ``threshold``."""
    k = 1
    for benefit in marginal_benefits(throughputs):
        if benefit <= threshold:
            break
        k += 1
    return k


def _dense(times: Mapping[int, float], what: str) -> list[float]:
    keys = sorted(times)
    if not keys or keys[0] != 1 or keys != list(range(1, len(keys) + 1)):
        raise ValueError(f"{what} must be measured at 1, 2, ..., k without gaps, got {keys}")
    for k in keys:
        if not times[k] > 0:
            raise ValueError(f"{what}[{k}] must be > 0 seconds, got {times[k]}")
    return [times[k] for k in keys]


def packing_limit(iter_times: Mapping[int, float], o_th: float = DEFAULTS.makespan_o_th) -> int:
    """``c`` from ``avg(T^p)``: mean per-iteration time when ``p`` trials share one GPU."""
    t = _dense(iter_times, "iter_times")
    return limit_from_throughputs([p / tp for p, tp in enumerate(t, start=1)], o_th)


def scaling_limit(iter_times: Mapping[int, float], s_th: float = DEFAULTS.s_th) -> int:
    """``d`` from ``T_w``: per-iteration time of one trial on a gang of ``w`` workers."""
    t = _dense(iter_times, "iter_times")
    return limit_from_throughputs([1.0 / tw for tw in t], s_th)


@functools.lru_cache(maxsize=1 << 16)
def _limit_from_overhead(x: float, threshold: float, cap: int, name: str = "overhead") -> int:
    # Throughput at k units under the model is k / x**(k-1) for both packing and scaling.
    # Same arithmetic as limit_from_throughputs over [k / x**(k-1) for k in 1..cap], but it
    # stops at the first unit that does not pay (O(answer), not O(cap)) and is cached: the
    # policy asks for c_i and d_i of every trial several times per plan.
    check_number(name, x, 1)
    k, prev = 1, 1.0
    for j in range(2, cap + 1):
        cur = j / x ** (j - 1)
        if 1.0 - prev / cur <= threshold:
            break
        k, prev = k + 1, cur
    return k


def c_from_alpha(alpha: float, o_th: float = DEFAULTS.makespan_o_th,
                 c_max: int = DEFAULTS.makespan_c_max) -> int:
    """``c`` implied by packing overhead ``alpha`` under the model, at most ``c_max``."""
    return _limit_from_overhead(alpha, o_th, c_max, "alpha")


def d_from_beta(beta: float, s_th: float = DEFAULTS.s_th, d_max: int = 64) -> int:
    """``d`` implied by scaling overhead ``beta`` under the model, at most ``d_max``."""
    return _limit_from_overhead(beta, s_th, d_max, "beta")


def _fit_exponent(ratios: Mapping[int, float]) -> float:
    # Least squares through the origin of log(ratio_k) = (k - 1) * log(x).
    num = sum((k - 1) * math.log(r) for k, r in ratios.items() if k > 1)
    den = sum((k - 1) ** 2 for k in ratios if k > 1)
    if den == 0:
        return 1.0
    return max(1.0, math.exp(num / den))


def fit_alpha(iter_times: Mapping[int, float]) -> float:
    """``alpha`` from per-iteration times at ``p`` trials per GPU: ``T^p = T^1 alpha^(p-1)``."""
    t = _dense(iter_times, "iter_times")
    return _fit_exponent({p: tp / t[0] for p, tp in enumerate(t, start=1)})


def fit_beta(iter_times: Mapping[int, float]) -> float:
    """``beta`` from per-iteration times on ``w`` workers: ``T_w = T_1 / w * beta^(w-1)``."""
    t = _dense(iter_times, "iter_times")
    return _fit_exponent({w: w * tw / t[0] for w, tw in enumerate(t, start=1)})
