"""The runtime model of a trial as a function of its width (paper section 4.2.2).

A trial ``i`` has ``h_i1``, its remaining runtime on exactly one GPU. At width ``w``::

    h_i(w) = h_i1 * alpha_i ** (1/w - 1)        0 < w < 1   (packed on a shared GPU)
    h_i(w) = h_i1 / w * beta_i ** (w - 1)       1 <= w <= d (data-parallel gang)

``alpha >= 1`` is the packing overhead and ``beta >= 1`` the scaling overhead. ``alpha = 1``
means packing costs nothing (the GPU was mostly idle), ``beta = 1`` means linear scaling.

Widths Fluid uses are ``1/k`` for ``2 <= k <= c`` (packed shares) and whole numbers
``1 .. d`` (gangs). ``slowdown(w)`` is the factor ``f(w)`` with ``h_i(w) = h_i1 * f(w)``: a trial
at width ``w`` completes one-GPU work at rate ``1 / f(w)``.

Example:
    >>> spec = TrialSpec("t0", runtime=30.0, beta=1.0)
    >>> spec.runtime_at(3)
    10.0
    >>> TrialSpec("t1", runtime=4.0, alpha=1.5).runtime_at(0.5)
    6.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fluid.core.checks import check_number
from fluid.core.tolerances import WIDTH_TOL


def slowdown(w: float, alpha: float = 1.0, beta: float = 1.0) -> float:
    """``f(w) = h_i(w) / h_i1`` for a trial with overheads ``alpha`` and ``beta``."""
    if w <= 0:
        raise ValueError(f"width must be > 0, got {w}")
    if w < 1 - WIDTH_TOL:
        return alpha ** (1.0 / w - 1.0)
    return beta ** (w - 1.0) / w


def is_packed(w: float) -> bool:
    """A width below one GPU: the trial shares a GPU with others."""
    return w < 1 - WIDTH_TOL


def gpus_of(w: float) -> int:
    """Whole GPUs a width occupies (0 for a packed share)."""
    return 0 if is_packed(w) else int(round(w))


@dataclass(frozen=True)
class TrialSpec:
    """A trial as the policy sees it.

    Attributes:
        id: unique name within the group.
        runtime: ``h_i1``, remaining runtime in seconds on exactly one GPU (> 0).
        alpha: packing overhead ``alpha_i >= 1``.
        beta: scaling overhead ``beta_i >= 1``.
        c: most trials that may share a GPU with this one (``c_i >= 1``); ``None``: from policy.
        d: most GPUs this trial may use (``d_i >= 1``); ``None``: from policy. ``d = 1``
            for trainables that cannot run as a gang.
        memory: peak GPU memory of one replica in GB; ``None`` when unknown (not checked).
        w_min: least width the trial may get (what its user asked for: a share, one GPU,
            ``g`` GPUs); ``None``: any width from ``1/c_i``. A share below one GPU is also
            the most it gets (``fixed_share``).
    """

    id: str
    runtime: float
    alpha: float = 1.0
    beta: float = 1.0
    c: int | None = None
    d: int | None = None
    memory: float | None = None
    w_min: float | None = None

    def __post_init__(self) -> None:
        # Fast path (specs are rebuilt at every plan); the checks below name what is wrong.
        c, d, memory, w_min = self.c, self.d, self.memory, self.w_min
        if (type(self.runtime) is float and type(self.alpha) is float  # noqa: E721
                and type(self.beta) is float and 0 < self.runtime < math.inf  # noqa: E721
                and 1 <= self.alpha < math.inf and 1 <= self.beta < math.inf
                and (c is None or (type(c) is int and c >= 1))  # noqa: E721
                and (d is None or (type(d) is int and d >= 1))  # noqa: E721
                and (memory is None or (type(memory) is float and 0 < memory < math.inf))  # noqa: E721
                and (w_min is None or (type(w_min) is float and 0 < w_min < math.inf))):  # noqa: E721
            return
        try:
            check_number("runtime", self.runtime, 0, low_open=True, unit="seconds")
            check_number("alpha", self.alpha, 1)
            check_number("beta", self.beta, 1)
            check_number("c", self.c, 1, integer=True, optional=True)
            check_number("d", self.d, 1, integer=True, optional=True)
            check_number("memory", self.memory, 0, low_open=True, optional=True, unit="GB")
            check_number("w_min", self.w_min, 0, low_open=True, optional=True)
        except ValueError as e:
            raise ValueError(f"trial {self.id!r}: {e}") from None

    @property
    def fixed_share(self) -> bool:
        """Its user asked for a share of a GPU (``w_min`` below one): a packing decision
        made, so it runs on exactly that share, never widened, grown or resized (as under
        plain Tune, where the share also leaves room for the others it was meant for)."""
        return self.w_min is not None and self.w_min < 1 - WIDTH_TOL

    def slowdown(self, w: float) -> float:
        """``f(w)`` for this trial's ``alpha`` and ``beta``."""
        return slowdown(w, self.alpha, self.beta)

    def runtime_at(self, w: float) -> float:
        """``h_i(w)``: remaining runtime at width ``w``."""
        # ``self.runtime * self.slowdown(w)`` written out: re-plans ask this of every running
        # trial several times, and two calls fewer halve its cost (same operations, same bits).
        if w <= 0:
            raise ValueError(f"width must be > 0, got {w}")
        if w < 1 - WIDTH_TOL:
            return self.runtime * self.alpha ** (1.0 / w - 1.0)
        return self.runtime * (self.beta ** (w - 1.0) / w)

    def with_runtime(self, runtime: float) -> TrialSpec:
        """The same trial with another remaining one-GPU runtime ``h_i1``."""
        if type(runtime) is not float or not 0 < runtime < math.inf:  # noqa: E721
            return replace(self, runtime=runtime)  # checked, and named if wrong, as usual
        # The other fields were checked when this spec was built (it is frozen): copy them
        # rather than check them again (re-plans move the h_i1 of hundreds of trials).
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.__dict__["runtime"] = runtime
        return other


def allowed_widths(c: int, d: int, n: int | None = None) -> list[float]:
    """Widths a trial may take, ascending: ``1/c, ..., 1/2`` then ``1, ..., min(d, n)``."""
    top = d if n is None else min(d, max(n, 1))
    return [1.0 / k for k in range(c, 1, -1)] + [float(w) for w in range(1, top + 1)]


def request_width(asked: float) -> float:
    """The least width Fluid plans that gives a trial the ``asked`` GPUs (0: none asked).

    A share below one rounds up to a share ``1/k`` (0.3 -> 1/3), above one to whole GPUs.
    """
    if asked <= WIDTH_TOL:
        return 0.0
    if is_packed(asked):
        return 1.0 / math.floor(1.0 / asked + WIDTH_TOL)
    return float(math.ceil(asked - WIDTH_TOL))
