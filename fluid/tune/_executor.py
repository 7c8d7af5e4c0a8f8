"""FluidExecutor: Fluid inside Ray Tune, as a ``TrialScheduler`` that wraps any other.

How it steers Tune (the mechanism of DESIGN.md section 3, checked on Ray 2.60):

* **hold**: every new trial is set PAUSED in ``on_trial_add``, so the controller never starts it
  on its own;
* **release with a shape**: ``choose_trial_to_run`` gives a held trial its placement group
  (``trial.update_resources``) and returns it;
* **resize**: ``on_trial_result`` returns PAUSE after a result that carried a checkpoint; Tune
  saves and stops the actor; the trial is released again with its new shape and restores.

The base scheduler keeps deciding *what* runs: it sees every trial with the status it expects
(a held trial looks PENDING to it, a trial paused for a resize looks RUNNING), and a held trial
starts only when the base would have started it. All planning happens in
``choose_trial_to_run`` (once per controller step); the other hooks record what happened.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ray.tune.callback import Callback
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from fluid.core import (
    C_MAX,
    O_TH,
    S_TH,
    GpuPool,
    PolicyConfig,
    RunningTrial,
    TrialSpec,
    dynamic_fluid,
    slowdown,
    start_in_order,
    static_fluid,
)
from fluid.tune import _ray_compat as compat
from fluid.tune._group import TrialGroup
from fluid.tune._shapes import cpus_of, describe, is_elastic_class, shape_for, width_of

logger = logging.getLogger("fluid")

#: Seconds a resize is assumed to cost until one has been measured.
DEFAULT_EPS = 5.0
#: Per-iteration one-GPU time assumed for a trial before any trial has reported.
DEFAULT_ITERATION_TIME = 1.0
#: Most held trials asked of the base scheduler per step (bounds work with huge groups).
_ELIGIBLE_SCAN = 256
_STATE_FILE = "fluid_state.json"


class ResourceView(Protocol):
    """Where FluidExecutor reads the cluster's GPU count (injected so a simulator can drive it)."""

    def gpus(self) -> float:
        """GPUs of the live nodes."""
        ...


class RayResourceView:
    """GPU count of the live Ray cluster, read at most once every ``refresh_s`` seconds."""

    def __init__(self, clock: Callable[[], float], refresh_s: float = 1.0) -> None:
        self._clock, self._refresh_s = clock, refresh_s
        self._at, self._gpus = -math.inf, 0.0

    def gpus(self) -> float:
        now = self._clock()
        if now - self._at >= self._refresh_s:
            import ray

            self._gpus, self._at = float(ray.cluster_resources().get("GPU", 0.0)), now
        return self._gpus


class FluidConfigError(ValueError):
    """A FluidExecutor option or the experiment it runs cannot work; the message says why."""


@dataclass
class _Record:
    trial: Trial
    group: int
    until: int | None
    phase: str = "held"  # held, queued, ready, running, resizing, paused, done
    base_status: str = Trial.PENDING  # what the base scheduler believes while we hold it
    iteration: int = 0
    width: float | None = None  # width held in the GPU mirror (the target while resizing)
    actual: float | None = None  # width the trial runs at now
    samples: deque = field(default_factory=lambda: deque(maxlen=5))  # (seconds, width)
    raw: dict = field(default_factory=dict)  # width -> recent raw seconds per iteration
    fresh_start: bool = True
    checkpoints: bool = False
    resize_at: float | None = None
    resizes: int = 0
    cpus: float = 1.0  # CPUs of the trainable's bundle (what the trial first asked for)
    elastic: bool = False  # may run as a gang (read once: the registry lookup is an RPC)
    function: bool = True  # a function trainable (checkpoints only when it reports one)
    shapes: list = field(default_factory=list)  # [(clock time, width, gpus)] for timelines


