"""Turns FluidExecutor's trial records into ``fluid.core`` calls and keeps Fluid's GPU plan.

* trials the base scheduler would start now: ``static_fluid`` per TrialGroup gives each a width
  ``w`` and places those that fit (READY), the others wait in the queue (QUEUED);
* the queue, oldest first: ``start_in_order`` as GPUs free up;
* with nothing waiting, the groups whose trials changed: ``dynamic_fluid`` re-sizes their
  running trials (the new width is the record's ``width``; the trial restarts at it), only
  where the gain beats ``RESIZE_GAIN`` x ``eps`` (``IDLE_GAIN`` x ``eps`` for a plan that only
  grows trials into idle GPUs), at most ``MAX_RESIZES`` times per trial per
  rung, and only if the guard (``fluid.core.is_safe``) finds the leading trials no later;
  in a group of ``1 / ROUND_SHARE`` running trials or more, small changes (a first iteration
  at a new share, a trial leaving a GPU it shared, with no GPU idle a trial's first iteration
  that shows it below the group's load per GPU) re-plan it once they are ``ROUND_SHARE``
  of them;
* each trial is sized with its own ``alpha_i``, ``beta_i`` (the estimator's prior sharpened by
  its own iteration times); a trial of priority > 0 (promoted, one a rung waits on) is never
  packed unless its own measured ``alpha_i`` is below ``PRIORITY_ALPHA``; the queue starts
  higher priorities first;
* GPUs idle with nothing waiting (a rung's tail, the end of a grid): the longest running
  elastic trial whose ``beta_i`` is not measured is probed as a gang of ``PROBE_D`` (the
  prior says a gang gains nothing, so without a probe ``beta_i`` would never be measured);
  a failed probe goes back to one GPU once its first gang iteration is measured;
* a cluster that grew or shrank: the plan's GPUs follow it;
* CPUs: a trial starts only if the CPUs of its shape fit beside those of the trials placed,
  so Fluid never plans more trials than Ray can run (the rest wait, unsized, until CPUs free).
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
    start_while_room,
    static_fluid,
)
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._ray_train import train_shape
from fluid.tune._records import PLACED, Phase, TrialBook, TrialRecord, by_group
from fluid.tune._resizing import CPU_TOL, Resizing
from fluid.tune._resources import ResourceView, cpus_of_view
from fluid.tune._shapes import cpus_in, describe, shape_cpus, shape_of
from fluid.tune._specs import TrialSpecs

#: Small changes that re-plan a group, as a share of its running trials (``replan_batched``).
ROUND_SHARE = 0.1

logger = logging.getLogger("fluid")


class Planner(Resizing, TrialSpecs):
    """Fluid's GPU plan of one experiment: the queue, the trials ready to start, the pool.

    Args:
        book: the trials.
        estimator: the overheads and iteration times the plans are computed with.
        policy: ``c``, ``d``, thresholds and ``gpu_memory`` (``eps`` comes from ``estimator``).
        dynamic: also run DynamicFluid (``False``: StaticFluid only).
        clock: time stamps of the plan log.
        cpus_per_trial: CPUs of a trial's own bundle (``None``: what the trial asked for).
        cpus_per_worker: CPUs of each gang worker's bundle.
        exact_limits: the policy's ``c`` and ``d`` are the user's and apply as given (else,
            from a profile, they only cap what each trial's own overheads allow).
    """

    def __init__(self, book: TrialBook, estimator: OverheadEstimator, policy: PolicyConfig, *,
                 dynamic: bool, clock: Callable[[], float], cpus_per_trial: float | None = None,
                 cpus_per_worker: float = 1.0, exact_limits: bool = True) -> None:
        self._book, self._estimator, self._policy = book, estimator, policy
        self._dynamic, self._clock = dynamic, clock
        self._cpus_per_trial, self._cpus_per_worker = cpus_per_trial, cpus_per_worker
        self.exact_limits = exact_limits
        self.pool: GpuPool | None = None
        self.gpus = 0.0
        self.cpus: float | None = None  # CPUs of the cluster (None: not limited)
        self.queue: list[str] = []  # planned, waiting for capacity, in start order
        # Whether the queue may be out of priority order: it grew, or a queued trial changed
        # (its priority may have); sorting a queue of 10,000 at every plan dominated it.
        self._queue_unsorted = False
        self.ready: list[str] = []  # placed in the plan, to be returned to Tune
        self.deficit = 0  # GPUs gone from the cluster but still in the plan (not yet idle)
        self.dirty = True
        # The search algorithm will add no more trials (the executor sets it before a plan):
        # until then GPUs idle now may soon serve a new trial, so growing into them is not free.
        self.search_done = False
        self.replan_groups: set[int] = set()
        # group -> small changes since its last DynamicFluid re-plan (``replan_batched``)
        self._batched: dict[int, int] = {}
        # group -> its ``sum_j h_j1 / n`` at its last DynamicFluid re-plan (``replan_first``)
        self._load: dict[int, float] = {}
        self.plan_log: list[dict[str, Any]] = []  # every shape change, for timelines
        self._init_specs()

    def start(self, gpus: float, cpus: float | None = None) -> None:
        """Plan on a cluster of ``gpus`` GPUs (whole GPUs only) and ``cpus`` CPUs (``None``:
        CPUs are not counted)."""
        self.gpus, self.cpus = gpus, cpus
        self.pool = GpuPool(int(math.floor(gpus)), self._policy.gpu_memory)
        self._fresh.clear()  # ``d_i`` depends on the GPUs
        self._settled.clear()

    def shape(self, rec: TrialRecord, width: float) -> Any:
        """The ``PlacementGroupFactory`` the trial runs in at ``width`` GPUs."""
        cpus = rec.cpus if self._cpus_per_trial is None else self._cpus_per_trial
        if rec.ray_train:  # the driver and its workers' CPUs; Train's workers take the GPUs
            return train_shape(width, cpus, self._cpus_per_worker, rec.extras)
        return shape_of(width, cpus, self._cpus_per_worker, rec.request, rec.extras)

    def cpus_needed(self, rec: TrialRecord, width: float | None = None) -> float:
        """CPUs of the trial's shape at ``width`` (default: its planned width, else the least
        it may get)."""
        w = width if width is not None else rec.width
        w = w if w is not None else rec.w_min or 1.0
        if rec.request is None and not rec.ray_train:  # Fluid's gang shape: these alone
            cpus = rec.cpus if self._cpus_per_trial is None else self._cpus_per_trial
            return shape_cpus(w, cpus, self._cpus_per_worker)
        return cpus_in(self.shape(rec, w))

    def _free_cpus(self) -> float | None:
        if self.cpus is None:
            return None
        placed = [r for r in self._book.in_phase(PLACED) if r.width is not None]
        return self.cpus - sum(self.cpus_needed(r) for r in placed)

    def _within_cpus(self, recs: list[TrialRecord], free: float | None,
                     ) -> tuple[list[TrialRecord], list[TrialRecord]]:
        """Split ``recs`` (in order) into those whose CPUs fit in ``free`` and the others."""
        if free is None:
            return recs, []
        fit: list[TrialRecord] = []
        rest: list[TrialRecord] = []
        every_needs = bool(self._cpus_per_trial)  # every Fluid shape takes some CPUs
        for k, r in enumerate(recs):
            if every_needs and free <= CPU_TOL:  # full: spare 10,000-trial groups the shapes
                rest += recs[k:]
                break
            need = self.cpus_needed(r)
            if need <= free + CPU_TOL:
                fit.append(r)
                free -= need
            else:
                rest.append(r)
        return fit, rest

    def _unready_over_cpus(self) -> None:
        """Put trials just placed back in the queue, newest first, until the CPUs suffice
        (StaticFluid may have grown a gang whose workers need more CPUs than are free)."""
        assert self.pool is not None
        free = self._free_cpus()
        while free is not None and free < -CPU_TOL:
            rec = next((self._book[i] for i in reversed(self.ready)
                        if self._book[i].phase is Phase.READY), None)
            if rec is None:
                return
            free += self.cpus_needed(rec)
            self.pool.release(rec.trial_id)
            self.ready.remove(rec.trial_id)
            rec.phase = Phase.QUEUED
            self.queue.insert(0, rec.trial_id)
            self._queue_unsorted = True

    def replan(self, gid: int) -> None:
        """Have DynamicFluid look at group ``gid`` again at the next plan."""
        self.replan_groups.add(gid)
        self.dirty = True

    def replan_batched(self, gid: int) -> None:
        """Have DynamicFluid look at group ``gid`` again once enough has changed.

        For events that each change little in a large group: a trial's first iteration at a
        new share or on one GPU after a resize (a new ``alpha_i``), a trial leaving a GPU it
        shared (no GPU became idle). The group is planned again once such events since its
        last re-plan are ``ROUND_SHARE`` of its running trials (each re-plan visits every
        running trial); a group of fewer than ``1 / ROUND_SHARE`` running trials is planned
        again at each. What is not planned yet is in the group's next re-plan at the latest (a
        GPU freed, a first iteration that may earn its trial a GPU, a gang's first at a new
        width, a rung). A trial's first iteration is batched only when no GPU is idle and the
        trial cannot be due a whole GPU (``replan_first``): batching them all cost 4.8% of
        ``fluid bench sim``'s makespan over 6 seeds (the re-plan after it is what moves long
        trials early).
        """
        if self._book.changed:
            self._take_changes()
        new = self._batched.get(gid, 0) + 1
        self._batched[gid] = new
        if new >= ROUND_SHARE * len(self._live.get(gid, ())):
            self.replan(gid)

    def replan_first(self, rec: TrialRecord) -> None:
        """A trial's first iteration (its ``h_i1`` measured): its group is planned again at
        once if a GPU is idle or if the trial may be due a whole GPU, else in the next round
        (``replan_batched``).

        Water-filling gives a trial one GPU or more only if ``h_i1 >= sum_j h_j1 / n``, the
        group's load per GPU; it is taken from the group's last re-plan. In ``fluid bench
        sim`` (1,000 trials, 512 GPUs), 1,046 re-plans followed a first iteration with no GPU
        idle. 1,016 of them changed nothing, and 27 of the 30 that were applied grew the
        trial just measured. Batching the others leaves makespan and restarts the same on seeds
        0-5 and cuts the hooks' time by more than half.
        """
        load = self._load.get(rec.group)
        if (load is None or self.pool is None or self.pool.idle_count()
                or self.spec(rec).runtime >= load):
            self.replan(rec.group)
        else:
            self.replan_batched(rec.group)

    def plan(self, eligible: Callable[[], list[TrialRecord]]) -> None:
        """Start queued trials, size the trials ``eligible()`` returns, then re-size groups."""
        self.dirty = False
        assert self.pool is not None
        cfg = self._policy
        # Higher priorities first (promoted trials, survivors a rung waits on), then older
        # groups' waiting trials, then newly eligible ones; as many as CPUs allow.
        if self._book.changed:
            self._take_changes()
        if self._queue_unsorted:  # else sorting would leave it as it is (a stable sort)
            self.queue.sort(key=lambda i: -self._book[i].priority)
            self._queue_unsorted = False
        book, ids = self._book, self.queue
        if self.cpus is None:  # no CPUs to count: read the queue only as far as GPUs free up
            over: list[TrialRecord] = []
            pairs = ((self._placing_spec(book[i]), book[i].width) for i in ids)
        else:
            queued, over = self._within_cpus([book[i] for i in ids], self._free_cpus())
            pairs = ((self._placing_spec(r), r.width) for r in queued)
        started, read = start_while_room(pairs, self.pool, cfg)
        if started:
            begun = {a.trial_id for a in started}
            if self.cpus is not None:
                read = len(ids)  # ``read`` counts the trials whose CPUs fit, not the queue
            self.queue = [i for i in ids[:read] if i not in begun] + ids[read:]
        self._mark_ready([a.trial_id for a in started])
        newly = [] if over else self._within_cpus(eligible(), self._free_cpus())[0]
        tiers = sorted({r.priority for r in newly}, reverse=True)  # what it waits on first
        for gid, recs in [(g, [r for r in rs if r.priority == p]) for p in tiers
                          for g, rs in by_group(newly).items()]:
            if not recs:
                continue
            plan = static_fluid([self.spec(r) for r in recs], self.pool, cfg)
            for rec in recs:
                rec.width = plan.widths[rec.trial_id]
                rec.phase = Phase.QUEUED
            self._mark_ready([a.trial_id for a in plan.started])
            # The waiting trials all have this tier's priority: after trials of no lower
            # priority, the queue stays sorted (trials arriving one by one: no sort each).
            if plan.waiting and self.queue and self._book[self.queue[-1]].priority < recs[0].priority:
                self._queue_unsorted = True
            self.queue += plan.waiting
            self._log_plan("static", gid, plan.widths)
            self._unready_over_cpus()
        if self.queue or self.ready or not self._dynamic:
            return
        for gid in sorted(self.replan_groups):
            self._batched.pop(gid, None)
            self._resize_group(gid, cfg)
        self.replan_groups.clear()
        self._probe_gangs(cfg)

    def _mark_ready(self, ids: list[str]) -> None:
        for i in ids:
            self._book[i].phase = Phase.READY
            self.ready.append(i)

    def next_ready(self, fits: Callable[[TrialRecord], bool] | None = None,
                   ) -> TrialRecord | None:
        """The next trial to hand to Tune at its planned width, once Tune has it PAUSED and
        ``fits`` (if given) says Ray can hold it now."""
        for tid in list(self.ready):
            rec = self._book[tid]
            if rec.phase not in (Phase.READY, Phase.RESIZING):
                self.ready.remove(tid)
            # (a resizing trial: once Tune saved it)
            elif rec.trial.status == Trial.PAUSED and (fits is None or fits(rec)):
                self.ready.remove(tid)
                return rec
        return None

    def start_resize(self, rec: TrialRecord, now: float) -> None:
        """A running trial pauses to restart at its planned ``width``."""
        rec.phase, rec.resize_at = Phase.RESIZING, now
        rec.resizes += 1
        rec.budget_resizes += 1
        self.ready.append(rec.trial_id)

    def release(self, rec: TrialRecord) -> None:
        """Take a trial out of the plan (its GPUs are free again)."""
        if self.pool is not None:
            self.pool.release(rec.trial_id)
        self._specs.pop(rec.trial_id, None)
        self._fresh.discard(rec.trial_id)
        self._settled.discard(rec.trial_id)
        if rec.phase is Phase.QUEUED and rec.trial_id in self.queue:  # queued: QUEUED only
            self.queue.remove(rec.trial_id)
        if rec.trial_id in self.ready:
            self.ready.remove(rec.trial_id)
        rec.width = rec.actual = None

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
        if cpus != self.cpus:
            self.cpus, self.dirty = cpus, True
        if gpus != self.gpus:
            logger.info("Fluid: cluster GPUs changed from %g to %g", self.gpus, gpus)
            self.plan_log.append({"time": self._clock(), "kind": "cluster", "group": None,
                                  "widths": {}, "gpus": gpus})
            self.gpus = gpus
            self._fresh.clear()  # ``d_i`` depends on the GPUs
            self._settled.clear()
            target = int(math.floor(gpus))
            have = self.pool.n - self.deficit
            if target > have:
                paid = min(self.deficit, target - have)
                self.deficit -= paid
                self.pool.add_gpus(target - have - paid)
            else:
                self.deficit += have - target
            self.replan_groups.update(r.group for r in self._book.in_phase(
                frozenset({Phase.RUNNING})))
            self.dirty = True
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
        logger.debug(  # the user sees each change as the trial starts or resizes (_report)
            "Fluid %s plan for TrialGroup %d: %s", kind, gid,
            ", ".join(f"{k}: {describe(v)}" for k, v in widths.items()),
        )
