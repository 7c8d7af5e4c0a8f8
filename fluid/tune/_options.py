"""FluidExecutor's options, validated once: a bad value raises ``FluidConfigError`` naming it.

The options map onto the two configs of ``fluid.core``: ``PolicyConfig`` (``c``, ``d``,
``o_th``, ``s_th``, ``c_max``, ``gpu_memory``) and ``Tunables`` (``o_th``, ``s_th``, ``c_max``
and ``default_iteration_time`` are its fields; ``None`` keeps the tunables' value).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from fluid.core import PolicyConfig, Tunables
from fluid.core.checks import check_number


class FluidConfigError(ValueError):
    """A FluidExecutor option or the experiment it runs cannot work; the message says why."""


def _number(name: str, value: Any, low: float, **kw: Any) -> None:
    """``check_number`` with its one-line message as a ``FluidConfigError``."""
    try:
        check_number(name, value, low, **kw)
    except ValueError as e:
        raise FluidConfigError(str(e)) from None


@dataclass(frozen=True)
class FluidOptions:
    """The options of ``FluidExecutor`` (same names, defaults and meaning; see its docstring).

    ``alpha`` and ``beta`` here are the prior overheads (``None``: the estimator's conservative
    prior); the estimator sharpens them per trial.
    ``tunables`` is the ``fluid.core.Tunables`` with ``o_th``, ``s_th``, ``c_max`` and
    ``default_iteration_time`` set when given; ``policy`` the ``fluid.core.PolicyConfig`` built
    from ``c``, ``d``, ``o_th``, ``s_th``, ``c_max`` and ``gpu_memory`` (its ``eps`` is set per
    plan from the measured resize cost).
    """

    alpha: float | None = None
    beta: float | None = None
    c: int | None = None
    d: int | None = None
    eps: float | None = None
    o_th: float | None = None
    s_th: float | None = None
    c_max: int | None = None
    gpu_memory: float | None = None
    trial_memory: float | None = None
    max_outstanding: int | None = None
    cpus_per_trial: float | None = None
    cpus_per_worker: float = 1.0
    elastic: bool | None = None
    default_iteration_time: float | None = None
    dynamic: bool = True
    refine: bool = True
    mps: Any = None
    resize_requests: bool | None = None
    verbose: bool | None = None
    wait_for_nodes: bool = True
    tunables: Tunables | None = None
    policy: PolicyConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _number("alpha", self.alpha, 1, optional=True)
        _number("beta", self.beta, 1, optional=True)
        _number("eps", self.eps, 0, optional=True, unit="seconds")
        _number("trial_memory", self.trial_memory, 0, low_open=True, optional=True, unit="GB")
        _number("max_outstanding", self.max_outstanding, 1, integer=True, optional=True)
        _number("cpus_per_trial", self.cpus_per_trial, 0, optional=True)
        _number("cpus_per_worker", self.cpus_per_worker, 0)
        if self.tunables is not None and not isinstance(self.tunables, Tunables):
            raise FluidConfigError(f"tunables must be a fluid.core.Tunables, got {self.tunables!r}")
        for name, none_ok in (("elastic", True), ("dynamic", False), ("refine", False),
                              ("resize_requests", True), ("verbose", True),
                              ("wait_for_nodes", False)):
            flag = getattr(self, name)
            if not (isinstance(flag, bool) or (none_ok and flag is None)):
                allowed = "True, False or None" if none_ok else "True or False"
                raise FluidConfigError(f"{name} must be {allowed}, got {flag!r}")
        given = {k: v for k in ("o_th", "s_th", "c_max", "default_iteration_time")
                 if (v := getattr(self, k)) is not None}
        try:
            tunables = replace(self.tunables or Tunables(), **given)
            policy = PolicyConfig(c=self.c, d=self.d, eps=0.0, o_th=tunables.o_th,
                                  s_th=tunables.s_th, c_max=tunables.c_max,
                                  gpu_memory=self.gpu_memory)
        except ValueError as e:
            raise FluidConfigError(str(e)) from None
        mps = self.mps
        if mps is not None and not (callable(getattr(mps, "start", None))
                                    and callable(getattr(mps, "stop", None))):
            raise FluidConfigError(f"mps must be a fluid.gpu.MPSManager, got {mps!r}")
        object.__setattr__(self, "tunables", tunables)
        object.__setattr__(self, "policy", policy)
