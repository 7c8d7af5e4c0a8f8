"""FluidExecutor's options, validated once: a bad value raises ``FluidConfigError`` naming it.

The options map onto the two configs of ``fluid.core``: ``PolicyConfig`` (``c``, ``d``,
``o_th``, ``s_th``, ``c_max``, ``gpu_memory``) and ``Tunables`` (``o_th``, ``s_th``, ``c_max``
and ``default_iteration_time`` are its fields; ``None`` keeps the tunables' value).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
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
    """The options of ``FluidExecutor``, each a keyword of it: ``FluidExecutor(base, c=2)``.

    Args:
        alpha: the prior packing overhead ``alpha >= 1`` of a trial, sharpened per trial by its
            own iteration times (``None``: ``Tunables.prior_alpha = 2``: an unmeasured trial is
            never packed, as under plain Tune).
        beta: the prior scaling overhead ``beta >= 1`` (``None``: ``Tunables.prior_beta = 2``:
            an unmeasured trial is never ganged).
        c: most trials per GPU (``None``: per trial from ``alpha_i`` with ``o_th``).
        d: most GPUs per trial (``None``: per trial from ``beta_i`` with ``s_th``). Trainables
            that are not elastic (``fluid.train.elastic``) always get ``d = 1``.
        eps: seconds one resize costs (``None``: measured, ``Tunables.default_eps`` until
            measured).
        o_th: ``O_th``, least marginal benefit to pack one more trial on a GPU (``None``:
            ``Tunables.o_th = 0.4``: two trials share a GPU only if ``alpha_i < 1.2``).
        s_th: least marginal benefit to add one more worker to a gang (``None``:
            ``Tunables.s_th = 0.05``).
        c_max: most trials on one GPU whatever is measured (``None``: ``Tunables.c_max = 2``).
        gpu_memory: GB of one GPU; with ``trial_memory`` packing never exceeds it.
        trial_memory: GB one trial needs on a GPU (``None``: from reported
            ``fluid_peak_gpu_memory`` once known, else unchecked).
        max_outstanding: most trials a model-based searcher (HyperOpt, BOHB, ...) may have held
            or running at once, so its suggestions learn from results. ``None``: what the GPUs
            run at the speed of one trial alone, never fewer than plain Tune runs at once (for
            trials without GPU, what the CPUs run).
        cpus_per_trial: CPUs of the trainable's own bundle (``None``: what the trial asked for).
        cpus_per_worker: CPUs of each gang worker's bundle.
        elastic: ``True`` treats every trainable as gang-capable, ``False`` none; ``None``
            (default) asks the trainable (``fluid.train.elastic`` marks it).
        default_iteration_time: seconds per iteration on one GPU assumed before any trial
            reported (``None``: ``Tunables.default_iteration_time = 1``; only the ratios
            between trials matter, so budgets decide at first).
        dynamic: ``False`` runs StaticFluid only (no resizes), for comparisons.
        mps: ``"auto"`` (default): an MPS daemon on every GPU node where
            ``nvidia-cuda-mps-control`` is on PATH and NVML sees GPUs (nodes that join later
            included; one that answers there already is used), shared with the cluster's
            other experiments and stopped by the last to end; each packed trial's process
            starts as a client of its node's daemon (whole-GPU processes are none). ``False``: no MPS. A ``fluid.gpu.MPSManager`` (any
            object with ``start()`` and ``stop()``): that one, e.g. with
            ``enable_thread_percentage=True``.
        refine: learn each trial's own ``alpha_i``/``beta_i`` from its iteration times at two
            widths (a share ``1/p`` against one GPU gives ``alpha_i``, a gang of ``w`` GPUs
            ``beta_i``), shrunk towards the prior; ``False``: the prior for every trial.
        resize_requests: ``None`` (default): a trial that asks for exactly one GPU
            (``tune.with_resources(train, {"gpu": 1})``, ``resources_per_trial={"gpu": 1}``:
            Tune's way of saying it needs a GPU) is sized by Fluid, packed only where packing
            is measured cheap and memory-safe (one line per experiment says so); a share
            (``{"gpu": 0.5}``) gets exactly that share; one that asks for more (``{"gpu": 2}``,
            a ``PlacementGroupFactory``) gets at least that. ``True``: every GPU request is
            sized like any other trial, with a warning per trial whose shape differs.
            ``False``: every request is kept (a share exactly, else at least what it asked
            for). A trial that asks for no GPU (Tune's default) runs on its own request with
            no GPU, as under plain Tune, unless its trainable is Fluid-aware
            (``fluid.train.elastic``, ``fluid.train.modeled``, ``fluid.train.ray_train``).
        wait_for_nodes: a trial needing GPUs on a cluster without any, or more GPUs or CPUs
            than the cluster has, waits for nodes to join, saying what for (``False``:
            ``FluidConfigError``).
        verbose: print one line per plan change (a trial starting packed, on one GPU or as a
            gang, a resize) on the ``fluid`` logger: ``None`` (default) follows Tune's
            verbosity (silent with ``verbose=0``), ``True`` always, ``False`` never.
        tunables: the constants of the policy, its estimates and its bookkeeping
            (``fluid.core.Tunables``; ``o_th``, ``s_th``, ``c_max`` and
            ``default_iteration_time`` given here replace its fields).

    ``tunables`` becomes the ``fluid.core.Tunables`` with ``o_th``, ``s_th``, ``c_max`` and
    ``default_iteration_time`` set where given; ``policy`` is the ``fluid.core.PolicyConfig``
    built from ``c``, ``d``, ``o_th``, ``s_th``, ``c_max`` and ``gpu_memory`` (its ``eps`` is
    set per plan from the measured resize cost).
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
    mps: Any = "auto"
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
        if not (mps is False or mps is None or mps == "auto" and isinstance(mps, str)
                or callable(getattr(mps, "start", None)) and callable(getattr(mps, "stop", None))):
            raise FluidConfigError(
                f"mps must be 'auto', False or a fluid.gpu.MPSManager, got {mps!r}")
        object.__setattr__(self, "tunables", tunables)
        object.__setattr__(self, "policy", policy)

    @classmethod
    def of(cls, options: dict[str, Any], profile: Any = None) -> FluidOptions:
        """The options given as keywords, with a profile's ``alpha``, ``beta``, ``c``, ``d``
        (and its peak memory as ``trial_memory`` unless given); ``FluidConfigError`` names an
        option that does not exist."""
        unknown = sorted(set(options) - {f.name for f in fields(cls) if f.init})
        if unknown:
            known = ", ".join(f.name for f in fields(cls) if f.init)
            raise FluidConfigError(f"FluidExecutor has no option {', '.join(unknown)}; "
                                   f"its options are: base_scheduler, profile, {known}")
        if profile is not None:
            options = {**options, "alpha": profile.alpha, "beta": profile.beta, "c": profile.c,
                       "d": profile.d}
            memory = getattr(profile, "memory", None)
            if options.get("trial_memory") is None and memory:
                options["trial_memory"] = memory
        return cls(**options)
