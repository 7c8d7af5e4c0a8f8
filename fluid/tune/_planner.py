"""Fluid's GPU plan of one experiment: trial records in, ``fluid.core`` decisions applied.

* trials the base scheduler would start now: ``static_fluid`` per TrialGroup gives each a width
  ``w`` and places those that fit (READY), the others wait in the queue (QUEUED);
* the queue, highest priority first: ``start_while_room`` as GPUs free up;
* with nothing waiting, the groups whose trials changed: ``fluid.core.policy`` undoes failed
  gangs and re-sizes the running trials where it pays (``resize_group``), then probes gangs on
  idle GPUs (``probe_gangs``); a resize of a running trial is a pending decision
  (``pending_width``) that the executor carries out at the trial's next checkpointed result;
* when a change re-plans its group: at once, or in rounds of small changes (``replan_due``,
  ``first_result_due``);
* a cluster that grew or shrank: the plan's GPUs follow it;
* CPUs: a trial starts or grows only if its shape's CPUs fit (``CpuAccount``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from ray.tune.experiment import Trial

from fluid.core import (
    GpuPool,
    PolicyConfig,
    Tunables,
    first_result_due,
    group_load,
    is_probe_candidate,
    may_probe,
    probe_gangs,
    replan_due,
    resize_group,
    start_while_room,
    static_fluid,
    undo_slow_gangs,
)
from fluid.core.tolerances import CPU_TOL
from fluid.tune._bridge.resources import ResourceView, cpus_of_view
from fluid.tune._bridge.shapes import describe
from fluid.tune._cpus import CpuAccount
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import Phase, TrialRecord, TrialStore, by_group
from fluid.tune._specs import SpecCache

logger = logging.getLogger("fluid")

_RUNNING = frozenset({Phase.RUNNING})


class Planner:
    """The queue, the trials ready to start, the GPU pool and the pending resizes.

    Args:
        store: the trials.
        estimator: the overheads and iteration times the plans are computed with.
        config: ``c``, ``d``, thresholds and ``gpu_memory`` (``eps`` comes from ``estimator``).
        tunables: the constants of the time-to-target rules.
        dynamic: also run DynamicFluid (``False``: StaticFluid only).
        clock: time stamps of the plan log.
        cpus_per_trial: CPUs of a trial's own bundle (``None``: what the trial asked for).
        cpus_per_worker: CPUs of each gang worker's bundle.
        exact_limits: the config's ``c`` and ``d`` are the user's and apply as given (else,
            from a profile, they only cap what each trial's own overheads allow).
    """

    def __init__(self, store: TrialStore, estimator: OverheadEstimator, config: PolicyConfig,
                 tunables: Tunables, *, dynamic: bool, clock: Callable[[], float],
                 cpus_per_trial: float | None = None, cpus_per_worker: float = 1.0,
                 exact_limits: bool = True) -> None:
        self._store, self._estimator = store, estimator
        self._config, self._tunables = config, tunables
        self._dynamic, self._clock = dynamic, clock
        self.specs = SpecCache(store, estimator, config, tunables, exact_limits)
        self.cpus = CpuAccount(store, cpus_per_trial, cpus_per_worker)
        self.pool: GpuPool | None = None
        self.gpus = 0.0
        self.queue: list[str] = []  # planned, waiting for capacity, in start order
        # Whether the queue may be out of priority order: it grew, or a queued trial changed
        # (its priority may have); sorting a queue of 10,000 at every plan dominated it.
        self._queue_unsorted = False
        self.ready: list[str] = []  # placed in the plan, to be returned to Tune
        self.deficit = 0  # GPUs gone from the cluster but still in the plan (not yet idle)
        self._due = True  # something changed since the last plan
        self._replan: set[int] = set()  # groups DynamicFluid looks at in the next plan
        # group -> small changes since its last DynamicFluid re-plan (``replan_batched``)
        self._batched: dict[int, int] = {}
        # group -> its ``sum_j h_j1 / n`` at its last DynamicFluid re-plan (``measured``)
        self._load: dict[int, float] = {}
        # trial id -> the width a running trial is to restart at (its pending resize)
        self._pending: dict[str, float] = {}
        self.plan_log: list[dict[str, Any]] = []  # every shape change, for timelines

    def start(self, gpus: float, cpus: float | None = None) -> None:
        """Plan on a cluster of ``gpus`` GPUs (whole GPUs only) and ``cpus`` CPUs (``None``:
        CPUs are not counted)."""
        self.gpus, self.cpus.total = gpus, cpus
        self.pool = GpuPool(int(math.floor(gpus)), self._config.gpu_memory)
        self.specs.set_gpus(gpus)

    @property
    def due(self) -> bool:
        """Whether something changed since the last plan (the next step plans)."""
        return self._due

    def pending_width(self, trial_id: str) -> float | None:
        """The width a running trial is to restart at (``None``: no resize pending)."""
        return self._pending.get(trial_id)

    # -- events ------------------------------------------------------------------------
    def plan_again(self) -> None:
        """Plan at the next step (a held trial or one the base paused may start now)."""
        self._due = True

    def replan(self, gid: int) -> None:
        """Have DynamicFluid look at group ``gid`` again at the next plan."""
        self._replan.add(gid)
        self._due = True

    def replan_batched(self, gid: int) -> None:
        """Have DynamicFluid look at group ``gid`` again once enough has changed
        (``fluid.core.replan_due``): for events that each change little in a large group (a
        trial's first iteration at a new share, a trial leaving a GPU it shared). What is not
        planned yet is in the group's next re-plan at the latest (a GPU freed, a first
        iteration that may earn its trial a GPU, a gang's first at a new width, a rung)."""
        new = self._batched.get(gid, 0) + 1
        self._batched[gid] = new
        if replan_due(new, self.specs.live_count(gid), self._tunables):
            self.replan(gid)

    def measured(self, rec: TrialRecord, first: bool) -> None:
        """A result gave the trial a new estimate: its first ``h_i1`` (``first``), or its time
        at a width it never ran at (a new ``alpha_i``/``beta_i``). A first one re-plans the
        group at once when it may earn the trial a GPU (``first_result_due``); a gang's first
        at a width re-plans it at once (a failed probe is undone a result sooner)."""
        if first:
            idle = self.pool.idle_count() if self.pool is not None else 1
            if first_result_due(self.specs.spec(rec).runtime, self._load.get(rec.group), idle):
                self.replan(rec.group)
            else:
                self.replan_batched(rec.group)
        elif rec.actual is not None and rec.actual >= 2:
            self.replan(rec.group)
        else:
            self.replan_batched(rec.group)

    def departed(self, rec: TrialRecord) -> None:
        """A trial left its GPUs for good (``unplace`` first): its group is re-planned at
        once if a GPU came free, in the next round if it only freed a share of one."""
        if self.pool is not None and self.pool.idle_count() == 0:
            self.replan_batched(rec.group)
        else:
            self.replan(rec.group)

    def unplace(self, rec: TrialRecord) -> None:
        """Take a trial out of the plan (its GPUs are free again, its pending resize gone)."""
        tid = rec.trial_id
        if self.pool is not None:
            self.pool.release(tid)
        self.specs.forget(tid)
        if rec.phase is Phase.QUEUED and tid in self.queue:  # queued: QUEUED only
            self.queue.remove(tid)
        if tid in self.ready:
            self.ready.remove(tid)
        self._pending.pop(tid, None)
        self._store.update(rec, width=None, actual=None)

    def start_resize(self, rec: TrialRecord, now: float) -> None:
        """A running trial pauses to restart at its pending width."""
        self._store.move(rec, Phase.RESIZING, resize_at=now, resizes=rec.resizes + 1,
                         budget_resizes=rec.budget_resizes + 1)
        self._pending.pop(rec.trial_id, None)
        self.ready.append(rec.trial_id)

    def next_ready(self, fits: Callable[[TrialRecord], bool] | None = None,
                   ) -> TrialRecord | None:
        """The next trial to hand to Tune at its planned width, once Tune has it PAUSED and
        ``fits`` (if given) says Ray can hold it now."""
        for tid in list(self.ready):
            rec = self._store[tid]
            if rec.phase not in (Phase.READY, Phase.RESIZING):
                self.ready.remove(tid)
            # (a resizing trial: once Tune saved it)
            elif rec.trial.status == Trial.PAUSED and (fits is None or fits(rec)):
                self.ready.remove(tid)
                return rec
        return None

    # -- planning ----------------------------------------------------------------------
    def plan(self, eligible: Callable[[], list[TrialRecord]], search_done: bool) -> None:
        """Start queued trials, size the trials ``eligible()`` returns, then re-size groups.

        ``search_done``: the search algorithm will add no more trials (until then GPUs idle
        now may soon serve a new trial, so growing into them is not free).
        """
        self._due = False
        assert self.pool is not None
        over = self._start_queued()
        newly = [] if over else self.cpus.within(eligible(), self.cpus.free())[0]
        tiers = sorted({r.priority for r in newly}, reverse=True)  # what it waits on first
        for gid, recs in [(g, [r for r in rs if r.priority == p]) for p in tiers
                          for g, rs in by_group(newly).items()]:
            if recs:
                self._plan_static(gid, recs)
        if self.queue or self.ready or not self._dynamic:
            return
        for gid in sorted(self._replan):
            self._batched.pop(gid, None)
            self._resize_group(gid, search_done)
        self._replan.clear()
        self._probe_gangs()

    def _start_queued(self) -> bool:
        """Queued trials that fit now start, highest priority first, as many as CPUs allow;
        returns whether some waited for CPUs (then no new trial is sized)."""
        assert self.pool is not None
        if self.specs.take_reprioritized():
            self._queue_unsorted = True
        if self._queue_unsorted:  # else sorting would leave it as it is (a stable sort)
            self.queue.sort(key=lambda i: -self._store[i].priority)
            self._queue_unsorted = False
        store, ids, specs = self._store, self.queue, self.specs
        if self.cpus.total is None:  # no CPUs to count: read the queue as far as GPUs free up
            over: list[TrialRecord] = []
            pairs = ((specs.placing_spec(store[i]), store[i].width) for i in ids)
        else:
            queued, over = self.cpus.within([store[i] for i in ids], self.cpus.free())
            pairs = ((specs.placing_spec(r), r.width) for r in queued)
        started, read, self.pool = start_while_room(pairs, self.pool, self._config)
        if started:
            begun = {a.trial_id for a in started}
            if self.cpus.total is not None:
                read = len(ids)  # ``read`` counts the trials whose CPUs fit, not the queue
            self.queue = [i for i in ids[:read] if i not in begun] + ids[read:]
        self._mark_ready([a.trial_id for a in started])
        return bool(over)

    def _plan_static(self, gid: int, recs: list[TrialRecord]) -> None:
        """StaticFluid over the trials of one group and priority that may start now."""
        assert self.pool is not None
        plan = static_fluid([self.specs.spec(r) for r in recs], self.pool, self._config)
        self.pool = plan.pool
        for rec in recs:
            self._store.move(rec, Phase.QUEUED, width=plan.widths[rec.trial_id])
        self._mark_ready([a.trial_id for a in plan.started])
        # The waiting trials all have this tier's priority: after trials of no lower
        # priority, the queue stays sorted (trials arriving one by one: no sort each).
        if plan.waiting and self.queue and self._store[self.queue[-1]].priority < recs[0].priority:
            self._queue_unsorted = True
        self.queue += plan.waiting
        self._log_plan("static", gid, plan.widths)
        self._unready_over_cpus()

    def _mark_ready(self, ids: list[str]) -> None:
        for i in ids:
            self._store.move(self._store[i], Phase.READY)
            self.ready.append(i)

    def _unready_over_cpus(self) -> None:
        """Put trials just placed back in the queue, newest first, until the CPUs suffice
        (StaticFluid may have grown a gang whose workers need more CPUs than are free)."""
        assert self.pool is not None
        free = self.cpus.free()
        while free is not None and free < -CPU_TOL:
            rec = next((self._store[i] for i in reversed(self.ready)
                        if self._store[i].phase is Phase.READY), None)
            if rec is None:
                return
            free += self.cpus.needed(rec)
            self.pool.release(rec.trial_id)
            self.ready.remove(rec.trial_id)
            self._store.move(rec, Phase.QUEUED)
            self.queue.insert(0, rec.trial_id)
            self._queue_unsorted = True

    def _resize(self, rec: TrialRecord, width: float) -> None:
        """A running trial's planned width changes: a pending resize unless it is the width
        it runs at."""
        self._store.update(rec, width=width)
        if width != rec.actual:
            self._pending[rec.trial_id] = width
        else:
            self._pending.pop(rec.trial_id, None)

    def _resize_group(self, gid: int, search_done: bool) -> None:
        """Failed gangs back to one GPU, then DynamicFluid where it pays (``fluid.core``)."""
        assert self.pool is not None
        live = self.specs.live_of(gid)
        if not live:
            return
        views = self.specs.live_trials(live)
        eps = self._estimator.eps
        undone, self.pool = undo_slow_gangs(views, self.pool, eps, self._tunables)
        for z in undone:
            self._log_plan("dynamic", gid, {z.trial_id: 1.0})
            self._resize(self._store[z.trial_id], 1.0)
        if undone:
            views = self.specs.live_trials(live)
        self._load[gid] = group_load(views, self.pool)  # what a first result is measured by
        plan = resize_group(views, self.pool, self._config, self._tunables, eps,
                            search_done)
        if plan is None:
            return
        if not self.cpus.hold([(self._store[z.trial_id], z.new_width) for z in plan.resized]):
            return  # the gang workers would need CPUs the cluster does not have
        self.pool = plan.pool
        for z in plan.resized:
            self._resize(self._store[z.trial_id], z.new_width)
        self._log_plan("dynamic", gid, {z.trial_id: z.new_width for z in plan.resized})

    def _probe_gangs(self) -> None:
        """Idle GPUs that nobody waits for go to running trials as gang probes (``fluid.core``)."""
        assert self.pool is not None
        est = self._estimator
        if not may_probe(self.pool, self._config, self._tunables, est.measured_beta):
            return
        running = [r for r in self._store.in_phase(_RUNNING) if r.width is not None]
        views = self.specs.live_trials(running)
        free = self.cpus.free()
        width = float(self._tunables.probe_d)
        extra = None if free is None else {
            t.id: self.cpus.extra(self._store[t.id], width) for t in views if is_probe_candidate(t)}
        probes, self.pool = probe_gangs(views, self.pool, self._config, self._tunables, est.eps,
                                        est.measured_beta, free, extra)
        for z in probes:
            rec = self._store[z.trial_id]
            self._resize(rec, z.new_width)
            self._log_plan("probe", rec.group, {z.trial_id: z.new_width})

    def sync_cluster(self, resources: ResourceView | None) -> None:
        """A resource change (node joined or left) re-plans with the GPUs there are now.

        Fluid's GPU ids are its own plan, not Ray's devices, so it cannot tell which trials a
        lost node held: those fail in Ray and come back through Tune's retry. Lost capacity
        is taken out of the plan as GPUs fall idle (a deficit), never by evicting a trial
        that may still be running.
        """
        if self.pool is None or resources is None:
            return
        gpus, cpus = resources.gpus(), cpus_of_view(resources)
        if cpus != self.cpus.total:
            self.cpus.total, self._due = cpus, True
        if gpus != self.gpus:
            logger.info("Fluid: cluster GPUs changed from %g to %g", self.gpus, gpus)
            self.plan_log.append({"time": self._clock(), "kind": "cluster", "group": None,
                                  "widths": {}, "gpus": gpus})
            self.gpus = gpus
            self.specs.set_gpus(gpus)
            target = int(math.floor(gpus))
            have = self.pool.n - self.deficit
            if target > have:
                paid = min(self.deficit, target - have)
                self.deficit -= paid
                self.pool.add_gpus(target - have - paid)
            else:
                self.deficit += have - target
            self._replan.update(r.group for r in self._store.in_phase(_RUNNING))
            self._due = True
        if self.deficit:
            placed = self.pool.placement()
            idle = [g for g in reversed(self.pool.gpu_ids) if g not in placed][: self.deficit]
            if idle:
                self.pool.remove_gpus(idle)
                self.deficit -= len(idle)

    def _log_plan(self, kind: str, gid: int, widths: dict[str, float]) -> None:
        entry = {"time": self._clock(), "kind": kind, "group": gid,
                 "widths": {k: v for k, v in widths.items()}}
        self.plan_log.append(entry)
        logger.debug(  # the user sees each change as the trial starts or resizes (_bridge.report)
            "Fluid %s plan for TrialGroup %d: %s", kind, gid,
            ", ".join(f"{k}: {describe(v)}" for k, v in widths.items()),
        )