@compat.refuse_buffered_results
class FluidExecutor(TrialScheduler):
    """Runs a Tune experiment under Fluid: packed, single-GPU and gang trials sized per group.

    Args:
        base_scheduler: the tuning algorithm's scheduler (``None``: FIFO). Fluid's adapted
            schedulers in ``fluid.schedulers`` declare TrialGroups; any other scheduler works
            with one rolling group whose budgets come from the stop criteria.
        alpha: packing overhead ``alpha >= 1`` of every trial until measured.
        beta: scaling overhead ``beta >= 1`` of every trial until measured.
        c: most trials per GPU (``None``: derived from ``alpha`` with ``o_th``).
        d: most GPUs per trial (``None``: derived from ``beta`` with ``s_th``). Trainables that
            are not elastic (``fluid.train.elastic``) always get ``d = 1``.
        eps: seconds one resize costs (``None``: measured, ``DEFAULT_EPS`` until measured).
        o_th: ``O_th``, least marginal benefit to pack one more trial on a GPU.
        s_th: least marginal benefit to add one more worker to a gang.
        c_max: most trials on one GPU whatever is measured.
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
        profile: a ``fluid.tune.profiler.Profile``: its ``alpha``, ``beta``, ``c``, ``d``
            replace the options of the same name.
        mps: a ``fluid.gpu.MPSManager`` (any object with ``start()`` and ``stop()``): started
            with the experiment (one MPS daemon per GPU node) and stopped when it ends.
        refine: keep refining ``alpha`` and ``beta`` from trials measured at two widths
            (a trial resized from a share ``1/p`` to ``1/q`` gives ``alpha``; a gang resized
            from ``w`` to ``v`` GPUs gives ``beta``); the median over trials is used.
        clock: monotonic clock in seconds (injected by the simulator).
        resources: where the cluster's GPU count is read (injected by the simulator).

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
        alpha: float = 1.0,
        beta: float = 1.0,
        c: int | None = None,
        d: int | None = None,
        eps: float | None = None,
        o_th: float = O_TH,
        s_th: float = S_TH,
        c_max: int = C_MAX,
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
        clock: Callable[[], float] | None = None,
        resources: ResourceView | None = None,
    ) -> None:
        super().__init__()
        self._records: dict[str, _Record] = {}
        if profile is not None:
            alpha, beta, c, d = profile.alpha, profile.beta, profile.c, profile.d
        checks = [
            ("alpha", alpha, alpha >= 1, ">= 1"),
            ("beta", beta, beta >= 1, ">= 1"),
            ("eps", eps, eps is None or eps >= 0, ">= 0 seconds or None"),
            ("trial_memory", trial_memory, trial_memory is None or trial_memory > 0, "> 0 GB"),
            ("max_outstanding", max_outstanding, max_outstanding is None or max_outstanding >= 1,
             ">= 1 or None"),
            ("cpus_per_trial", cpus_per_trial, cpus_per_trial is None or cpus_per_trial >= 0,
             ">= 0 or None"),
            ("cpus_per_worker", cpus_per_worker, cpus_per_worker >= 0, ">= 0"),
            ("default_iteration_time", default_iteration_time, default_iteration_time > 0, "> 0"),
        ]
        for name, value, ok, allowed in checks:
            if not ok:
                raise FluidConfigError(f"{name} must be {allowed}, got {value!r}")
        try:
            self._policy = PolicyConfig(
                c=c, d=d, eps=0.0, o_th=o_th, s_th=s_th, c_max=c_max, gpu_memory=gpu_memory
            )
        except ValueError as e:
            raise FluidConfigError(str(e)) from None
        self.set_base(base_scheduler or FIFOScheduler())
        self.alpha, self.beta = alpha, beta
        self.fixed_eps, self.trial_memory = eps, trial_memory
        self.max_outstanding = max_outstanding
        self.cpus_per_trial, self.cpus_per_worker = cpus_per_trial, cpus_per_worker
        self.elastic, self.default_iteration_time = elastic, default_iteration_time
        self.dynamic, self.refine = dynamic, refine
        if mps is not None and not (callable(getattr(mps, "start", None))
                                    and callable(getattr(mps, "stop", None))):
            raise FluidConfigError(f"mps must be a fluid.gpu.MPSManager, got {mps!r}")
        self.mps = mps
        self._clock = clock or time.monotonic
        self._resources = resources
        self._records: dict[str, _Record] = {}
        self._groups: dict[int, TrialGroup] = {}
        self._queue: list[str] = []  # planned, waiting for capacity, in start order
        self._ready: list[str] = []  # placed in the mirror, to be returned to Tune
        self._pool: GpuPool | None = None
        self._deficit = 0  # GPUs gone from the cluster but still in the plan (not yet idle)
        self._gpus = 0.0
        self._dirty = True
        self._replan_groups: set[int] = set()
        self._pausing: set[str] = set()  # paused by the base, Tune still saving them
        self._eps_samples: deque = deque(maxlen=10)
        self._alpha_by_trial: dict[str, float] = {}
        self._beta_by_trial: dict[str, float] = {}
        self._mean_time: float | None = None  # mean iteration time of measured trials
        self._checked = False
        self._state_dir: str | None = None
        self._restored: dict[str, Any] = {}
        self._saved_at = -math.inf
        self.hook_seconds = 0.0  # time spent in Fluid's hooks (its overhead on the driver)
        self.plan_log: list[dict[str, Any]] = []  # every shape change, for timelines

    # ------------------------------------------------------------------ configuration
    def set_base(self, base_scheduler: TrialScheduler) -> None:
        """Wrap another base scheduler (before the experiment starts)."""
        if not isinstance(base_scheduler, TrialScheduler) or isinstance(
            base_scheduler, FluidExecutor
        ):
            raise FluidConfigError(
                "base_scheduler must be a ray.tune TrialScheduler other than FluidExecutor, "
                f"got {type(base_scheduler).__name__}"
            )
        if self._records:
            raise FluidConfigError("the base scheduler cannot change once trials were added")
        self.base = base_scheduler
        # TrialGroupMixin schedulers declare groups through this back-reference.
        self.base._fluid_executor = self

    @property
    def eps(self) -> float:
        """``eps``: the resize cost in seconds, as given or as measured (median)."""
        if self.fixed_eps is not None:
            return self.fixed_eps
        return statistics.median(self._eps_samples) if self._eps_samples else DEFAULT_EPS

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return self.base.set_search_properties(metric, mode, **spec)

    @property
    def metric(self) -> str | None:
        return self.base.metric

    def _first_contact(self, tc: Any) -> None:
        """Checks that need the controller: run once, at the first trial."""
        if self._checked:
            return
        self._checked = True
        controller = compat.controller_of(tc)
        if compat.reuses_actors(controller):
            raise FluidConfigError(
                "reuse_actors=True cannot be used with FluidExecutor: every trial gets its own "
                "placement group shape; pass reuse_actors=False"
            )
        if self._resources is None:
            self._resources = RayResourceView(self._clock)
        self._gpus = self._resources.gpus()
        if self._gpus <= 0:
            raise FluidConfigError(
                "the Ray cluster has no GPUs; FluidExecutor sizes trials in GPUs (on a machine "
                "without GPUs, start Ray with logical ones: ray.init(num_gpus=N))"
            )
        self._pool = GpuPool(int(math.floor(self._gpus)), self._policy.gpu_memory)
        self._install_outstanding_limit(tc)
        self._install_shape_column(controller)
        if self.mps is not None:
            self.mps.start()
        self._state_dir = compat.experiment_dir(controller)
        self._restored = self._load_state()

    # ------------------------------------------------------------------ TrialGroups
    def add_group(self, group: TrialGroup) -> None:
        """Declare a TrialGroup (what ``TrialGroupMixin.new_trial_group`` calls).

        A group with the name of an existing one joins it (a HyperBand rung filling up as its
        trials arrive, ASHA's rolling group); budgets of trials already known are updated.
        """
        gid = next((g for g in reversed(self._groups) if group.name and
                    self._groups[g].name == group.name), None)
        if gid is None:
            gid = len(self._groups)
            self._groups[gid] = TrialGroup([], {}, group.name)
            logger.info("Fluid: new TrialGroup %d %r", gid, group.name)
        target = self._groups[gid]
        changed = False
        for t in group.trials:
            if t.trial_id not in target.until:
                target.trials.append(t)
            target.until[t.trial_id] = group.until[t.trial_id]
            rec = self._records.get(t.trial_id)
            if rec is not None and (rec.group, rec.until) != (gid, group.until[t.trial_id]):
                rec.group, rec.until = gid, group.until[t.trial_id]
                changed = True
        if changed:
            self._replan_groups.add(gid)
            self._dirty = True

    def _group_of_new(self, trial: Trial) -> tuple[int, int | None]:
        for gid in sorted(self._groups, reverse=True):
            if trial.trial_id in self._groups[gid].until:
                return gid, self._groups[gid].until[trial.trial_id]
        # Not declared by the algorithm: one rolling group, budgets from the stop criteria.
        until = _stop_iteration(trial)
        self.add_group(TrialGroup([trial], {trial.trial_id: until or 0}, "rolling"))
        gid = max(g for g in self._groups if self._groups[g].name == "rolling")
        return gid, until

    # ------------------------------------------------------------------ base view
    @contextmanager
    def _base_view(self, extra: dict[str, str] | None = None) -> Iterator[None]:
        """Show the base scheduler every held trial with the status it expects."""
        shown: list[tuple[Trial, str, str]] = []
        for rec in self._records.values():
            want = rec.base_status if rec.phase != "resizing" else Trial.RUNNING
            if rec.phase in ("held", "queued", "ready", "resizing") and rec.trial.status != want:
                shown.append((rec.trial, rec.trial.status, want))
        for trial, status in (extra or {}).items():
            rec = self._records[trial]
            shown.append((rec.trial, rec.trial.status, status))
        for trial, _real, want in shown:
            trial.status = want
        try:
            yield
        finally:
            for trial, real, want in shown:
                if trial.status == want:  # the base may have stopped it meanwhile
                    trial.status = real

    def _eligible(self, tc: Any) -> list[_Record]:
        """Held or base-paused trials the base scheduler would start now."""
        waiting = [r for r in self._records.values() if r.phase in ("held", "paused")]
        if not waiting:
            return []
        if type(self.base) is FIFOScheduler:
            return waiting  # FIFO starts everything, in order: no need to ask
        masked: dict[str, str] = {}
        found: list[_Record] = []
        for _ in range(min(len(waiting), _ELIGIBLE_SCAN)):
            with self._base_view(masked):
                trial = self.base.choose_trial_to_run(tc)
            rec = self._records.get(trial.trial_id) if trial is not None else None
            if rec is None or rec.phase not in ("held", "paused"):
                break
            found.append(rec)
            masked[trial.trial_id] = Trial.RUNNING  # so the next call returns another
        return found

    # ------------------------------------------------------------------ hooks
    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        t0 = time.perf_counter()
        self._first_contact(tune_controller)
        self._check_fits(trial)
        rec = self._records.get(trial.trial_id)
        self.base.on_trial_add(tune_controller, trial)
        requeued = rec is not None  # Tune re-adds a trial after a failure it will retry
        if rec is None:
            gid, until = self._group_of_new(trial)
            rec = _Record(trial, gid, until, cpus=cpus_of(trial.placement_group_factory),
                          elastic=self._is_elastic(trial), function=_is_function(trial))
            saved = self._restored.get(trial.trial_id)
            if saved:
                rec.samples.extend(tuple(x) for x in saved.get("samples", [])
                                   if isinstance(x, list) and len(x) == 2)
                rec.checkpoints = saved.get("checkpoints", False)
            self._records[trial.trial_id] = rec
        else:
            self._release(rec)
            rec.resize_at = None
        rec.iteration = int(trial.last_result.get("training_iteration", 0) or 0)
        rec.phase, rec.base_status, rec.fresh_start = "held", Trial.PENDING, True
        if trial.status == Trial.PENDING:
            if requeued:  # the controller already filed it as PENDING: move it properly
                compat.set_trial_status(compat.controller_of(tune_controller), trial,
                                        Trial.PAUSED)
            else:  # the controller files a new trial by the status it has after this hook
                trial.set_status(Trial.PAUSED)
        self._dirty = True
        self.hook_seconds += time.perf_counter() - t0

    def choose_trial_to_run(self, tune_controller: Any) -> Trial | None:
        t0 = time.perf_counter()
        try:
            self._sync_cluster()
            # A trial the base paused is PAUSED only once Tune saved it; then the base may
            # want to start others (HyperBandForBOHB halves a bracket when nothing runs).
            settled = [t for t in self._pausing if self._records[t].trial.status != Trial.RUNNING]
            if settled:
                self._pausing.difference_update(settled)
                self._dirty = True
            if self._dirty:
                self._plan(tune_controller)
            for tid in list(self._ready):
                rec = self._records[tid]
                if rec.phase not in ("ready", "resizing"):
                    self._ready.remove(tid)
                elif rec.trial.status == Trial.PAUSED:  # a resizing trial: once Tune saved it
                    self._ready.remove(tid)
                    return self._release_to_tune(rec, tune_controller)
            return None
        finally:
            self.hook_seconds += time.perf_counter() - t0

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        t0 = time.perf_counter()
        rec = self._records[trial.trial_id]
        now = self._clock()
        rec.iteration = int(result.get("training_iteration", rec.iteration + 1))
        dt = result.get("time_this_iter_s")
        if rec.resize_at is not None:  # first result after a resize: what it cost
            expected = self._iteration_time(rec) * self._slowdown(rec.actual)
            self._eps_samples.append(max(0.0, now - rec.resize_at - expected))
            rec.resize_at = None
        elif dt is not None and rec.actual and (not rec.fresh_start or not rec.samples):
            rec.samples.append((float(dt), rec.actual))
            new_width = rec.actual not in rec.raw
            rec.raw.setdefault(rec.actual, deque(maxlen=5)).append(float(dt))
            if self.refine and len(rec.raw) > 1 and (new_width or len(rec.raw[rec.actual]) == 2):
                self._refine_overheads(rec)
            self._mean_time = None
            if len(rec.samples) == 1:
                self._replan_groups.add(rec.group)  # first measurement: a profiling round
                self._dirty = True
        rec.fresh_start = False
        rec.phase = "running"
        checkpointed = bool(result.get("should_checkpoint")) or not rec.function
        rec.checkpoints = rec.checkpoints or checkpointed
        with self._base_view():
            decision = self.base.on_trial_result(tune_controller, trial, result)
        if decision == TrialScheduler.CONTINUE and rec.width != rec.actual and checkpointed:
            rec.phase, rec.resize_at = "resizing", now
            rec.resizes += 1
            self._ready.append(trial.trial_id)
            logger.info(
                "Fluid: resizing %s from %s to %s", trial, describe(rec.actual), describe(rec.width)
            )
            decision = TrialScheduler.PAUSE
        elif decision == TrialScheduler.PAUSE or trial.status == Trial.PAUSED:
            # The base pauses it: by its decision (a rung), or itself through the controller
            # (PBT's exploit calls pause_trial and answers NOOP).
            self._release(rec)
            rec.phase, rec.base_status = "paused", Trial.PAUSED
            self._pausing.add(trial.trial_id)
            self._dirty = True
        self._save_state()
        self.hook_seconds += time.perf_counter() - t0
        return decision

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        self._depart(trial)
        with self._base_view():
            self.base.on_trial_complete(tune_controller, trial, result)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self._depart(trial)
        with self._base_view():
            self.base.on_trial_error(tune_controller, trial)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self._depart(trial)
        with self._base_view():
            self.base.on_trial_remove(tune_controller, trial)

    def debug_string(self) -> str:
        counts: dict[str, int] = {}
        for rec in self._records.values():
            if rec.phase in ("running", "ready", "resizing"):
                key = describe(rec.width)
                counts[key] = counts.get(key, 0) + 1
        shapes = ", ".join(f"{n} x {k}" for k, n in sorted(counts.items())) or "none"
        live = [g for g in self._groups.values() if g.name != "rolling" or g.trials]
        current = live[-1].name if live else "-"
        return (
            f"Fluid: {self._gpus:g} GPUs, running {shapes}; queued {len(self._queue)}; "
            f"resizes {self.resizes}, eps {self.eps:.2f}s; "
            f"TrialGroup {current!r}.\n{self.base.debug_string()}"
        )

    def get_trial(self, trial_id: str) -> Trial | None:
        """The Tune trial of that id, if Fluid has seen it."""
        rec = self._records.get(trial_id)
        return rec.trial if rec else None

    @property
    def resizes(self) -> int:
        """How many times Fluid paused a trial to restart it at another width."""
        return sum(r.resizes for r in self._records.values())

    @property
    def groups(self) -> list[TrialGroup]:
        """Every TrialGroup declared so far, oldest first (read-only view)."""
        return [self._groups[g] for g in sorted(self._groups)]

    def shape_timeline(self, trial_id: str) -> list[tuple[float, float | None, tuple[int, ...]]]:
        """``[(clock time, width or None when stopped, GPU ids in Fluid's plan), ...]``.

        GPU ids are those of Fluid's own placement (Ray may pick other physical GPUs for a
        fractional share); they show how the plan packs and spreads trials.
        """
        rec = self._records.get(trial_id)
        return list(rec.shapes) if rec else []

    def trial_shape(self, trial_id: str) -> str:
        """Human-readable current shape of a trial (``'0.5 GPU'``, ``'gang of 3 GPU'``)."""
        rec = self._records.get(trial_id)
        return describe(rec.actual if rec else None)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "w") as f:
            json.dump(self._state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path) as f:
            self._restored = json.load(f).get("trials", {})

    # ------------------------------------------------------------------ planning
    def _plan(self, tc: Any) -> None:
        self._dirty = False
        assert self._pool is not None
        cfg = self._policy
        # Older groups' waiting trials first, then newly eligible ones.
        queued = [self._records[i] for i in self._queue]
        started, waiting = start_in_order([(self._spec(r), r.width) for r in queued], self._pool, cfg)
        self._queue = [s.id for s, _ in waiting]
        self._mark_ready([a.trial_id for a in started])
        for gid, recs in _by_group(self._eligible(tc)).items():
            plan = static_fluid([self._spec(r) for r in recs], self._pool, cfg)
            for rec in recs:
                rec.width = plan.widths[rec.trial.trial_id]
                rec.phase = "queued"
            self._mark_ready([a.trial_id for a in plan.started])
            self._queue += plan.waiting
            self._log_plan("static", gid, plan.widths)
        if self._queue or self._ready or not self.dynamic:
            return
        for gid in sorted(self._replan_groups):
            self._dynamic(gid, cfg)
        self._replan_groups.clear()

    def _dynamic(self, gid: int, cfg: PolicyConfig) -> None:
        assert self._pool is not None
        live = [
            r for r in self._records.values()
            if r.group == gid and r.phase in ("running", "resizing") and r.width is not None
        ]
        if not live:
            return
        running = [
            RunningTrial(self._spec(r), r.width, r.checkpoints and r.phase == "running")
            for r in live
        ]
        plan = dynamic_fluid(running, [], self._pool, replace(cfg, eps=self.eps))
        for z in plan.resized:
            self._records[z.trial_id].width = z.new_width
        if plan.resized:
            self._log_plan("dynamic", gid, {z.trial_id: z.new_width for z in plan.resized})

    def _mark_ready(self, ids: list[str]) -> None:
        for i in ids:
            self._records[i].phase = "ready"
            self._ready.append(i)

    def _release_to_tune(self, rec: _Record, tc: Any) -> Trial:
        assert rec.width is not None
        cpus = rec.cpus if self.cpus_per_trial is None else self.cpus_per_trial
        if rec.trial.checkpoint is not None:
            _sync_experiment(tc)
        rec.trial.update_resources(shape_for(rec.width, cpus, self.cpus_per_worker))
        rec.actual = rec.width
        rec.fresh_start = True
        rec.shapes.append((self._clock(), rec.width, self._pool.where(rec.trial.trial_id)))
        if rec.phase != "resizing":
            rec.phase = "running"
        rec.base_status = Trial.RUNNING
        logger.info("Fluid: starting %s on %s", rec.trial, describe(rec.width))
        return rec.trial

    def _release(self, rec: _Record) -> None:
        if self._pool is not None:
            self._pool.release(rec.trial.trial_id)
        if rec.trial.trial_id in self._queue:
            self._queue.remove(rec.trial.trial_id)
        if rec.trial.trial_id in self._ready:
            self._ready.remove(rec.trial.trial_id)
        rec.width = rec.actual = None

    def _depart(self, trial: Trial) -> None:
        rec = self._records.get(trial.trial_id)
        if rec is None:
            return
        self._release(rec)
        rec.phase = "done"
        rec.shapes.append((self._clock(), None, ()))
        self._replan_groups.add(rec.group)
        self._dirty = True
        self._save_state(force=True)

    def _sync_cluster(self) -> None:
        """A resource change (node joined or left) re-plans with the GPUs there are now.

        Fluid's GPU ids are its own plan, not Ray's devices, so it cannot tell which trials a
        lost node held: those fail in Ray and come back through Tune's retry. Lost capacity
        is taken out of the plan as GPUs fall idle (a deficit), never by evicting a trial
        that may still be running.
        """
        if self._pool is None or self._resources is None:
            return
        gpus = self._resources.gpus()
        if gpus != self._gpus:
            logger.info("Fluid: cluster GPUs changed from %g to %g", self._gpus, gpus)
            self.plan_log.append({"time": self._clock(), "kind": "cluster", "group": None,
                                  "widths": {}, "gpus": gpus})
            self._gpus = gpus
            target = int(math.floor(gpus))
            have = self._pool.n - self._deficit
            if target > have:
                paid = min(self._deficit, target - have)
                self._deficit -= paid
                self._pool.add_gpus(target - have - paid)
            else:
                self._deficit += have - target
            self._replan_groups.update(
                r.group for r in self._records.values() if r.phase == "running"
            )
            self._dirty = True
        if self._deficit:
            placed = self._pool.placement()
            idle = [g for g in reversed(self._pool.gpu_ids) if g not in placed][: self._deficit]
            if idle:
                self._pool.remove_gpus(idle)
                self._deficit -= len(idle)

    # ------------------------------------------------------------------ estimates
    def _slowdown(self, width: float | None) -> float:
        return slowdown(width, self.alpha, self.beta) if width else 1.0

    def _refine_overheads(self, rec: _Record) -> None:
        """Re-estimate ``alpha``/``beta`` when a trial has been seen at another width.

        A trial resized from a share ``1/p`` to ``1/q`` gives ``alpha``, from ``w`` to ``v``
        GPUs gives ``beta``; the median over trials is used. Only this trial's estimate is
        recomputed (results arrive constantly; resizes are rare).
        """
        times = {w: statistics.median(v) for w, v in rec.raw.items() if v}
        packed = sorted((round(1 / w), t) for w, t in times.items() if w <= 1)
        gangs = sorted((round(w), t) for w, t in times.items() if w >= 1)
        alphas = [(tq / tp) ** (1.0 / (q - p))
                  for (p, tp), (q, tq) in zip(packed, packed[1:], strict=False)]
        betas = [(v * tv / (w * tw)) ** (1.0 / (v - w))
                 for (w, tw), (v, tv) in zip(gangs, gangs[1:], strict=False)]
        tid = rec.trial.trial_id
        if alphas:
            self._alpha_by_trial[tid] = statistics.median(alphas)
            self.alpha = max(1.0, statistics.median(self._alpha_by_trial.values()))
        if betas:
            self._beta_by_trial[tid] = statistics.median(betas)
            self.beta = max(1.0, statistics.median(self._beta_by_trial.values()))
        self._mean_time = None  # one-GPU times depend on alpha and beta

    def _iteration_time(self, rec: _Record) -> float:
        """Median one-GPU seconds per iteration: ``time_this_iter_s / f(w)`` at the widths it
        ran, under the current ``alpha`` and ``beta``; unmeasured trials get the mean of the
        measured ones (computed once per change), else ``default_iteration_time``."""
        if rec.samples:
            return statistics.median(t / self._slowdown(w) for t, w in rec.samples)
        if self._mean_time is None:
            known = [self._iteration_time(r) for r in self._records.values() if r.samples]
            self._mean_time = statistics.mean(known) if known else self.default_iteration_time
        return self._mean_time

    def _spec(self, rec: _Record) -> TrialSpec:
        """``h_i1`` = iterations left in the group budget x measured one-GPU iteration time."""
        until = rec.until if rec.until is not None else self._default_until(rec)
        left = max(1, until - rec.iteration)
        d = None if rec.elastic else 1
        return TrialSpec(
            rec.trial.trial_id, left * self._iteration_time(rec), self.alpha, self.beta,
            d=d, memory=self._memory(rec),
        )

    def _memory(self, rec: _Record) -> float | None:
        """GB a trial needs on a GPU, for memory-safe packing (only with ``gpu_memory``).

        Its reported peak (``fluid_peak_gpu_memory``, bytes) when known, else
        ``trial_memory``, else the largest peak reported so far, else a whole GPU: a trial
        of unknown size is never packed, since MPS isolates no memory.
        """
        capacity = self._policy.gpu_memory
        if capacity is None:
            return None
        peak = _peak_gb(rec.trial)
        if peak is not None:
            return peak
        if self.trial_memory is not None:
            return self.trial_memory
        known = [p for r in self._records.values() if (p := _peak_gb(r.trial)) is not None]
        return max(known) if known else capacity

    def _default_until(self, rec: _Record) -> int:
        known = [r.until for r in self._records.values() if r.until is not None]
        return max(known) if known else rec.iteration + 1

    def _is_elastic(self, trial: Trial) -> bool:
        if self.elastic is not None:
            return self.elastic
        try:
            return is_elastic_class(trial.get_trainable_cls())
        except Exception:  # an unregistered trainable cannot be a gang
            return False

    def _check_fits(self, trial: Trial) -> None:
        asked = width_of(trial.placement_group_factory)
        if asked > self._gpus:
            raise FluidConfigError(
                f"trial {trial} asks for {asked:g} GPUs but the cluster has {self._gpus:g}"
            )

    def _install_shape_column(self, controller: Any) -> None:
        """Add each iteration's shape to its result, so progress tables and logs show it."""
        callbacks = compat.callback_list(controller)
        if callbacks is not None:
            callbacks.insert(0, _ShapeColumn(self))  # before the loggers write the result
        elif self.mps is not None:
            logger.warning("Fluid: cannot hook the experiment's end; stop the MPS daemons "
                           "yourself with mps.stop()")

    # ------------------------------------------------------------------ outstanding trials
    def _install_outstanding_limit(self, tc: Any) -> None:
        search_alg = getattr(tc, "search_alg", None)
        searcher = getattr(search_alg, "searcher", None)
        if searcher is None or isinstance(searcher, _OutstandingLimit):
            return  # grid/random search (BasicVariantGenerator) makes whole groups at once
        bound = self.max_outstanding or max(2, int(2 * self._gpus))
        search_alg.searcher = _OutstandingLimit(searcher, self, bound)

    def outstanding(self) -> int:
        """Trials held or running: what a model-based searcher has in flight."""
        return sum(r.phase in ("held", "queued", "ready", "running", "resizing")
                   for r in self._records.values())

    # ------------------------------------------------------------------ state
    def _state(self) -> dict[str, Any]:
        return {
            "eps_samples": list(self._eps_samples),
            "trials": {
                tid: {"samples": [list(x) for x in r.samples], "checkpoints": r.checkpoints,
                      "resizes": r.resizes, "iteration": r.iteration}
                for tid, r in self._records.items()
            },
        }

    def _save_state(self, force: bool = False) -> None:
        # Throttled: with thousands of trials, a write per result would dominate the driver.
        if not self._state_dir or (not force and self._clock() - self._saved_at < 2.0):
            return
        self._saved_at = self._clock()
        path = os.path.join(self._state_dir, _STATE_FILE)
        try:
            os.makedirs(self._state_dir, exist_ok=True)
            with open(path + ".tmp", "w") as f:
                json.dump(self._state(), f)
            os.replace(path + ".tmp", path)
        except OSError as e:  # state is an optimisation; never fail a run over it
            logger.debug("Fluid: could not save state to %s: %s", path, e)

    def _load_state(self) -> dict[str, Any]:
        if not self._state_dir:
            return {}
        path = os.path.join(self._state_dir, _STATE_FILE)
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            return {}
        self._eps_samples.extend(state.get("eps_samples", []))
        logger.info("Fluid: restored measurements of %d trials", len(state.get("trials", {})))
        return state.get("trials", {})

    def _log_plan(self, kind: str, gid: int, widths: dict[str, float]) -> None:
        entry = {"time": self._clock(), "kind": kind, "group": gid,
                 "widths": {k: v for k, v in widths.items()}}
        self.plan_log.append(entry)
        logger.info(
            "Fluid %s plan for TrialGroup %d: %s", kind, gid,
            ", ".join(f"{k}: {describe(v)}" for k, v in widths.items()),
        )


class _ShapeColumn(Callback):
    """Writes ``fluid_shape`` (e.g. ``"0.5 GPU"``) and ``fluid_gpus`` into every result;
    stops the executor's MPS daemons when the experiment ends."""

    def __init__(self, executor: FluidExecutor) -> None:
        self._executor = executor

    def on_trial_result(self, iteration: int, trials: list, trial: Trial, result: dict,
                        **info: Any) -> None:
        rec = self._executor._records.get(trial.trial_id)
        if rec is not None and rec.actual is not None:
            result["fluid_shape"] = describe(rec.actual)
            result["fluid_gpus"] = rec.actual

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._executor.mps is not None:
            self._executor.mps.stop()


class _OutstandingLimit:
    """Wraps a searcher: no new suggestion while ``bound`` trials are held or running."""

    def __init__(self, searcher: Any, executor: FluidExecutor, bound: int) -> None:
        self._searcher, self._executor, self.bound = searcher, executor, bound

    def suggest(self, trial_id: str) -> Any:
        if self._executor.outstanding() >= self.bound:
            return None
        return self._searcher.suggest(trial_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._searcher, name)


def _sync_experiment(tc: Any) -> None:
    """Snapshot the experiment and wait until storage has it, before a trial restarts.

    On restart Tune's loggers replace the driver's result files with the copy in storage
    (``LoggerCallback._restore_from_remote``), which is only synced periodically: results
    reported since the last sync would vanish from ``result.json``. Every Fluid resize is such
    a restart. A full snapshot (not just the result files) keeps the stored results and the
    stored trial checkpoints consistent, so a driver crash right after cannot re-report them.
    """
    try:
        compat.snapshot_experiment(compat.controller_of(tc))
    except Exception as e:  # the periodic sync still runs; say what may be stale
        logger.warning("Fluid: experiment snapshot before a restart failed: %s", e)


def _by_group(recs: list[_Record]) -> dict[int, list[_Record]]:
    out: dict[int, list[_Record]] = {}
    for r in recs:
        out.setdefault(r.group, []).append(r)
    return out


def _peak_gb(trial: Trial) -> float | None:
    last = trial.last_result or {}
    peak = last.get("fluid_peak_gpu_memory")
    return float(peak) / 2**30 if peak else None


def _stop_iteration(trial: Trial) -> int | None:
    stop = trial.stopping_criterion or {}
    value = stop.get("training_iteration")
    return int(value) if value is not None else None


def _is_function(trial: Trial) -> bool:
    try:
        from ray.tune.trainable.function_trainable import FunctionTrainable

        return issubclass(trial.get_trainable_cls(), FunctionTrainable)
    except Exception:
        return True
