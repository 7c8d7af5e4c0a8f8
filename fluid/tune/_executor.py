"""FluidExecutor: Fluid inside Ray Tune, as a ``TrialScheduler`` that wraps any other.

How it steers Tune (the mechanism of docs/design.md, "In Ray Tune"; Ray 2.60):

* **hold**: every new trial is set PAUSED in ``on_trial_add``, so the controller never starts it
  on its own;
* **release with a shape**: ``choose_trial_to_run`` gives a held trial its placement group
  (``trial.update_resources``) and returns it;
* **resize**: the plan keeps a pending width per trial (``Lifecycle.pending``);
  ``on_trial_result`` returns PAUSE after a result that carried a checkpoint; Tune saves and
  stops the actor; the trial is released again with its new shape and restores.

The base scheduler keeps deciding *what* runs: it sees every trial with the status it expects
(a held trial looks PENDING to it, a trial paused for a resize looks RUNNING), and a held trial
starts only when the base would have started it. The hooks turn Tune's events into calls on
the ``TrialStore`` and the ``Planner``; all planning happens in ``choose_trial_to_run`` (once
per controller step); the planner's decisions become Tune actions (``_bridge.actions``).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from fluid.core import PolicyConfig, Tunables
from fluid.tune import _ray_compat as compat
from fluid.tune._bridge.limits import check_base
from fluid.tune._bridge.resources import ResourceView
from fluid.tune._group import TrialGroup
from fluid.tune._hooks import TuneHooks
from fluid.tune._options import FluidConfigError, FluidOptions
from fluid.tune._records import OUTSTANDING, PLACED, TrialRecord

__all__ = ["FluidConfigError", "FluidExecutor"]

_Hook = TypeVar("_Hook", bound=Callable[..., Any])


def _timed(hook: _Hook) -> _Hook:
    """Count the hook's wall-clock time in ``hook_seconds`` (Fluid's overhead on the driver)."""

    @functools.wraps(hook)
    def timed(executor: FluidExecutor, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return hook(executor, *args)
        finally:
            executor.hook_seconds += time.perf_counter() - t0

    return timed  # type: ignore[return-value]


@compat.refuse_buffered_results
class FluidExecutor(TrialScheduler):
    """Runs a Tune experiment under Fluid: packed, single-GPU and gang trials sized per group.

    Args:
        base_scheduler: the tuning algorithm's scheduler (``None``: FIFO). Fluid's adapted
            schedulers in ``fluid.schedulers`` declare TrialGroups; any other scheduler works
            with one rolling group whose budgets come from the stop criteria.
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
            or running at once, so its suggestions learn from results. ``None``: twice the GPUs.
        cpus_per_trial: CPUs of the trainable's own bundle (``None``: what the trial asked for).
        cpus_per_worker: CPUs of each gang worker's bundle.
        elastic: ``True`` treats every trainable as gang-capable, ``False`` none; ``None``
            (default) asks the trainable (``fluid.train.elastic`` marks it).
        default_iteration_time: seconds per iteration on one GPU assumed before any trial
            reported (``None``: ``Tunables.default_iteration_time = 1``; only the ratios
            between trials matter, so budgets decide at first).
        dynamic: ``False`` runs StaticFluid only (no resizes), for comparisons.
        profile: a ``fluid.tune.profiler.Profile``: its ``alpha``, ``beta`` become the prior
            and its ``c``, ``d`` caps (they replace the options of the same name); the peak
            memory it measured is ``trial_memory`` unless that is given.
        mps: a ``fluid.gpu.MPSManager`` (any object with ``start()`` and ``stop()``): started
            with the experiment (one MPS daemon per GPU node) and stopped when it ends.
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
        clock: monotonic clock in seconds (injected by the simulator).
        resources: where the cluster's GPUs (and CPUs, when the view has ``cpus()``) are read
            (injected by the simulator).

    Example:
        >>> from ray import tune
        >>> from fluid import FluidExecutor
        >>> from fluid.schedulers import ASHAScheduler
        >>> scheduler = FluidExecutor(ASHAScheduler(max_t=10), cpus_per_trial=0.5)
    """

    def __init__(
        self,
        base_scheduler: TrialScheduler | None = None,
        *,
        alpha: float | None = None,
        beta: float | None = None,
        c: int | None = None,
        d: int | None = None,
        eps: float | None = None,
        o_th: float | None = None,
        s_th: float | None = None,
        c_max: int | None = None,
        gpu_memory: float | None = None,
        trial_memory: float | None = None,
        max_outstanding: int | None = None,
        cpus_per_trial: float | None = None,
        cpus_per_worker: float = 1.0,
        elastic: bool | None = None,
        default_iteration_time: float | None = None,
        dynamic: bool = True,
        profile: Any = None,
        refine: bool = True,
        mps: Any = None,
        resize_requests: bool | None = None,
        wait_for_nodes: bool = True,
        verbose: bool | None = None,
        tunables: Tunables | None = None,
        clock: Callable[[], float] | None = None,
        resources: ResourceView | None = None,
    ) -> None:
        super().__init__()
        if profile is not None:
            alpha, beta, c, d = profile.alpha, profile.beta, profile.c, profile.d
            memory = getattr(profile, "memory", None)
            trial_memory = trial_memory if trial_memory is not None or not memory else memory
        self.options = FluidOptions(
            alpha=alpha, beta=beta, c=c, d=d, eps=eps, o_th=o_th, s_th=s_th, c_max=c_max,
            gpu_memory=gpu_memory, trial_memory=trial_memory, max_outstanding=max_outstanding,
            cpus_per_trial=cpus_per_trial, cpus_per_worker=cpus_per_worker, elastic=elastic,
            default_iteration_time=default_iteration_time, dynamic=dynamic, refine=refine,
            mps=mps, resize_requests=resize_requests, wait_for_nodes=wait_for_nodes,
            verbose=verbose, tunables=tunables,
        )
        self._hooks = TuneHooks(self.options, _checked_base(base_scheduler or FIFOScheduler()),
                                clock, resources, exact_limits=profile is None)
        self.tunables = self._hooks.tunables
        self.estimator, self.planner = self._hooks.estimator, self._hooks.planner
        self.report = self._hooks.report
        self.hook_seconds = 0.0  # time spent in Fluid's hooks (its overhead on the driver)

    def set_base(self, base_scheduler: TrialScheduler) -> None:
        """Wrap another base scheduler (before the experiment starts)."""
        self._hooks.set_base(_checked_base(base_scheduler))

    @property
    def base(self) -> TrialScheduler:
        """The wrapped base scheduler (the tuning algorithm's)."""
        return self._hooks.base

    alpha = property(lambda self: self.estimator.alpha, doc="``alpha``: the median of the "
                     "trials' own measured ``alpha_i``, else the prior.")
    beta = property(lambda self: self.estimator.beta, doc="``beta``: the median of the "
                    "trials' own measured ``beta_i``, else the prior.")
    eps = property(lambda self: self.estimator.eps, doc="``eps``: the resize cost in seconds, "
                   "as given or as measured (median).")
    mps = property(lambda self: self.options.mps, doc="The MPS manager started with the "
                   "experiment (``None``: none).")

    @property
    def policy(self) -> PolicyConfig:
        """The ``fluid.core`` policy (``c``, ``d``, thresholds, ``gpu_memory``) plans use."""
        return self.options.policy

    @property
    def records(self) -> Mapping[str, TrialRecord]:
        """Every trial Fluid has seen, by trial id (read-only view of live records)."""
        return MappingProxyType(self._hooks.store.records)

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Passed to the base scheduler."""
        return self.base.set_search_properties(metric, mode, **spec)

    @property
    def metric(self) -> str | None:
        """The base scheduler's metric."""
        return self.base.metric

    def add_group(self, group: TrialGroup) -> None:
        """Declare a TrialGroup (what the base's ``new_trial_group`` calls end in).

        A group with the name of an existing one joins it (a HyperBand rung filling up as its
        trials arrive, ASHA's rolling group); budgets of trials already known are updated.
        """
        self._hooks.add_group(group)

    # ------------------------------------------------------------------ Tune's hooks
    @_timed
    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        """Hold the new trial (Tune sees it PAUSED) until the base would start it."""
        self._hooks.on_trial_add(tune_controller, trial)

    @_timed
    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """Plan if anything changed; return the next planned trial with its new shape."""
        return self._hooks.choose_trial_to_run(tune_controller)

    @_timed
    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        """Measure; ask the base; PAUSE instead of CONTINUE when a resize is pending."""
        return self._hooks.on_trial_result(tune_controller, trial, result)

    @_timed
    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._hooks.depart(trial, self.base.on_trial_complete, tune_controller, trial, result)

    @_timed
    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._hooks.depart(trial, self.base.on_trial_error, tune_controller, trial)

    @_timed
    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._hooks.depart(trial, self.base.on_trial_remove, tune_controller, trial)

    # ------------------------------------------------------------------ what users read
    def debug_string(self) -> str:
        """Fluid's GPUs, shapes running, queue, resizes and ``eps``; then the base's."""
        store = self._hooks.store
        widths = [rec.width for rec in store.in_phase(PLACED)]
        line = self.report.summary(self.planner.gpus, widths, len(self._hooks.life.queue),
                                   self.resizes, self.eps, store.current_group_name())
        return f"{line}\n{self.base.debug_string()}"

    def outstanding(self) -> int:
        """Trials held or running: what a model-based searcher has in flight."""
        return self._hooks.store.count(OUTSTANDING)

    def get_trial(self, trial_id: str) -> Trial | None:
        """The Tune trial of that id, if Fluid has seen it."""
        rec = self._hooks.store.get(trial_id)
        return rec.trial if rec else None

    @property
    def resizes(self) -> int:
        """How many times Fluid paused a trial to restart it at another width."""
        return self._hooks.store.resizes()

    @property
    def groups(self) -> list[TrialGroup]:
        """Every TrialGroup declared so far, oldest first (read-only view)."""
        groups = self._hooks.store.groups
        return [groups[g] for g in sorted(groups)]

    @property
    def plan_log(self) -> list[dict[str, Any]]:
        """Every plan and cluster change: ``{"time", "kind", "group", "widths"[, "gpus"]}``; kinds
        ``static``, ``dynamic``, ``probe`` (a gang probe on idle GPUs) and ``cluster``."""
        return self.planner.plan_log

    def shape_timeline(self, trial_id: str) -> list[tuple[float, float | None, tuple[int, ...]]]:
        """``[(clock time, width or None when stopped, GPU ids in Fluid's plan), ...]``.

        GPU ids are those of Fluid's own placement (Ray may pick other physical GPUs for a
        fractional share); they show how the plan packs and spreads trials.
        """
        rec = self._hooks.store.get(trial_id)
        return list(rec.shapes) if rec else []

    def gpu_need(self, trial_id: str) -> float | None:
        """Least share of a GPU the trial is given since it ran out of GPU memory on a smaller
        one (kept with the experiment's measurements); ``None``: it never ran out."""
        rec = self._hooks.store.get(trial_id)
        return rec.min_share if rec else None

    def save(self, checkpoint_path: str) -> None:
        """Write Fluid's measurements to ``checkpoint_path`` (Tune's scheduler checkpoint)."""
        with open(checkpoint_path, "w") as f:
            json.dump(self._hooks.snapshot(), f)

    def restore(self, checkpoint_path: str) -> None:
        """Read measurements written by ``save``; trials added later start with them."""
        with open(checkpoint_path) as f:
            self._hooks.restore(json.load(f))


def _checked_base(base: Any) -> TrialScheduler:
    """``base`` if FluidExecutor can wrap it, else a ``FluidConfigError`` saying why."""
    if not isinstance(base, TrialScheduler) or isinstance(base, FluidExecutor):
        raise FluidConfigError("base_scheduler must be a ray.tune TrialScheduler other than "
                               f"FluidExecutor, got {type(base).__name__}")
    check_base(base)
    return base
