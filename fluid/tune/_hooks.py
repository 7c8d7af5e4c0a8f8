"""Tune's scheduler hooks as calls on Fluid's parts, for ``FluidExecutor``.

``TuneHooks`` turns each event Tune reports (a trial added, a result, a trial leaving) into
calls on the ``TrialStore`` (what the trial is now) and the ``Planner`` (what that changes for
the plan), and the planner's decisions into Tune actions (``_bridge.actions``): a ready trial
released with its placement group, a pending resize as a PAUSE. All planning happens in
``choose_trial_to_run``, once per controller step.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from fluid.core import Tunables
from fluid.tune import _ray_compat as compat
from fluid.tune._bridge import actions, admission
from fluid.tune._bridge.base_view import base_view, eligible
from fluid.tune._bridge.limits import announce_cap
from fluid.tune._bridge.plan_lines import PlanReport
from fluid.tune._bridge.resources import (
    OutsideGpus,
    RayResourceView,
    ResourceView,
    StartGate,
    cpus_of_view,
)
from fluid.tune._bridge.state_file import StateFile, state_of
from fluid.tune._bridge.train_trials import check_ray_train
from fluid.tune._bridge.waiting import NodeWait
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._group import TrialGroup, TrialGroupMixin
from fluid.tune._lifecycle import Lifecycle
from fluid.tune._options import FluidConfigError, FluidOptions
from fluid.tune._planner import Planner
from fluid.tune._records import OUTSTANDING, Phase, TrialRecord, TrialStore
from fluid.tune._specs import SpecCache

logger = logging.getLogger("fluid")


class TuneHooks:
    """Fluid's parts for one experiment and what each of Tune's hooks does to them.

    Args:
        options: the executor's options.
        base: the wrapped base scheduler.
        clock: monotonic clock in seconds.
        resources: where the cluster's GPUs and CPUs are read (``None``: Ray's, at the first
            trial).
        exact_limits: the options' ``c`` and ``d`` are the user's (not a profile's caps).
    """

    def __init__(self, options: FluidOptions, base: TrialScheduler,
                 clock: Callable[[], float] | None, resources: ResourceView | None,
                 exact_limits: bool) -> None:
        self.options = options
        self.tunables: Tunables = options.tunables  # type: ignore[assignment]
        self.store = TrialStore()
        self.base = base
        self.set_base(base)
        self._clock = clock or time.monotonic
        self._resources = resources
        self.estimator = OverheadEstimator(
            self.store, alpha=options.alpha, beta=options.beta, eps=options.eps,
            refine=options.refine, trial_memory=options.trial_memory,
            gpu_memory=options.policy.gpu_memory, tunables=self.tunables,
        )
        specs = SpecCache(self.store, self.estimator, options.policy, self.tunables,
                          exact_limits)
        self.life = Lifecycle(self.store, specs, self._clock)
        self.planner = Planner(self.life, specs, self.estimator, options.policy, self.tunables,
                               dynamic=options.dynamic, clock=self._clock,
                               cpus_per_trial=options.cpus_per_trial,
                               cpus_per_worker=options.cpus_per_worker,
                               shares_enforced=bool(getattr(options.mps,
                                                            "enable_thread_percentage", False)))
        self.report = PlanReport(options.verbose, options.resize_requests)
        self._state = StateFile(self._clock, self.tunables)
        self._kinds = admission.TrainableKinds()
        self._waits = NodeWait(refuse=not options.wait_for_nodes)
        self._gate = StartGate()
        self._outside = OutsideGpus(self._clock, self.tunables.resources_refresh_s,
                                    self.tunables.outside_settle_s)
        self._pausing: set[str] = set()  # paused by the base, Tune still saving them
        self._checked = False
        self._restored: dict[str, Any] = {}  # saved measurements by trial id

    def set_base(self, base: TrialScheduler) -> None:
        """Wrap another base scheduler (before any trial was added)."""
        if self.store.records:
            raise FluidConfigError("the base scheduler cannot change once trials were added")
        self.base = base
        if isinstance(base, TrialGroupMixin):
            base.collect_trial_groups()  # taken after each call (``_groups_declared``)

    def first_contact(self, tc: Any) -> None:
        """Checks that need the controller: run once, at the first trial."""
        if self._checked:
            return
        self._checked = True
        controller = compat.controller_of(tc)
        if self._resources is None:
            self._resources = RayResourceView(self._clock, self.tunables.resources_refresh_s)
        gpus = self._resources.gpus()
        admission.check_setup(controller)
        self.planner.start(gpus, cpus_of_view(self._resources))
        self.report.start(controller)
        announce_cap(getattr(tc, "search_alg", None), gpus)
        actions.install_outstanding_limit(
            tc, self.store.in_flight,
            lambda: self.planner.in_flight_bound(self.options.max_outstanding))
        actions.install_callbacks(controller, self.store, self.options.mps)
        compat.forgive_failures(controller, self.out_of_gpu_memory)
        self._state.directory = compat.experiment_dir(controller)
        state = self._state.load()
        self.estimator.restore_eps(state.get("eps_samples", []))
        self.restore(state)

    # ------------------------------------------------------------------ TrialGroups
    def add_group(self, group: TrialGroup) -> None:
        """Declare a TrialGroup (what the base's ``new_trial_group`` calls end in).

        A group with the name of an existing one joins it (a HyperBand rung filling up as its
        trials arrive, ASHA's rolling group); budgets of trials already known are updated.
        """
        gid, changed = self.store.add_group(group)
        if changed:
            self.planner.replan(gid)

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
    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        """Hold the new trial (Tune sees it PAUSED) until the base would start it."""
        self.first_contact(tune_controller)
        saved = self._restored.get(trial.trial_id)
        if trial.status in (Trial.TERMINATED, Trial.ERROR):
            self._ask_base(self.base.on_trial_add, tune_controller, trial)
            self._file(admission.finished_record(self.store, trial, self._kinds.of(trial),
                                                 saved))
            return
        rec = self.store.get(trial.trial_id)
        self._ask_base(self.base.on_trial_add, tune_controller, trial)
        requeued = rec is not None  # Tune re-adds a trial after a failure it will retry
        if rec is None:
            rec = admission.new_record(self.store, trial, self._kinds.of(trial),
                                       self.options.elastic, self.options.resize_requests, saved)
            check_ray_train(rec, self.options.cpus_per_worker)
            self._waits.check_trial(rec, self._resources.gpus(), self.planner.cpus)
            self._file(rec)
        self.life.admitted(rec, int(trial.last_result.get("training_iteration", 0) or 0),
                           again=requeued)
        actions.hold(tune_controller, trial, requeued)
        self.planner.plan_again()

    def _file(self, rec: TrialRecord) -> None:
        """File a new record; the estimator counts its measurements."""
        self.store.add(rec)
        self.estimator.track(rec)

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        """Plan if anything changed; return the next planned trial with its new shape."""
        if self._resources is not None:
            self.planner.sync_cluster(self._resources,
                                      self._outside.read(self._resources, self.store))
            self._waits.review(self.store, self._resources.gpus(), self.planner.cpus)
        # A trial the base paused is PAUSED only once Tune saved it; then the base may want
        # to start others (HyperBandForBOHB halves a bracket when nothing runs).
        settled = [t for t in self._pausing if self.store[t].trial.status != Trial.RUNNING]
        if settled:
            self._pausing.difference_update(settled)
            self.planner.plan_again()
        if self.planner.due:
            self._plan(tune_controller)
        available = getattr(self._resources, "available_gpus", None)
        available = None if available is None else functools.cache(available)  # once a step
        rec = self.life.take_ready(
            lambda r: self._gate.fits(r, self.store, available, self._outside.seen))
        if rec is None:
            self._stop_stranded(tune_controller)
            return None
        assert rec.width is not None
        return actions.release(rec, tune_controller, self.life,
                               self.planner.cpus.shape(rec, rec.width), self.report)

    def _plan(self, tune_controller: Any) -> None:
        """One plan: the trials the base would start now, and the re-sizes of changed groups."""
        again = False

        def startable() -> list[TrialRecord]:
            nonlocal again
            found, again = eligible(self.base, self.store, tune_controller,
                                    self.tunables.eligible_scan, self._groups_declared)
            return found

        self.planner.plan(startable, compat.search_finished(compat.controller_of(tune_controller)))
        if again:
            self.planner.plan_again()  # look again next step

    def _stop_stranded(self, tune_controller: Any) -> None:
        for done in admission.stranded(self.store, compat.controller_of(tune_controller)):
            logger.warning("Fluid: stopping %s: its scheduler paused it at the end of its "
                           "budget (iteration %d) and nothing else is left to run",
                           done.trial, done.iteration)
            tune_controller.stop_trial(done.trial)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        """Measure; ask the base; PAUSE instead of CONTINUE when a resize is pending."""
        store, rec = self.store, self.store[trial.trial_id]
        now = self._clock()
        store.update(rec, iteration=int(result.get("training_iteration", rec.iteration + 1)),
                     result_width=rec.actual)
        if not rec.no_gpu:  # (a trial without GPU says nothing about GPU times)
            self.planner.observe(rec, result.get("time_this_iter_s"), now)
        checkpointed = bool(result.get("should_checkpoint")) or not rec.function
        restarted = rec.phase is Phase.RESIZING
        self.life.reported(rec, checkpointed)
        if restarted:
            self.planner.restarted(rec)
        with base_view(store, base=self.base):
            decision = self._ask_base(self.base.on_trial_result, tune_controller, trial, result)
        if (decision == TrialScheduler.CONTINUE and checkpointed
              and trial.trial_id in self.life.pending):
            self.life.resize_started(rec, now)
            self.report.resizing(rec)
            decision = TrialScheduler.PAUSE
        elif decision == TrialScheduler.PAUSE or trial.status == Trial.PAUSED:
            # The base pauses it: by its decision (a rung), or itself through the controller
            # (PBT's exploit calls pause_trial and answers NOOP).
            self.life.paused(rec)
            self._pausing.add(trial.trial_id)
            self.planner.plan_again()
        self._state.save(self.snapshot)
        return decision

    def out_of_gpu_memory(self, trial: Trial, error: Exception) -> bool:
        """Whether Tune should retry ``trial`` without counting ``error`` (``widen_after_oom``)."""
        widened = admission.widen_after_oom(self.store, self.store.get(trial.trial_id), error,
                                            self.tunables.oom_share_growth)
        if widened:
            self._state.save(self.snapshot, force=True)
        return widened

    def depart(self, trial: Trial, tell_base: Callable[..., None], *args: Any) -> None:
        """A trial left (completed, failed, removed): free its GPUs, then ``tell_base(*args)``."""
        rec = self.store.get(trial.trial_id)
        if rec is not None:
            self.life.departed(rec)
            self.planner.departed(rec)
            # The last trial out writes the final state; the others only as often as the
            # throttle allows (the state grows with every trial: a write per trial is O(n^2)).
            self._state.save(self.snapshot, force=not self.store.count(OUTSTANDING))
        with base_view(self.store, base=self.base):
            self._ask_base(tell_base, *args)

    def restore(self, saved: dict[str, Any]) -> None:
        """Measurements saved before (``snapshot``): trials added later start with them."""
        self._restored = saved.get("trials", {})

    def snapshot(self) -> dict[str, Any]:
        """The measurements to keep (``fluid_state.json``, Tune's scheduler checkpoint)."""
        return state_of(self.store, self.estimator)
