"""FluidExecutor: Fluid inside Ray Tune, as a ``TrialScheduler`` that wraps any other.

How it steers Tune (the mechanism of DESIGN.md section 3, checked on Ray 2.60):

* **hold**: every new trial is set PAUSED in ``on_trial_add``, so the controller never starts it
  on its own;
* **release with a shape**: ``choose_trial_to_run`` gives a held trial its placement group
  (``trial.update_resources``) and returns it;
* **resize**: ``on_trial_result`` returns PAUSE after a result that carried a checkpoint; Tune
  saves and stops the actor; the trial is released again with its new shape and restores;
* **barrier**: the same PAUSE holds a member of a ``sync`` group that got ahead until the
  others caught up (``_barrier``).

The base scheduler keeps deciding *what* runs: it sees every trial with the status it expects
(a held trial looks PENDING to it, a trial paused for a resize looks RUNNING), and a held trial
starts only when the base would have started it. All planning happens in
``choose_trial_to_run`` (once per controller step); the other hooks record what happened.

The parts, one job each (``_options``, ``_records``, ``_estimator``, ``_planner``, ``_base``,
``_actions``, ``_admission``, ``_state``, ``_history``, ``_barrier``, ``_ray_compat``), are
mapped in docs/design.md ("FluidExecutor's parts").
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from fluid.core import S_TH, PolicyConfig
from fluid.tune import _actions as actions
from fluid.tune import _admission as admission
from fluid.tune import _barrier as barrier
from fluid.tune import _ray_compat as compat
from fluid.tune._base import base_view, eligible
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._group import TrialGroup
from fluid.tune._limits import announce_cap, check_base
from fluid.tune._once import install_once
from fluid.tune._options import (
    DEFAULT_ITERATION_TIME,
    PACK_C_MAX,
    PACK_O_TH,
    FluidConfigError,
    FluidOptions,
)
from fluid.tune._planner import Planner
from fluid.tune._ray_train import RayTrainTrials
from fluid.tune._records import OUTSTANDING, PLACED, Phase, TrialBook, TrialRecord, new_record
from fluid.tune._report import PlanReport
from fluid.tune._resources import RayResourceView, ResourceView, cpus_of_view
from fluid.tune._shapes import describe
from fluid.tune._state import StateStore, apply_saved, state_of
from fluid.tune._waiting import NodeWait

logger = logging.getLogger("fluid")

__all__ = ["FluidConfigError", "FluidExecutor"]


@compat.refuse_buffered_results
class FluidExecutor(TrialScheduler):
    """Runs a Tune experiment under Fluid: packed, single-GPU and gang trials sized per group.

    Args:
        base_scheduler: the tuning algorithm's scheduler (``None``: FIFO). Fluid's adapted
            schedulers in ``fluid.schedulers`` declare TrialGroups; any other scheduler works
            with one rolling group whose budgets come from the stop criteria.
        alpha: the prior packing overhead ``alpha >= 1`` of a trial, sharpened per trial by its
            own iteration times (``None``: ``PRIOR_ALPHA = 2``: an unmeasured trial is never
            packed, as under plain Tune).
        beta: the prior scaling overhead ``beta >= 1`` (``None``: ``PRIOR_BETA = 2``: an
            unmeasured trial is never ganged).
        c: most trials per GPU (``None``: per trial from ``alpha_i`` with ``o_th``).
        d: most GPUs per trial (``None``: per trial from ``beta_i`` with ``s_th``). Trainables
            that are not elastic (``fluid.train.elastic``) always get ``d = 1``.
        eps: seconds one resize costs (``None``: measured, ``DEFAULT_EPS`` until measured).
        o_th: ``O_th``, least marginal benefit to pack one more trial on a GPU (default 0.4:
            two trials share a GPU only if ``alpha_i < 1.2``).
        s_th: least marginal benefit to add one more worker to a gang.
        c_max: most trials on one GPU whatever is measured (default 2).
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
            reported (only the ratios between trials matter, so budgets decide at first).
        dynamic: ``False`` runs StaticFluid only (no resizes), for comparisons.
        profile: a ``fluid.tune.profiler.Profile``: its ``alpha``, ``beta`` become the prior
            and its ``c``, ``d`` caps (they replace the options of the same name).
        mps: a ``fluid.gpu.MPSManager`` (any object with ``start()`` and ``stop()``): started
            with the experiment (one MPS daemon per GPU node) and stopped when it ends.
        refine: learn each trial's own ``alpha_i``/``beta_i`` from its iteration times at two
            widths (a share ``1/p`` against one GPU gives ``alpha_i``, a gang of ``w`` GPUs
            ``beta_i``), shrunk towards the prior; ``False``: the prior for every trial.
        resize_requests: a trial that asks for GPUs (``resources_per_trial={"gpu": 2}``,
            ``tune.with_resources``, a ``PlacementGroupFactory``) gets at least what it asked
            for, unless this is ``True``: then Fluid sizes it like any other trial and warns
            once per trial whose shape differs. A trial that asks for no GPU (Tune's default)
            is always sized by Fluid.
        wait_for_nodes: a cluster without GPUs, or a trial needing more GPUs or CPUs than it
            has, waits for nodes to join, saying what for (``False``: ``FluidConfigError``).
        verbose: print one line per plan change (a trial starting packed, on one GPU or as a
            gang, a resize) on the ``fluid`` logger: ``None`` (default) follows Tune's
            verbosity (silent with ``verbose=0``), ``True`` always, ``False`` never.
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
        o_th: float = PACK_O_TH,
        s_th: float = S_TH,
        c_max: int = PACK_C_MAX,
        gpu_memory: float | None = None,
        trial_memory: float | None = None,
        max_outstanding: int | None = None,
        cpus_per_trial: float | None = None,
        cpus_per_worker: float = 1.0,
        elastic: bool | None = None,
        default_iteration_time: float = DEFAULT_ITERATION_TIME,
        dynamic: bool = True,
        profile: Any = None,
        refine: bool = True,
        mps: Any = None,
        resize_requests: bool = False,
        wait_for_nodes: bool = True,
        verbose: bool | None = None,
        clock: Callable[[], float] | None = None,
        resources: ResourceView | None = None,
    ) -> None:
        super().__init__()
        if profile is not None:
            alpha, beta, c, d = profile.alpha, profile.beta, profile.c, profile.d
        self.options = FluidOptions(
            alpha=alpha, beta=beta, c=c, d=d, eps=eps, o_th=o_th, s_th=s_th, c_max=c_max,
            gpu_memory=gpu_memory, trial_memory=trial_memory, max_outstanding=max_outstanding,
            cpus_per_trial=cpus_per_trial, cpus_per_worker=cpus_per_worker, elastic=elastic,
            default_iteration_time=default_iteration_time, dynamic=dynamic, refine=refine,
            mps=mps, resize_requests=resize_requests, verbose=verbose, wait_for_nodes=wait_for_nodes,
        )
        self._book = TrialBook()
        self.set_base(base_scheduler or FIFOScheduler())
        self._clock = clock or time.monotonic
        self._resources = resources
        self.estimator = OverheadEstimator(
            self._book, alpha=alpha, beta=beta, eps=eps, refine=refine,
            default_iteration_time=default_iteration_time, trial_memory=trial_memory,
            gpu_memory=self.options.policy.gpu_memory,
        )
        self.planner = Planner(self._book, self.estimator, self.options.policy, dynamic=dynamic,
                               clock=self._clock, cpus_per_trial=cpus_per_trial,
                               cpus_per_worker=cpus_per_worker, exact_limits=profile is None)
        self.report = PlanReport(verbose)
        self._trains, self._waits = RayTrainTrials(cpus_per_worker, resize_requests), NodeWait(
            refuse=not wait_for_nodes)
        self._state = StateStore(self._clock)
        self._pausing: set[str] = set()  # paused by the base, Tune still saving them
        self._checked = False
        self._restored: dict[str, Any] = {}
        self.hook_seconds = 0.0  # time spent in Fluid's hooks (its overhead on the driver)

    def set_base(self, base_scheduler: TrialScheduler) -> None:
        """Wrap another base scheduler (before the experiment starts)."""
        if not isinstance(base_scheduler, TrialScheduler) or isinstance(
            base_scheduler, FluidExecutor
        ):
            raise FluidConfigError(
                "base_scheduler must be a ray.tune TrialScheduler other than FluidExecutor, "
                f"got {type(base_scheduler).__name__}"
            )
        check_base(base_scheduler)
        if self._book.records:
            raise FluidConfigError("the base scheduler cannot change once trials were added")
        self.base = base_scheduler
        # TrialGroupMixin schedulers declare groups through this back-reference.
        self.base._fluid_executor = self

    @property
    def alpha(self) -> float:
        """``alpha``: the median of the trials' own measured ``alpha_i``, else the prior."""
        return self.estimator.alpha

    @property
    def beta(self) -> float:
        """``beta``: the median of the trials' own measured ``beta_i``, else the prior."""
        return self.estimator.beta

    @property
    def eps(self) -> float:
        """``eps``: the resize cost in seconds, as given or as measured (median)."""
        return self.estimator.eps

    @property
    def policy(self) -> PolicyConfig:
        """The ``fluid.core`` policy (``c``, ``d``, thresholds, ``gpu_memory``) plans use."""
        return self.options.policy

    @property
    def mps(self) -> Any:
        """The MPS manager started with the experiment (``None``: none)."""
        return self.options.mps

    @property
    def records(self) -> Mapping[str, TrialRecord]:
        """Every trial Fluid has seen, by trial id (read-only view of live records)."""
        return MappingProxyType(self._book.records)

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Passed to the base scheduler."""
        return self.base.set_search_properties(metric, mode, **spec)

    @property
    def metric(self) -> str | None:
        """The base scheduler's metric."""
        return self.base.metric

    def _first_contact(self, tc: Any) -> None:
        """Checks that need the controller: run once, at the first trial."""
        if self._checked:
            return
        self._checked = True
        controller = compat.controller_of(tc)
        if self._resources is None:
            self._resources = RayResourceView(self._clock)
        gpus = self._resources.gpus()
        admission.check_setup(controller)
        self._waits.check_cluster(gpus)
        self.planner.start(gpus, cpus_of_view(self._resources))
        self.report.start(controller)
        announce_cap(getattr(tc, "search_alg", None), gpus)
        bound = self.options.max_outstanding or (lambda: max(2, int(2 * self.planner.gpus)))
        actions.install_outstanding_limit(tc, self.outstanding, bound)
        actions.install_shape_column(controller, self._book, self.mps)
        install_once(controller, (actions.ShapeColumn,))  # and RestartTrim for result files
        compat.forgive_failures(controller, self._out_of_gpu_memory)
        if self.mps is not None:
            self.mps.start()
        self._state.directory = compat.experiment_dir(controller)
        state = self._state.load()
        self.estimator.eps_samples.extend(state.get("eps_samples", []))
        self._restored = state.get("trials", {})

    # ------------------------------------------------------------------ TrialGroups
    def add_group(self, group: TrialGroup) -> None:
        """Declare a TrialGroup (what ``TrialGroupMixin.new_trial_group`` calls).

        A group with the name of an existing one joins it (a HyperBand rung filling up as its
        trials arrive, ASHA's rolling group); budgets of trials already known are updated.
        """
        gid, changed = self._book.add_group(group)
        if changed:
            self.planner.replan(gid)

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        """Hold the new trial (Tune sees it PAUSED) until the base would start it."""
        t0 = time.perf_counter()
        self._first_contact(tune_controller)
        if trial.status in (Trial.TERMINATED, Trial.ERROR):
            self.base.on_trial_add(tune_controller, trial)
            admission.record_finished(self._book, trial, self._restored.get(trial.trial_id))
            self.hook_seconds += time.perf_counter() - t0
            return
        rec = self._book.get(trial.trial_id)
        self.base.on_trial_add(tune_controller, trial)
        requeued = rec is not None  # Tune re-adds a trial after a failure it will retry
        if rec is None:
            gid, until = self._book.group_of_new(trial)
            rec = new_record(trial, gid, until, self.options.elastic,
                             self._book.kind_of(trial), self.options.resize_requests)
            rec.priority = self._book.groups[gid].priority.get(trial.trial_id, 0)
            apply_saved(rec, self._restored.get(trial.trial_id))
            self._trains.configure(rec)
            self._waits.check_trial(rec, self.planner)
            self._book.add(rec)
        else:
            self.planner.release(rec)
            rec.resize_at = None
        rec.iteration = int(trial.last_result.get("training_iteration", 0) or 0)
        rec.phase, rec.base_status, rec.fresh_start = Phase.HELD, Trial.PENDING, True
        actions.hold(tune_controller, trial, requeued)
        self.planner.dirty = True
        self.hook_seconds += time.perf_counter() - t0

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """Plan if anything changed; return the next planned trial with its new shape."""
        t0 = time.perf_counter()
        try:
            self.planner.sync_cluster(self._resources)
            self._waits.review(self._book, self.planner)
            # A trial the base paused is PAUSED only once Tune saved it; then the base may
            # want to start others (HyperBandForBOHB halves a bracket when nothing runs).
            settled = [t for t in self._pausing if self._book[t].trial.status != Trial.RUNNING]
            if settled:
                self._pausing.difference_update(settled)
                self.planner.dirty = True
            caught_up = barrier.released(self._book)
            if self.planner.dirty or caught_up:
                self.planner.search_done = compat.search_finished(
                    compat.controller_of(tune_controller))
                held: list[TrialRecord] = []
                again = False

                def startable() -> list[TrialRecord]:
                    nonlocal again
                    found, again = eligible(self.base, self._book, tune_controller)
                    held.extend(r for r in found if barrier.held(self._book, r))
                    return caught_up + [r for r in found if r not in held]

                self.planner.plan(startable)
                # look again next step
                self.planner.dirty = self.planner.dirty or bool(held) or again
            rec = self.planner.next_ready(lambda r: self._trains.fits(r, self._book, self._resources))
            if rec is None:
                for done in admission.stranded(self._book, compat.controller_of(tune_controller)):
                    logger.warning("Fluid: stopping %s: its scheduler paused it at the end of its "
                                   "budget (iteration %d) and nothing else is left to run",
                                   done.trial, done.iteration)
                    tune_controller.stop_trial(done.trial)
                return None
            assert self.planner.pool is not None
            return actions.release(rec, tune_controller, self.planner.pool, self._clock,
                                   self.planner.shape(rec, rec.width), self.report)
        finally:
            self.hook_seconds += time.perf_counter() - t0

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        """Measure; ask the base; PAUSE instead of CONTINUE when the plan resized the trial."""
        t0 = time.perf_counter()
        rec = self._book[trial.trial_id]
        now, until = self._clock(), rec.until  # the budget it ran to (the base may move it)
        rec.iteration = int(result.get("training_iteration", rec.iteration + 1))
        first = not rec.samples
        if self.estimator.observe(rec, result.get("time_this_iter_s"), now):
            if first:
                self.planner.replan_first(rec)
            elif rec.actual is not None and rec.actual >= 2:
                self.planner.replan(rec.group)  # a gang's first at a width
            else:
                self.planner.replan_batched(rec.group)  # a new alpha_i
        rec.fresh_start = False
        rec.phase = Phase.RUNNING
        checkpointed = bool(result.get("should_checkpoint")) or not rec.function
        rec.checkpoints = rec.checkpoints or checkpointed
        with base_view(self._book, base=self.base):
            decision = self.base.on_trial_result(tune_controller, trial, result)
        if (decision == TrialScheduler.CONTINUE and checkpointed
                and barrier.must_wait(self._book, rec, until)):
            self.planner.release(rec)
            rec.phase = Phase.WAITING
            rec.shapes.append((now, None, ()))
            self.planner.replan(rec.group)  # its GPUs go to the members behind it
            logger.info("Fluid: %s waits at iteration %d for its TrialGroup", trial,
                        rec.iteration)
            decision = TrialScheduler.PAUSE
        elif decision == TrialScheduler.CONTINUE and rec.width != rec.actual and checkpointed:
            self.planner.start_resize(rec, now)
            self.report.resizing(rec)
            decision = TrialScheduler.PAUSE
        elif decision == TrialScheduler.PAUSE or trial.status == Trial.PAUSED:
            # The base pauses it: by its decision (a rung), or itself through the controller
            # (PBT's exploit calls pause_trial and answers NOOP).
            self.planner.release(rec)
            rec.phase, rec.base_status = Phase.PAUSED, Trial.PAUSED
            self._pausing.add(trial.trial_id)
            self.planner.dirty = True
        self._state.save(self._snapshot)
        self.hook_seconds += time.perf_counter() - t0
        return decision

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._depart(trial, lambda: self.base.on_trial_complete(tune_controller, trial, result))

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._depart(trial, lambda: self.base.on_trial_error(tune_controller, trial))

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._depart(trial, lambda: self.base.on_trial_remove(tune_controller, trial))

    def _out_of_gpu_memory(self, trial: Trial, error: Exception) -> bool:
        """Whether Tune should retry ``trial`` without counting ``error`` (``widen_after_oom``)."""
        widened = admission.widen_after_oom(self._book.get(trial.trial_id), error)
        if widened:
            self._state.save(self._snapshot, force=True)
        return widened

    def _depart(self, trial: Trial, tell_base: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        rec = self._book.get(trial.trial_id)
        if rec is not None:
            self.planner.release(rec)
            rec.phase = Phase.DONE
            rec.shapes.append((self._clock(), None, ()))
            if self.planner.pool is not None and self.planner.pool.idle_count() == 0:
                self.planner.replan_batched(rec.group)  # it shared a GPU: a share came free
            else:
                self.planner.replan(rec.group)  # a GPU came free
            # The last trial out writes the final state; the others only as often as the
            # throttle allows (the state grows with every trial: a write per trial is O(n^2)).
            self._state.save(self._snapshot, force=not self._book.count(OUTSTANDING))
        with base_view(self._book, base=self.base):
            tell_base()
        self.hook_seconds += time.perf_counter() - t0

    def debug_string(self) -> str:
        """Fluid's GPUs, shapes running, queue, resizes and ``eps``; then the base's."""
        counts = Counter(describe(rec.width) for rec in self._book.in_phase(PLACED))
        shapes = ", ".join(f"{n} x {k}" for k, n in sorted(counts.items())) or "none"
        return (
            f"Fluid: {self.planner.gpus:g} GPUs, running {shapes}; "
            f"queued {len(self.planner.queue)}; resizes {self.resizes}, eps {self.eps:.2f}s; "
            f"TrialGroup {self._book.current_group_name()!r}.\n{self.base.debug_string()}"
        )

    def outstanding(self) -> int:
        """Trials held or running: what a model-based searcher has in flight."""
        return self._book.count(OUTSTANDING)

    def get_trial(self, trial_id: str) -> Trial | None:
        """The Tune trial of that id, if Fluid has seen it."""
        rec = self._book.get(trial_id)
        return rec.trial if rec else None

    @property
    def resizes(self) -> int:
        """How many times Fluid paused a trial to restart it at another width."""
        return self._book.resizes()

    @property
    def groups(self) -> list[TrialGroup]:
        """Every TrialGroup declared so far, oldest first (read-only view)."""
        return [self._book.groups[g] for g in sorted(self._book.groups)]

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
        rec = self._book.get(trial_id)
        return list(rec.shapes) if rec else []

    def gpu_need(self, trial_id: str) -> float | None:
        """Least share of a GPU the trial is given since it ran out of GPU memory on a smaller
        one (kept with the experiment's measurements); ``None``: it never ran out."""
        rec = self._book.get(trial_id)
        return rec.min_share if rec else None

    def trial_shape(self, trial_id: str) -> str:
        """Human-readable current shape of a trial (``'0.5 GPU'``, ``'gang of 3 GPU'``)."""
        rec = self._book.get(trial_id)
        return describe(rec.actual if rec else None)

    def _snapshot(self) -> dict[str, Any]:
        return state_of(self._book, self.estimator)

    def save(self, checkpoint_path: str) -> None:
        """Write Fluid's measurements to ``checkpoint_path`` (Tune's scheduler checkpoint)."""
        with open(checkpoint_path, "w") as f:
            json.dump(self._snapshot(), f)

    def restore(self, checkpoint_path: str) -> None:
        """Read measurements written by ``save``; trials added later start with them."""
        with open(checkpoint_path) as f:
            self._restored = json.load(f).get("trials", {})
