"""FluidExecutor: Fluid inside Ray Tune, as a ``TrialScheduler`` that wraps any other.

How it steers Tune (the mechanism of docs/design.md, "In Ray Tune"; Ray 2.60):

* **hold**: every new trial is set PAUSED in ``on_trial_add``, so the controller never starts it
  on its own;
* **release with a shape**: ``choose_trial_to_run`` gives a ready trial its placement group
  (``trial.update_resources``) and returns it (ready trials without GPU before it are filed
  PENDING in the same step);
* **resize**: the plan keeps a pending width per trial (``Lifecycle.pending``);
  ``on_trial_result`` returns PAUSE after a result that carried a checkpoint; Tune saves and
  stops the actor; the trial is released again with its new shape and restores.

The base scheduler keeps deciding *what* runs: it sees every trial with the status it expects
(a held trial looks PENDING to it, a trial paused for a resize looks RUNNING), and a held trial
starts only when the base would have started it. Each hook turns what Tune reports into events
of the trials' ``Lifecycle`` and calls on the ``Planner``; all planning happens in
``choose_trial_to_run`` (once per controller step); what the plan decided becomes Tune actions
(``_actions``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from fluid.core import Tunables
from fluid.tune import _actions as actions
from fluid.tune import _admission as admission
from fluid.tune import _ray_compat as compat
from fluid.tune._base_view import base_view, eligible
from fluid.tune._capacity import Capacity
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._gpu_memory import GpuMemory
from fluid.tune._gpu_nodes import GpuNodes
from fluid.tune._group import TrialGroup, TrialGroupMixin
from fluid.tune._lifecycle import Lifecycle
from fluid.tune._limits import announce_cap, check_base
from fluid.tune._options import FluidConfigError, FluidOptions
from fluid.tune._overhead import timed
from fluid.tune._plan_lines import PlanReport
from fluid.tune._planner import Planner
from fluid.tune._records import OUTSTANDING, PLACED, Phase, TrialRecord, TrialStore
from fluid.tune._resources import ResourceView
from fluid.tune._specs import SpecCache
from fluid.tune._state_file import StateFile, state_of
from fluid.tune._train_trials import check_ray_train
from fluid.tune.profiler import Profile

__all__ = ["FluidConfigError", "FluidExecutor"]

@compat.refuse_buffered_results
class FluidExecutor(TrialScheduler):
    """Runs a Tune experiment under Fluid: packed, single-GPU and gang trials sized per group.

    Args:
        base_scheduler: the tuning algorithm's scheduler (``None``: FIFO). Fluid's adapted
            schedulers in ``fluid.schedulers`` declare TrialGroups; any other scheduler works
            with one rolling group whose budgets come from the stop criteria.
        profile: a ``fluid.tune.profiler.Profile``, the dict ``fluid profile --json`` prints, or
            the path of a JSON file holding it: its ``alpha``, ``beta`` become the prior
            and its ``c``, ``d`` caps (they replace the options of the same name); the peak
            memory it measured is ``trial_memory`` unless that is given.
        clock: monotonic clock in seconds (injected by the simulator).
        resources: where the cluster's GPUs (and CPUs, when the view has ``cpus()``) are read
            (injected by the simulator).
        **options: Fluid's options, each documented in ``fluid.FluidOptions`` (``c=2``,
            ``cpus_per_trial=0.5``, ``resize_requests=False``, ...); none is needed. A bad
            value or an unknown name raises ``FluidConfigError`` naming it.

    Example:
        >>> from ray import tune
        >>> from fluid import FluidExecutor
        >>> from fluid.schedulers import ASHAScheduler
        >>> scheduler = FluidExecutor(ASHAScheduler(max_t=10), cpus_per_trial=0.5)
    """

    def __init__(self, base_scheduler: TrialScheduler | None = None, *, profile: Any = None,
                 clock: Callable[[], float] | None = None, resources: ResourceView | None = None,
                 **options: Any) -> None:
        super().__init__()
        profile = None if profile is None else Profile.of(profile)
        self.options = opts = FluidOptions.of(options, profile)
        self.tunables: Tunables = opts.tunables  # type: ignore[assignment]
        self._store = store = TrialStore()
        self.set_base(base_scheduler or FIFOScheduler())
        self._clock = clock or time.monotonic
        self.estimator = OverheadEstimator(
            store, alpha=opts.alpha, beta=opts.beta, eps=opts.eps,
            refine=opts.refine, trial_memory=opts.trial_memory,
            gpu_memory=opts.policy.gpu_memory, tunables=self.tunables)
        specs = SpecCache(store, self.estimator, opts.policy, self.tunables,
                          exact_limits=profile is None)
        self._life = Lifecycle(store, specs, self._clock)
        self._planner = Planner(
            self._life, specs, self.estimator, opts.policy, self.tunables,
            dynamic=opts.dynamic, clock=self._clock, cpus_per_trial=opts.cpus_per_trial,
            cpus_per_worker=opts.cpus_per_worker,
            shares_enforced=bool(getattr(opts.mps, "enable_thread_percentage", False)))
        self.report = PlanReport(opts.verbose, opts.resize_requests)
        self._state = StateFile(self._clock, self.tunables)
        self._kinds = admission.TrainableKinds()
        self._capacity = Capacity(store, self._clock, self.tunables, resources,
                                  refuse=not opts.wait_for_nodes)
        self._pausing: set[str] = set()  # paused by the base, Tune still saving them
        self._nodes = GpuNodes(opts.mps, ray_cluster=resources is None)
        self._memory = GpuMemory(opts.policy.gpu_memory, opts.tunables, resources is None)
        self._checked = False
        self.hook_seconds = 0.0  # time spent in Fluid's hooks (its overhead on the driver)

    def set_base(self, base_scheduler: TrialScheduler) -> None:
        """Wrap another base scheduler (before any trial was added)."""
        if self._store.records:
            raise FluidConfigError("the base scheduler cannot change once trials were added")
        self.base = base = _checked_base(base_scheduler)  # the tuning algorithm's scheduler
        if isinstance(base, TrialGroupMixin):
            base.collect_trial_groups()  # taken after each call (``_groups_declared``)

    def _first_contact(self, tc: Any) -> None:
        """Checks that need the controller: run once, at the first trial."""
        if self._checked:
            return
        self._checked = True
        controller = compat.controller_of(tc)
        gpus, cpus = self._capacity.connect()
        self._memory.follow(gpus, self.estimator, self._life, self._nodes)  # before the pool
        self._life.open(gpus, self._memory.limit)
        self._nodes.start()  # MPS daemons started
        self._planner.start(gpus, cpus, whole_budget=type(self.base) is FIFOScheduler)
        self.report.start(controller)
        announce_cap(getattr(tc, "search_alg", None), gpus)
        actions.install_outstanding_limit(
            tc, self._store.in_flight,
            lambda: self._planner.in_flight_bound(self.options.max_outstanding))
        actions.install_callbacks(controller, self._store, self._nodes)
        compat.trial_actor_env(controller, partial(
            self._nodes.trial_env, peak_gb=self.estimator.measured_memory,
            margin=self.tunables.pinned_memory_margin))
        compat.forgive_failures(controller, self.out_of_gpu_memory)
        self._state.open(compat.experiment_dir(controller), self.estimator)

    # ------------------------------------------------------------------ TrialGroups
    def add_group(self, group: TrialGroup) -> None:
        """Declare a TrialGroup (what the base's ``new_trial_group`` calls end in).

        A group with the name of an existing one joins it (a HyperBand rung filling up as its
        trials arrive, ASHA's rolling group); budgets of trials already known are updated.
        """
        gid, changed = self._store.add_group(group)
        if changed:
            self._planner.replan(gid)

    def _groups_declared(self) -> None:
        """Take the TrialGroups the base scheduler declared during its last call."""
        if isinstance(self.base, TrialGroupMixin):
            for group in self.base.take_trial_groups():
                self.add_group(group)

    def _ask_base(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` on the base scheduler, then the groups it declared meanwhile."""
        out = call(*args)
        self._groups_declared()
        return out

    # ------------------------------------------------------------------ Tune's hooks
    @timed
    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        """Hold the new trial (Tune sees it PAUSED) until the base would start it."""
        self._first_contact(tune_controller)
        saved = self._state.saved(trial.trial_id)
        if trial.status in (Trial.TERMINATED, Trial.ERROR):
            self._ask_base(self.base.on_trial_add, tune_controller, trial)
            self._file(admission.finished_record(self._store, trial, self._kinds.of(trial),
                                                 saved))
            return
        rec = self._store.get(trial.trial_id)
        self._ask_base(self.base.on_trial_add, tune_controller, trial)
        requeued = rec is not None  # Tune re-adds a trial after a failure it will retry
        if rec is None:
            rec = admission.new_record(self._store, trial, self._kinds.of(trial),
                                       self.options.elastic, self.options.resize_requests, saved)
            check_ray_train(rec, self.options.cpus_per_worker)
            self._capacity.waits.check_trial(rec, self._capacity.gpus(), self._planner.cpus)
            self._file(rec)
        self._life.admitted(rec, int(trial.last_result.get("training_iteration", 0) or 0),
                           again=requeued)
        actions.hold(tune_controller, trial, requeued)
        self._nodes.admit(rec)
        self._planner.plan_again()

    def _file(self, rec: TrialRecord) -> None:
        """File a new record; the estimator counts its measurements."""
        self._store.add(rec)
        self.estimator.track(rec)

    @timed
    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """Plan if anything changed; return the next planned trial with its new shape, else
        the first one still starting (``TrialStore.first_starting``). A GPU node that joined is read
        before this step plans (``GpuMemory``)."""
        gpus = self._capacity.follow(self._planner)
        self._memory.follow(gpus, self.estimator, self._life, self._nodes)
        self._nodes.follow(gpus)
        self._life.cluster_changed(gpus)
        # A trial the base paused is PAUSED only once Tune saved it; then the base may want
        # to start others (HyperBandForBOHB halves a bracket when nothing runs).
        settled = [t for t in self._pausing if self._store[t].trial.status != Trial.RUNNING]
        if settled:
            self._pausing.difference_update(settled)
            self._planner.plan_again()
        if self._planner.due:
            self._plan(tune_controller)
        cpus = self._planner.cpus
        trial = actions.release_ready(self._life, tune_controller, self._capacity.gate(),
                                      lambda r: cpus.shape(r, r.width), self.report)
        if trial is None:
            admission.stop_stranded(self._store, tune_controller)
            return getattr(self._store.first_starting(), "trial", None)
        return trial

    def _plan(self, tune_controller: Any) -> None:
        """One plan: the trials the base would start now, and the re-sizes of changed groups."""
        again = False

        def startable() -> list[TrialRecord]:
            nonlocal again
            found, again = eligible(self.base, self._store, tune_controller,
                                    self.tunables.eligible_scan, self._groups_declared)
            return found

        done = compat.search_finished(compat.controller_of(tune_controller))
        for decision in self._planner.plan(startable, done):
            self._life.apply(decision)
        if again:
            self._planner.plan_again()  # look again next step

    @timed
    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        """Measure; ask the base; PAUSE instead of CONTINUE when a resize is pending."""
        store, rec = self._store, self._store[trial.trial_id]
        now = self._clock()
        store.update(rec, iteration=int(result.get("training_iteration", rec.iteration + 1)),
                     result_width=rec.actual)
        dt = result.get("time_this_iter_s")
        if not rec.no_gpu:  # (a trial without GPU says nothing about GPU times)
            self.report.client(rec, result)
            self._planner.observe(rec, dt, now)
            if rec.fresh_start and dt is not None:  # it computes beside its GPU's others since
                self._life.began(rec, now - float(dt))
        checkpointed = bool(result.get("should_checkpoint")) or not rec.function
        restarted = rec.phase is Phase.RESIZING
        self._life.reported(rec, checkpointed)
        if restarted:
            self._planner.restarted(rec)
        with base_view(store, base=self.base):
            decision = self._ask_base(self.base.on_trial_result, tune_controller, trial, result)
        if (decision == TrialScheduler.CONTINUE and checkpointed
              and trial.trial_id in self._life.pending):
            self._life.resize_started(rec, now)
            self.report.resizing(rec)
            decision = TrialScheduler.PAUSE
        elif decision == TrialScheduler.PAUSE or trial.status == Trial.PAUSED:
            # The base pauses it: by its decision (a rung), or itself through the controller
            # (PBT's exploit calls pause_trial and answers NOOP).
            self._life.paused(rec)
            self._pausing.add(trial.trial_id)
            self._planner.plan_again()
        self._state.save(self._snapshot)
        return decision

    def out_of_gpu_memory(self, trial: Trial, error: Exception) -> bool:
        """Whether Tune should retry ``trial`` without counting ``error`` (``widen_after_oom``)."""
        widened = admission.widen_after_oom(self._store, self._store.get(trial.trial_id), error,
                                            self.tunables.oom_share_growth)
        if widened:
            self._state.save(self._snapshot, force=True)
        return widened

    @timed
    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._depart(trial, self.base.on_trial_complete, tune_controller, trial, result)

    @timed
    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._depart(trial, self.base.on_trial_error, tune_controller, trial)

    @timed
    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        """Free the trial's GPUs, then tell the base."""
        self._depart(trial, self.base.on_trial_remove, tune_controller, trial)

    def _depart(self, trial: Trial, tell_base: Callable[..., None], *args: Any) -> None:
        """A trial left (completed, failed, removed): free its GPUs, then ``tell_base(*args)``."""
        rec = self._store.get(trial.trial_id)
        if rec is not None:
            self._life.departed(rec)
            self._planner.departed(rec)
            # The last trial out writes the final state, the others as the throttle allows.
            self._state.save(self._snapshot, force=not self._store.count(OUTSTANDING))
        with base_view(self._store, base=self.base):
            self._ask_base(tell_base, *args)

    def _snapshot(self) -> dict[str, Any]:
        """The measurements to keep (``fluid_state.json``, Tune's scheduler checkpoint)."""
        return state_of(self._store, self.estimator)

    alpha = property(lambda self: self.estimator.fresh_alpha, doc="``alpha``: the packing "
                     "overhead of the experiment: as given (or a profile's), else estimated "
                     "in session across its trials (the prior until they are measured).")
    beta = property(lambda self: self.estimator.beta, doc="``beta``: the median of the "
                    "trials' own measured ``beta_i``, else the prior.")
    eps = property(lambda self: self.estimator.eps, doc="``eps``: the resize cost in seconds, "
                   "as given or as measured (median).")

    @property
    def records(self) -> Mapping[str, TrialRecord]:
        """Every trial Fluid has seen, by trial id (read-only view of live records)."""
        return MappingProxyType(self._store.records)

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Passed to the base scheduler."""
        return self.base.set_search_properties(metric, mode, **spec)

    @property
    def metric(self) -> str | None:
        """The base scheduler's metric."""
        return self.base.metric

    # ------------------------------------------------------------------ what users read
    def debug_string(self) -> str:
        """Fluid's GPUs, shapes running, queue, resizes and ``eps``; then the base's."""
        store = self._store
        widths = [rec.width for rec in store.in_phase(PLACED)]
        line = self.report.summary(self._planner.gpus, widths, len(self._life.queue),
                                   self.resizes, self.eps, store.current_group_name())
        return f"{line}\n{self.base.debug_string()}"

    def get_trial(self, trial_id: str) -> Trial | None:
        """The Tune trial of that id, if Fluid has seen it."""
        return rec.trial if (rec := self._store.get(trial_id)) else None

    @property
    def resizes(self) -> int:
        """How many times Fluid paused a trial to restart it at another width."""
        return self._store.resizes()

    @property
    def groups(self) -> list[TrialGroup]:
        """Every TrialGroup declared so far, oldest first (read-only view)."""
        groups = self._store.groups
        return [groups[g] for g in sorted(groups)]

    @property
    def plan_log(self) -> list[dict[str, Any]]:
        """Every plan and cluster change: ``{"time", "kind", "group", "widths", ...}``; kinds
        ``static``, ``dynamic``, ``probe`` (a packing probe, or a gang probe on idle GPUs),
        ``cluster`` (with ``gpus``), ``estimate`` (the packing estimate: ``alpha``, ``ci95``,
        ``samples``, ``decided``) and ``packing`` (how many trials a fresh one shares a GPU
        with changed: ``c``, and whether the estimate ``decided`` it)."""
        return self._planner.plan_log

    def shape_timeline(self, trial_id: str) -> list[tuple[float, float | None, tuple[int, ...]]]:
        """``[(clock time, width or None when stopped, GPU ids in Fluid's plan), ...]``.

        GPU ids are those of Fluid's own placement (Ray may pick other physical GPUs for a
        fractional share); they show how the plan packs and spreads trials.
        """
        return list(rec.shapes) if (rec := self._store.get(trial_id)) else []

    def gpu_need(self, trial_id: str) -> float | None:
        """Least share of a GPU the trial is given since it ran out of GPU memory on a smaller
        one (kept with the experiment's measurements); ``None``: it never ran out."""
        return rec.min_share if (rec := self._store.get(trial_id)) else None

    def save(self, checkpoint_path: str) -> None:
        """Write Fluid's measurements to ``checkpoint_path`` (Tune's scheduler checkpoint)."""
        Path(checkpoint_path).write_text(json.dumps(self._snapshot()))

    def restore(self, checkpoint_path: str) -> None:
        """Read measurements written by ``save``; trials added later start with them."""
        self._state.restored(json.loads(Path(checkpoint_path).read_text()))


def _checked_base(base: Any) -> TrialScheduler:
    """``base`` if FluidExecutor can wrap it, else a ``FluidConfigError`` saying why."""
    if not isinstance(base, TrialScheduler) or isinstance(base, FluidExecutor):
        raise FluidConfigError("base_scheduler must be a ray.tune TrialScheduler other than "
                               f"FluidExecutor, got {type(base).__name__}")
    check_base(base)
    return base
