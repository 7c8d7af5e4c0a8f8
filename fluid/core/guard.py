"""The guard of the time-to-target policy: a plan never delays the trials that lead.

Users wait for the best trial, so a plan is judged by the predicted *time to target* of the
trials the tuning algorithm waits on or that lead (``leaders``): the latest end among them,
``max_i h_i(w_i) + cost_i`` with ``h_i(w)`` the model of ``fluid.core.model`` under each
trial's own ``alpha_i``, ``beta_i``, and ``cost_i = eps`` for a trial the plan resizes.

* ``plain_time``: every leader alone on one GPU, as plain Tune runs it (``h_i(1)``);
* ``plan_time``: the leaders at the plan's widths, plus ``eps`` for each one it resizes;
* ``is_safe``: a plan is applied only if its time is no later than what the leaders have now
  (their current widths, nothing resized) and, for a fresh plan, than plain Tune's.

Example:
    >>> a = TrialSpec("a", 100.0, alpha=2.0, beta=1.2)
    >>> is_safe({"a": a}, {"a": 2.0}, {"a": 1.0}, {"a"}, eps=5.0)
    True
    >>> is_safe({"a": a}, {"a": 0.5}, {"a": 1.0}, {"a"}, eps=5.0)
    False
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from fluid.core.model import TrialSpec
from fluid.core.tolerances import TIME_TOL, WIDTH_TOL


def plan_time(specs: Mapping[str, TrialSpec], widths: Mapping[str, float],
              current: Mapping[str, float] | None, leaders: Collection[str], eps: float) -> float:
    """Latest predicted end of the ``leaders`` at ``widths`` (``eps`` added for each leader
    whose width differs from ``current``; ``current=None``: nothing is running yet)."""
    ends = [0.0]
    for tid in leaders:
        w = widths[tid]
        moved = current is not None and abs(current[tid] - w) > WIDTH_TOL
        ends.append(specs[tid].runtime_at(w) + (eps if moved else 0.0))
    return max(ends)


def plain_time(specs: Mapping[str, TrialSpec], leaders: Collection[str]) -> float:
    """Latest end of the ``leaders`` each alone on one GPU (plain Tune): ``max h_i(1)``."""
    return max([0.0] + [specs[tid].runtime_at(1.0) for tid in leaders])


def is_safe(specs: Mapping[str, TrialSpec], widths: Mapping[str, float],
            current: Mapping[str, float] | None, leaders: Collection[str], eps: float,
            tol: float = TIME_TOL) -> bool:
    """Whether a plan may be applied: the ``leaders`` end no later than they would now
    (``current``, or plain Tune's one GPU each for a group not running yet)."""
    new = plan_time(specs, widths, current, leaders, eps)
    before = (plain_time(specs, leaders) if current is None
              else plan_time(specs, current, current, leaders, eps))
    return new <= before * (1 + tol) + tol
