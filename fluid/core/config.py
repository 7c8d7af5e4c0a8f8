"""Parameters of the Fluid policy shared by StaticFluid and DynamicFluid."""

from __future__ import annotations

from dataclasses import dataclass

from fluid.core.model import TrialSpec
from fluid.core.overheads import C_MAX, O_TH, S_TH, c_from_alpha, d_from_beta


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
        if self.c is not None and self.c < 1:
            raise ValueError(f"c must be >= 1, got {self.c}")
        if self.d is not None and self.d < 1:
            raise ValueError(f"d must be >= 1, got {self.d}")
        if not self.eps >= 0:
            raise ValueError(f"eps must be >= 0 seconds, got {self.eps}")
        if not 0 <= self.o_th < 1:
            raise ValueError(f"o_th must be in [0, 1), got {self.o_th}")
        if not 0 <= self.s_th < 1:
            raise ValueError(f"s_th must be in [0, 1), got {self.s_th}")
        if self.c_max < 1:
            raise ValueError(f"c_max must be >= 1, got {self.c_max}")
        if self.gpu_memory is not None and not self.gpu_memory > 0:
            raise ValueError(f"gpu_memory must be > 0 GB, got {self.gpu_memory}")

    def c_of(self, spec: TrialSpec) -> int:
        """``c_i``: the trial's own, else the group's, else derived from ``alpha_i``."""
        if spec.c is not None:
            return spec.c
        if self.c is not None:
            return self.c
        return c_from_alpha(spec.alpha, self.o_th, self.c_max)

    def d_of(self, spec: TrialSpec, n: int) -> int:
        """``d_i``, never more than the ``n`` GPUs there are (at least 1)."""
        if spec.d is not None:
            d = spec.d
        elif self.d is not None:
            d = self.d
        else:
            d = d_from_beta(spec.beta, self.s_th, max(n, 1))
        return max(1, min(d, n))
