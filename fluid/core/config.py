"""Parameters of the Fluid policy shared by StaticFluid and DynamicFluid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fluid.core.checks import check_number
from fluid.core.model import TrialSpec
from fluid.core.overheads import c_from_alpha, d_from_beta
from fluid.core.tunables import DEFAULTS


@dataclass(frozen=True)
class PolicyConfig:
    """Group-level knobs of the policy.

    Attributes:
        c: most trials on one GPU for every trial of the group, a cap on what each trial's
            ``alpha_i`` allows (``c_from_alpha``; ``None``: that alone). A trial's own ``c``
            wins over both.
        d: most GPUs for one trial, a cap on what each trial's ``beta_i`` allows
            (``d_from_beta``; ``None``: that alone). A trial's own ``d`` wins over both.
            ``d`` is inclusive: ``w <= d`` (the paper's Algorithm 1 uses ``min(., d)``; its
            prose says "less than d"; we follow the formula).
        eps: ``eps``, the cost in seconds of one resize (checkpoint, stop, restart).
        o_th: ``O_th``, least marginal packing benefit (default: a group's makespan,
            ``Tunables.makespan_o_th``).
        s_th: least marginal scaling benefit of one more worker (``Tunables.s_th``).
        c_max: most trials on one GPU whatever the measurements say
            (``Tunables.makespan_c_max``).
        gpu_memory: memory of one GPU in GB for memory-safe packing; ``None``: unchecked.
    """

    c: int | None = None
    d: int | None = None
    eps: float = 0.0
    o_th: float = DEFAULTS.makespan_o_th
    s_th: float = DEFAULTS.s_th
    c_max: int = DEFAULTS.makespan_c_max
    gpu_memory: float | None = None

    def __post_init__(self) -> None:
        check_number("c", self.c, 1, integer=True, optional=True)
        check_number("d", self.d, 1, integer=True, optional=True)
        check_number("eps", self.eps, 0, unit="seconds")
        check_number("o_th", self.o_th, 0, 1, high_open=True)
        check_number("s_th", self.s_th, 0, 1, high_open=True)
        check_number("c_max", self.c_max, 1, integer=True)
        check_number("gpu_memory", self.gpu_memory, 0, low_open=True, optional=True, unit="GB")

    def c_of(self, spec: TrialSpec) -> int:
        """``c_i``: the trial's own, else what ``alpha_i`` allows, at most the group's ``c``
        (packing a trial whose ``alpha_i`` makes it slower than running alone gains nothing)."""
        if spec.c is not None:
            return spec.c
        derived = c_from_alpha(spec.alpha, self.o_th, self.c_max)
        return derived if self.c is None else min(self.c, derived)

    def c_of_all(self, specs: Sequence[TrialSpec]) -> list[int]:
        """``c_of`` of each trial, in one pass (water-filling 10,000 trials asks for all)."""
        derived = [c_from_alpha(s.alpha, self.o_th, self.c_max) for s in specs if s.c is None]
        if self.c is not None:
            derived = [min(self.c, c) for c in derived]
        if len(derived) == len(specs):
            return derived  # no trial has its own c
        left = iter(derived)
        return [next(left) if s.c is None else s.c for s in specs]

    def d_of(self, spec: TrialSpec, n: int) -> int:
        """``d_i``, never more than the ``n`` GPUs there are (at least 1)."""
        if spec.d is not None:
            d = spec.d
        else:  # what beta_i allows, at most the group's d (a wider gang that is slower: no)
            d = d_from_beta(spec.beta, self.s_th, max(n, 1))
            d = d if self.d is None else min(self.d, d)
        return max(1, min(d, n))
