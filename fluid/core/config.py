"""Parameters of the Fluid policy shared by StaticFluid and DynamicFluid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fluid.core.checks import check_number
from fluid.core.model import TrialSpec
from fluid.core.overheads import C_MAX, O_TH, S_TH, c_from_alpha, c_from_alphas, d_from_beta


@dataclass(frozen=True)
class PolicyConfig:
    """Group-level knobs of the policy.

    Attributes:
        c: most trials on one GPU for every trial of the group; ``None``: per trial, from
            ``alpha_i`` (``c_from_alpha``). A trial's own ``c`` wins over this.
        d: most GPUs for one trial; ``None``: per trial, from ``beta_i``. A trial's own ``d``
            wins over this. ``d`` is inclusive: ``w <= d`` (the paper's Algorithm 1 uses
            ``min(., d)``; its prose says "less than d"; we follow the formula).
        eps: ``eps``, the cost in seconds of one resize (checkpoint, stop, restart).
        o_th: ``O_th``, least marginal packing benefit (see ``fluid.core.overheads``).
        s_th: least marginal scaling benefit of one more worker.
        c_max: most trials on one GPU whatever the measurements say.
        gpu_memory: memory of one GPU in GB for memory-safe packing; ``None``: unchecked.
    """

    c: int | None = None
    d: int | None = None
    eps: float = 0.0
    o_th: float = O_TH
    s_th: float = S_TH
    c_max: int = C_MAX
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
        """``c_i``: the trial's own, else the group's, else derived from ``alpha_i``."""
        if spec.c is not None:
            return spec.c
        if self.c is not None:
            return self.c
        return c_from_alpha(spec.alpha, self.o_th, self.c_max)

    def c_of_all(self, specs: Sequence[TrialSpec]) -> list[int]:
        """``c_of`` of each trial, in one pass (water-filling 10,000 trials asks for all)."""
        if self.c is not None:
            return [self.c if s.c is None else s.c for s in specs]
        derived = c_from_alphas([s.alpha for s in specs if s.c is None], self.o_th, self.c_max)
        if len(derived) == len(specs):
            return derived  # no trial has its own c
        left = iter(derived)
        return [next(left) if s.c is None else s.c for s in specs]

    def d_of(self, spec: TrialSpec, n: int) -> int:
        """``d_i``, never more than the ``n`` GPUs there are (at least 1)."""
        if spec.d is not None:
            d = spec.d
        elif self.d is not None:
            d = self.d
        else:
            d = d_from_beta(spec.beta, self.s_th, max(n, 1))
        return max(1, min(d, n))
