"""Fluid's GPU plan of one experiment: trial records in, ``fluid.core`` decisions applied.

Each plan, in this order (what the algorithm waits on first):

* running leaders on a share take a whole GPU (``Resizes.unpack``);
* packing probes, while packing is measured on too few trials (``PackingProbes``);
* the queue, highest priority first: ``start_while_room`` as GPUs free up; no trial starts
  while one of higher priority waits;
* trials the base scheduler would start now, one priority after another: ``static_fluid``
  over all of them (every group) gives each a width ``w`` and places those that fit (READY) in
  the order their algorithm starts them; the others wait in the queue (QUEUED);
* with nothing waiting, the groups whose trials changed: ``Resizes`` undoes failed gangs,
  re-sizes the running trials where it pays and probes gangs on idle GPUs; a resize of a
  running trial is a pending width (``Lifecycle.pending``) that the executor carries out at the
  trial's next checkpointed result;
* when a change re-plans its group: at once (a GPU freed, a first result that may earn its
  trial a GPU, a resized trial running again while a GPU is idle), or in rounds of small
  changes (``replan_due``, ``first_result_due``);
* when measurements change what a fresh trial's packing costs, the waiting trials are sized
  again; a cluster that grew or shrank: the plan's GPUs follow it;
* CPUs: a trial starts or grows only if its shape's CPUs fit (``CpuAccount``); one that asked
  for no GPU (``no_gpu``) starts at width 0 on its request once the base would start it,
  outside the GPU plan and the queue, and, while no GPU trial waits for CPUs, waits in Tune
  for Ray's CPUs as under plain Tune.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Generator, Iterator
from typing import Any

from fluid.core import GpuPool, PolicyConfig, Tunables, static_fluid, water_fill
from fluid.core.packing import PROBE_SHARE, in_flight_bound
from fluid.core.policy import first_result_due, replan_due
from fluid.core.static import start_while_room
from fluid.core.tolerances import CPU_TOL, WIDTH_TOL
from fluid.tune._cpus import CpuAccount
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._lifecycle import Decision, Lifecycle
from fluid.tune._placement_groups import describe
from fluid.tune._probes import PackingProbes
from fluid.tune._records import Phase, TrialRecord, by_group
from fluid.tune._resizes import Resizes
from fluid.tune._resources import ResourceView, cpus_of_view
from fluid.tune._specs import SpecCache

logger = logging.getLogger("fluid")

_RUNNING = frozenset({Phase.RUNNING})


class Planner:
    """Fluid's plans: each step of one, from ``fluid.core``'s decisions, as a ``Decision`` that
    the executor applies to the trials' ``Lifecycle`` (the queue, the ready list, the pool and
    the pending resizes are its); the planner reads them and changes none.

    Args:
        life: the trials' lifecycle (their records, the pool, the queue), read; the executor
            applies the plans' decisions to it.
        specs: the trials' specs.
        estimator: the overheads and iteration times the plans are computed with.
        config: ``c``, ``d``, thresholds and ``gpu_memory`` (``eps`` comes from ``estimator``).
        tunables: the constants of the time-to-target rules.
        dynamic: also run DynamicFluid (``False``: StaticFluid only).
        clock: time stamps of the plan log.
        cpus_per_trial: CPUs of a trial's own bundle (``None``: what the trial asked for).
        cpus_per_worker: CPUs of each gang worker's bundle.
        shares_enforced: a share limits the trial's compute (MPS active-thread percentages).
    """

    def __init__(self, life: Lifecycle, specs: SpecCache, estimator: OverheadEstimator,
                 config: PolicyConfig, tunables: Tunables, *, dynamic: bool,
                 clock: Callable[[], float], cpus_per_trial: float | None = None,
                 cpus_per_worker: float = 1.0, shares_enforced: bool = False) -> None:
        self.life, self._store, self._estimator = life, life.store, estimator
        self._config, self._tunables = config, tunables
        self._dynamic, self._clock = dynamic, clock
        self.specs = specs
        self.cpus = CpuAccount(life.store, cpus_per_trial, cpus_per_worker)
        self.packing = PackingProbes(life.store, specs, estimator, life.residency,
                                     shares_enforced)
        self.resizes = Resizes(life, specs, estimator, config, tunables, self.cpus,
                               self._log_plan)
        self._fresh_c: int | None = None  # c_i of a fresh trial at the last plan
        self._due = True  # something changed since the last plan
        self._replan: set[int] = set()  # groups DynamicFluid looks at in the next plan
        # group -> small changes since its last DynamicFluid re-plan (``replan_batched``)
        self._batched: dict[int, int] = {}
        # group -> its ``sum_j h_j1 / n`` at its last DynamicFluid re-plan (``measured``)
        self._load: dict[int, float] = {}
        self.plan_log: list[dict[str, Any]] = []  # every shape change, for timelines

    def start(self, gpus: float, cpus: float | None = None, whole_budget: bool = False) -> None:
        """Plan for a cluster of ``gpus`` GPUs and ``cpus`` CPUs (``None``: CPUs are not
        counted); the pool (whole GPUs only) is the lifecycle's (``Lifecycle.open``).
        ``whole_budget``: nothing stops a trial before its budget (``TrialFacts``)."""
        self.cpus.total = cpus
        self.specs.whole_budget = whole_budget
        self.specs.set_gpus(gpus)

    @property
    def gpus(self) -> float:
        """The cluster's GPUs the plan is for (kept by the spec cache: each ``d_i`` rests on
        them)."""
        return self.specs.gpus

    @property
    def due(self) -> bool:
        """Whether something changed since the last plan (the next step plans)."""
        return self._due

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
        (``fluid.core.policy.replan_due``): for events that each change little in a large group
        (a trial's first iteration at a new share, a trial leaving a GPU it shared). What is not
        planned yet is in the group's next re-plan at the latest (a GPU freed, a first
        iteration that may earn its trial a GPU, a gang's first at a new width, a rung)."""
        new = self._batched.get(gid, 0) + 1
        self._batched[gid] = new
        if replan_due(new, self.specs.live_count(gid), self._tunables):
            self.replan(gid)

    def observe(self, rec: TrialRecord, dt: float | None, now: float) -> None:
        """A result's iteration time ``dt``: a sample of the trial's speed at the width it ran
        at in effect (``PackingProbes.sample_width``)."""
        first = not rec.samples
        width, clean = self.packing.sample_width(rec, dt, now)
        before = self._estimator.packing_estimate
        exposure = self.packing.exposure(rec, dt, now)
        if self._estimator.observe(rec, dt, now, width, clean, exposure):
            self.measured(rec, first)
        if self._estimator.packing_estimate != before:
            self._log_estimate()

    def in_flight_bound(self, max_outstanding: int | None) -> tuple[int, str]:
        """Most trials a model-based searcher may have in flight, and why.

        ``max_outstanding`` when given. Otherwise never fewer than plain Tune runs at once
        (``tune_at_once``: what fits of the newest trial's request); for a trial that asks for
        no GPU, or on a cluster without GPUs, just that (CPUs bound it, as under plain Tune).
        For GPU trials, what the GPUs run at the speed of one trial alone
        (``fluid.core.packing.in_flight_bound``) with fresh trials packed as an unmeasured one
        would be now, plus the packing probes wanted (trials beyond what the GPUs hold alone:
        a probe packs only while more trials wait than idle GPUs hold), when that is more.
        """
        if max_outstanding is not None:
            return max_outstanding, "max_outstanding"
        newest = self._store.newest()
        tune = self.tune_at_once(newest) if newest is not None else None
        if newest is not None and (newest.no_gpu or self.gpus <= 0):
            return max(1, tune or 1), "what fits at once on the CPUs, as under plain Tune"
        c, probes = self.specs.fresh_c(), self.packing.wanted()
        fluid = in_flight_bound(self.gpus, c, self._estimator.fresh_alpha) + probes
        if tune is not None and tune >= fluid:
            return tune, "what fits at once under plain Tune"
        return fluid, (f"what {self.gpus:g} GPUs run at the speed of one trial alone, packed "
                       f"{c} to a GPU" + (f", and {probes} packing probes" if probes else ""))

    def tune_at_once(self, rec: TrialRecord) -> int | None:
        """How many trials of ``rec``'s own request plain Tune runs at once on the cluster
        (``None``: its CPUs are not counted and it asks for no GPU)."""
        fits = []
        if self.cpus.total is not None and rec.cpus > CPU_TOL:
            fits.append(math.floor(self.cpus.total / rec.cpus + CPU_TOL))
        if rec.asked > 0:
            fits.append(math.floor(self.gpus / rec.asked + WIDTH_TOL))
        return min(fits) if fits else None

    def measured(self, rec: TrialRecord, first: bool) -> None:
        """A result gave the trial a new estimate: its first ``h_i1`` (``first``), or its time
        at a width it never ran at (a new ``alpha_i``/``beta_i``). A first one re-plans the
        group at once when it may earn the trial a GPU (``first_result_due``); a gang's first
        at a width re-plans it at once (a failed probe is undone a result sooner)."""
        if first:
            pool = self.life.pool
            idle = pool.idle_count() if pool is not None else 1
            if first_result_due(self.specs.spec(rec).runtime, self._load.get(rec.group), idle):
                self.replan(rec.group)
            else:
                self.replan_batched(rec.group)
        elif rec.actual is not None and rec.actual >= 2:
            self.replan(rec.group)
        else:
            self.replan_batched(rec.group)

    def restarted(self, rec: TrialRecord) -> None:
        """A resized trial runs again at its new width (its first result): while it restarted
        no re-plan could resize it, so its group is re-planned now if a GPU is idle (one that
        came free meanwhile would otherwise stay idle until the next event)."""
        pool = self.life.pool
        if pool is not None and pool.idle_count():
            self.replan(rec.group)

    def departed(self, rec: TrialRecord) -> None:
        """A trial left its GPUs for good (``unplace`` first): its group is re-planned at
        once if a GPU came free, in the next round if it only freed a share of one."""
        pool = self.life.pool
        if pool is not None and pool.idle_count() == 0:
            self.replan_batched(rec.group)
        else:
            self.replan(rec.group)

    # -- planning ----------------------------------------------------------------------
    def plan(self, eligible: Callable[[], list[TrialRecord]], search_done: bool,
             ) -> Iterator[Decision]:
        """One plan's steps: start queued trials, size the trials ``eligible()`` returns, then
        re-size groups. Each step is a ``Decision`` the caller applies (``Lifecycle.apply``)
        before it asks for the next, which reads the trials as that one left them.

        ``search_done``: the search algorithm will add no more trials (until then GPUs idle
        now may soon serve a new trial, so growing into them is not free).
        """
        self._due = False
        life = self.life
        assert life.pool is not None
        yield from self._follow_fresh_c()
        if self._dynamic:
            yield self.resizes.unpack(life.pool)
        yield from self._probe([self._store[i] for i in life.queue])
        yield Decision(sort_queue=True)
        over = yield from self._start_queued()
        found = [] if over else eligible()
        fit = self.cpus.within(found, self.cpus.free())[0]
        # A trial without GPU starts on its own request once the base would start it; while
        # no GPU trial waits for CPUs, also beyond the CPUs free: Tune then holds it PENDING
        # until Ray has them, as plain Tune does (a trial staged so is also what lets Tune
        # hand it the actor of one that stops, with reuse_actors=True).
        gpu_waits = bool(life.queue) or any(not r.no_gpu for r in found)
        no_gpu = tuple(r.trial_id for r in (fit if gpu_waits else found) if r.no_gpu)
        yield Decision(widths=dict.fromkeys(no_gpu, 0.0), placed=no_gpu)
        newly = [r for r in fit if not r.no_gpu]
        # What the algorithm waits on first: no trial starts while one of a higher priority
        # waits for GPUs (it would take the shares that free up and starve that one).
        waits = life.queue_priority
        for p in sorted({r.priority for r in newly}, reverse=True):
            yield from self._plan_static([r for r in newly if r.priority == p],
                                         waits is None or p >= waits)
            if life.queue:
                waits = max(waits if waits is not None else p, p)
        if life.queue or life.ready or not self._dynamic:
            return
        for gid in sorted(self._replan):
            self._batched.pop(gid, None)
            load = yield from self.resizes.resize_group(gid, life.pool, search_done)
            if load is not None:
                self._load[gid] = load
        self._replan.clear()
        yield self.resizes.probe_gangs(life.pool)

    def _start_queued(self) -> Generator[Decision, None, bool]:
        """Queued trials that fit now start, highest priority first, as many as CPUs allow;
        returns whether some waited for CPUs (then no new trial is sized)."""
        life, store, specs = self.life, self._store, self.specs
        assert life.pool is not None
        if self.cpus.total is None:  # no CPUs to count: read the queue as far as GPUs free up
            over: list[TrialRecord] = []
            pairs = ((specs.placing_spec(store[i]), store[i].width) for i in life.queue)
        else:
            queued, over = self.cpus.within([store[i] for i in life.queue], self.cpus.free())
            pairs = ((specs.placing_spec(r), r.width) for r in queued)
        started, _, pool = start_while_room(pairs, life.pool, self._config,
                                            lambda i: store[i].priority)
        ids = tuple(a.trial_id for a in started)
        yield Decision(pool=pool, started=ids, placed=ids)
        return bool(over)

    def _plan_static(self, recs: list[TrialRecord], start: bool = True,
                     ) -> Iterator[Decision]:
        """StaticFluid over the trials of one priority that may start now, of every group:
        they share the capacity there is (water-filled together), and are placed group after
        group in the order their algorithm would start them, longest first within a group.
        Not ``start``: they are sized as on a full cluster and all wait."""
        life = self.life
        assert life.pool is not None
        probed = (yield from self._probe(recs)) if start else set()
        if probed:
            recs = [r for r in recs if r.trial_id not in probed]
            if not recs:
                return
        groups = by_group(recs)
        rank = {r.trial_id: k for k, rs in enumerate(groups.values()) for r in rs}
        plan = static_fluid([self.specs.spec(r) for r in recs],
                            life.pool if start else GpuPool(0), self._config, rank)
        yield Decision(pool=plan.pool if start else None,
                       widths={r.trial_id: plan.widths[r.trial_id] for r in recs},
                       placed=tuple(a.trial_id for a in plan.started),
                       queued=tuple(plan.waiting))
        for gid, rs in groups.items():
            self._log_plan("static", gid, {r.trial_id: plan.widths[r.trial_id] for r in rs})
        yield self._unready_over_cpus()

    def _unready_over_cpus(self) -> Decision:
        """Trials just placed go back to the queue, newest first, until the CPUs suffice
        (StaticFluid may have grown a gang whose workers need more CPUs than are free)."""
        free, back = self.cpus.free(), []
        for tid in reversed(self.life.ready):
            if free is None or free >= -CPU_TOL:
                break
            rec = self._store[tid]
            if rec.phase is Phase.READY and rec.width:
                free += self.cpus.needed(rec)
                back.append(tid)
        return Decision(unready=tuple(back))

    def _probe(self, waiting: list[TrialRecord]) -> Generator[Decision, None, set[str]]:
        """Packing probes among ``waiting`` trials (``PackingProbes``): those started are
        READY at a half GPU; returns their ids."""
        life = self.life
        assert life.pool is not None
        if not waiting:
            return set()
        started, pool = self.packing.probe(waiting, life.pool)
        ids = tuple(r.trial_id for r in started)
        yield Decision(pool=pool, started=ids, widths=dict.fromkeys(ids, PROBE_SHARE),
                       placed=ids)
        for rec in started:
            self._log_plan("probe", rec.group, {rec.trial_id: PROBE_SHARE})
        return set(ids)

    def _follow_fresh_c(self) -> Iterator[Decision]:
        """When what a fresh trial's packing is assumed to cost changes its ``c_i`` (probes
        measured it), every spec is built again and the waiting trials are sized again."""
        c = self.specs.fresh_c()
        if c == self._fresh_c:
            return
        changed, self._fresh_c = self._fresh_c is not None, c
        life = self.life
        if not changed or life.pool is None:
            return
        self.plan_log.append({"time": self._clock(), "kind": "packing", "group": None,
                              "widths": {}, "c": c,
                              "decided": self._estimator.packing_measured})
        self.specs.recompute_all()
        queued = [self._store[i] for i in life.queue]
        if queued:
            widths = water_fill([self.specs.spec(r) for r in queued], life.pool.n, self._config)
            yield Decision(widths={r.trial_id: widths[r.trial_id] for r in queued})

    def sync_cluster(self, resources: ResourceView | None, outside: int = 0) -> float | None:
        """A resource change (node joined or left, ``outside`` GPUs held by others than the
        experiment's trials) re-plans with the GPUs there are for it now; returns the GPUs
        the plan's pool is to follow (``Lifecycle.cluster_changed``; ``None``: as before).

        Fluid's GPU ids are its own plan, not Ray's devices, so it cannot tell which trials a
        lost node held: those fail in Ray and come back through Tune's retry. Lost capacity
        leaves the plan as GPUs fall idle (a deficit), never by evicting a running trial."""
        if self.life.pool is None or resources is None:
            return None
        total, cpus = resources.gpus(), cpus_of_view(resources)
        gpus = max(0.0, total - outside)
        if cpus != self.cpus.total:
            self.cpus.total, self._due = cpus, True
        if gpus != self.gpus:
            logger.info("Fluid: GPUs for the plan changed from %g to %g%s", self.gpus, gpus,
                        f" ({outside:g} of {total:g} held outside this experiment's trials)"
                        if outside else "")
            self.plan_log.append({"time": self._clock(), "kind": "cluster", "group": None,
                                  "widths": {}, "gpus": gpus})
            self.specs.set_gpus(gpus)
            self._replan.update(r.group for r in self._store.in_phase(_RUNNING))
            self._due = True
            return gpus
        return None

    def _log_estimate(self) -> None:
        """The experiment's packing estimate changed: its value and 95% interval in the plan
        log (kind ``estimate``), and whether it decides packing."""
        est = self._estimator.packing_estimate
        low, high = est.interval()
        self.plan_log.append({"time": self._clock(), "kind": "estimate", "group": None,
                              "widths": {}, "alpha": est.value, "ci95": [low, high],
                              "samples": est.n, "decided": self._estimator.packing_measured})
        logger.debug("Fluid: packing costs alpha %.3f (95%% %.3f-%.3f, %d samples)",
                     est.value, low, high, est.n)

    def _log_plan(self, kind: str, gid: int, widths: dict[str, float]) -> None:
        entry = {"time": self._clock(), "kind": kind, "group": gid,
                 "widths": {k: v for k, v in widths.items()}}
        self.plan_log.append(entry)
        # The user sees each change as the trial starts or resizes (``_plan_lines``).
        logger.debug(
            "Fluid %s plan for TrialGroup %d: %s", kind, gid,
            ", ".join(f"{k}: {describe(v)}" for k, v in widths.items()),
        )
