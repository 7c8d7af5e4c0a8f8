"""Each trial's life in Fluid's plan, and its one writer: the ``Lifecycle``.

A trial's phase (its ``TrialRecord`` in the ``TrialStore``), its place in the GPU plan
(``pool``), who computes beside it (``residency``), its pending resize (``pending``), the ready
list and the queue are one state: each event moves several of them at once, and a resize is
one pending width from the decision to the restart. ``Lifecycle`` is the only code that
changes them, through the named events below; the executor calls them for what Tune reports
(the phases and their order: ``_records.TRANSITIONS``). The planner changes none of it: each
step of a plan is a ``Decision``, a value, that ``Lifecycle.apply`` turns into the events of
the plan (``planned``, ``sized``, ...).

==================  =======================================================================
event               what it changes
==================  =======================================================================
``admitted``        added (or added again after a failure Tune retries): HELD
``sized``           given a width by the plan: QUEUED
``queued``          waits for capacity, at the end of the queue
``started``         left the queue: placed in the plan
``placed``          placed in the plan: READY, to be handed to Tune
``unready``         placed, but its CPUs do not fit: back to the front of the queue
``released``        handed to Tune at its width: RUNNING (or still RESIZING until it reports)
``reported``        a result: RUNNING at its width
``resize_asked``    the plan moved a running trial's width: a pending resize, or none
``resize_started``  paused to restart at its pending width: RESIZING, ready again
``paused``          the base scheduler paused it: out of the plan, PAUSED
``departed``        completed, failed or removed: out of the plan, DONE
==================  =======================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ray.tune.experiment import Trial

from fluid.core import GpuPool
from fluid.tune._records import Phase, TrialRecord, TrialStore
from fluid.tune._residency import Residency
from fluid.tune._specs import SpecCache


@dataclass(frozen=True)
class Decision:
    """One step of a plan, as a value (``Lifecycle.apply`` carries it out, in this order).

    Attributes:
        pool: the plan's pool after it (``None``: unchanged).
        sort_queue: the queue is put in priority order first.
        started: trials that leave the queue, placed in the plan.
        widths: trials given a width (QUEUED at it).
        placed: trials placed in the plan (READY), in the order they are handed to Tune.
        queued: trials that wait for capacity, after those queued before.
        resized: running trials' new planned widths (pending resizes).
        unready: trials just placed whose CPUs do not fit, each back to the queue's front.
    """

    pool: GpuPool | None = None
    sort_queue: bool = False
    started: tuple[str, ...] = ()
    widths: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    placed: tuple[str, ...] = ()
    queued: tuple[str, ...] = ()
    resized: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    unready: tuple[str, ...] = ()


class Lifecycle:
    """The trials' phases, the GPU plan's pool, residency, pending resizes, the ready list
    and the queue, changed by named events only (see the module docstring).

    Args:
        store: the trials (written here for their phase and place; other fields by their
            measurements).
        specs: the specs cache (a trial out of the plan is dropped from it).
        clock: monotonic clock in seconds.
    """

    def __init__(self, store: TrialStore, specs: SpecCache, clock: Callable[[], float]) -> None:
        self.store, self._specs, self._clock = store, specs, clock
        self.pool: GpuPool | None = None
        self.queue: list[str] = []  # planned, waiting for capacity, in start order
        self.ready: list[str] = []  # placed in the plan, to be returned to Tune
        self.pending: dict[str, float] = {}  # trial id -> the width it is to restart at
        self.residency = Residency()
        self.deficit = 0  # GPUs gone from the cluster but still in the pool (not yet idle)
        # Whether the queue may be out of priority order: it grew, or a queued trial changed
        # (its priority may have); sorting a queue of 10,000 at every plan dominated it.
        self._queue_unsorted = False

    # -- the plan's GPUs ---------------------------------------------------------------
    def open(self, gpus: float, memory: float | None) -> None:
        """Plan on the whole GPUs of ``gpus``, of ``memory`` GB each."""
        self.pool = GpuPool(math.floor(gpus), memory)

    def gpu_memory_changed(self, memory: float | None) -> None:
        """The plan's GPUs have ``memory`` GB each from now on (``GpuMemory``: a GPU node read
        later has less free): what is placed stays, what is placed next fits it; every trial's
        spec is built again (its memory rests on the limit: ``OverheadEstimator.memory``)."""
        if self.pool is not None:
            self.pool.memory = memory
        self._specs.recompute_all()

    def planned(self, pool: GpuPool) -> None:
        """A decision placed trials (or moved them): ``pool`` is the plan's pool after it."""
        self.pool = pool

    def cluster_changed(self, gpus: float | None) -> None:
        """The cluster has ``gpus`` GPUs for the plan now (``None``: as before): whole GPUs
        join the pool at once; lost ones leave it as they fall idle (a deficit), never by
        evicting a trial."""
        if gpus is not None:
            assert self.pool is not None
            target, have = math.floor(gpus), self.pool.n - self.deficit
            if target > have:
                paid = min(self.deficit, target - have)
                self.deficit -= paid
                self.pool.add_gpus(target - have - paid)
            else:
                self.deficit += have - target
        if not self.deficit:
            return
        assert self.pool is not None
        placed = self.pool.placement()
        idle = [g for g in reversed(self.pool.gpu_ids) if g not in placed][: self.deficit]
        if idle:
            self.pool.remove_gpus(idle)
            self.deficit -= len(idle)

    # -- from the plan -----------------------------------------------------------------
    def apply(self, decision: Decision) -> None:
        """Carry out one step of a plan (its events, in ``Decision``'s order)."""
        store = self.store
        if decision.pool is not None:
            self.planned(decision.pool)
        if decision.sort_queue:
            self.sort_queue()
        self.started(decision.started)
        for tid, width in decision.widths.items():
            self.sized(store[tid], width)
        self.placed(decision.placed)
        self.queued(decision.queued)
        for tid, width in decision.resized.items():
            self.resize_asked(store[tid], width)
        for tid in decision.unready:
            self.unready(store[tid])

    def sized(self, rec: TrialRecord, width: float) -> None:
        """The plan gave the trial ``width``: QUEUED."""
        self.store.move(rec, Phase.QUEUED, width=width)

    def queued(self, ids: list[str]) -> None:
        """Trials of one priority wait for capacity, after those queued before."""
        store, queue = self.store, self.queue
        if ids and queue and store[queue[-1]].priority < store[ids[0]].priority:
            self._queue_unsorted = True
        queue += ids

    def sort_queue(self) -> None:
        """Highest priority first (a stable sort, only when it may be out of order: it grew,
        or a priority changed since the last sort)."""
        if self._specs.take_reprioritized():
            self._queue_unsorted = True
        if self._queue_unsorted:
            self.queue.sort(key=lambda i: -self.store[i].priority)
            self._queue_unsorted = False

    @property
    def queue_priority(self) -> int | None:
        """The highest priority of a queued trial (``None``: none queued): the first one's
        while the queue is in priority order, without a scan of it."""
        if not self.queue:
            return None
        if self._queue_unsorted or self._specs.reprioritized:
            return max(self.store[i].priority for i in self.queue)
        return self.store[self.queue[0]].priority

    def started(self, ids: Iterable[str]) -> None:
        """These left the queue (placed in the plan: ``placed`` next)."""
        gone = set(ids)
        if gone:
            self.queue = [i for i in self.queue if i not in gone]

    def placed(self, ids: list[str]) -> None:
        """Placed in the plan: READY, to be handed to Tune in this order."""
        for i in ids:
            self.store.move(self.store[i], Phase.READY)
            self.ready.append(i)

    def unready(self, rec: TrialRecord) -> None:
        """A trial just placed waits again, first in the queue (its CPUs do not fit)."""
        assert self.pool is not None
        self.pool.release(rec.trial_id)
        self.ready.remove(rec.trial_id)
        self.store.move(rec, Phase.QUEUED)
        self.queue.insert(0, rec.trial_id)
        self._queue_unsorted = True

    def resize_asked(self, rec: TrialRecord, width: float) -> None:
        """A running trial's planned width changes: a pending resize unless it is the width
        it runs at."""
        self.store.update(rec, width=width)
        if width != rec.actual:
            self.pending[rec.trial_id] = width
        else:
            self.pending.pop(rec.trial_id, None)

    # -- from Tune ---------------------------------------------------------------------
    def admitted(self, rec: TrialRecord, iteration: int, again: bool) -> None:
        """Added, or added ``again`` after a failure Tune retries: HELD until the base would
        start it (it looks PENDING to the base)."""
        if again:
            self.unplace(rec)
            self.store.update(rec, resize_at=None)
        self.store.move(rec, Phase.HELD, base_status=Trial.PENDING, fresh_start=True,
                        iteration=iteration)

    def take_ready(self, fits: Callable[[TrialRecord], bool] | None = None,
                   ) -> TrialRecord | None:
        """The next trial to hand to Tune at its planned width, once Tune has it PAUSED and
        ``fits`` (if given) says Ray can hold it now; it leaves the ready list."""
        for tid in list(self.ready):
            rec = self.store[tid]
            if rec.phase not in (Phase.READY, Phase.RESIZING):
                self.ready.remove(tid)
            # (a resizing trial: once Tune saved it)
            elif rec.trial.status == Trial.PAUSED and (fits is None or fits(rec)):
                self.ready.remove(tid)
                return rec
        return None

    def released(self, rec: TrialRecord) -> tuple[int, ...]:
        """Handed to Tune at its planned width (a resizing trial stays RESIZING until its
        first result); returns its GPUs in the plan."""
        assert self.pool is not None and rec.width is not None
        phase = Phase.RESIZING if rec.phase is Phase.RESIZING else Phase.RUNNING
        self.store.move(rec, phase, actual=rec.width, fresh_start=True, base_status=Trial.RUNNING)
        now, gpus = self._clock(), self.pool.where(rec.trial_id)
        self.store.log_shape(rec, now, rec.width, gpus)
        self.residency.arrive(rec.trial_id, gpus, now)
        return gpus

    def began(self, rec: TrialRecord, at: float) -> None:
        """Its first iteration since it (re)started began at ``at``: it computes since."""
        self.residency.began(rec.trial_id, at)

    def reported(self, rec: TrialRecord, checkpointed: bool) -> None:
        """A result (with a checkpoint, if ``checkpointed``): RUNNING at its width."""
        self.store.move(rec, Phase.RUNNING, fresh_start=False,
                        checkpoints=rec.checkpoints or checkpointed)

    def resize_started(self, rec: TrialRecord, now: float) -> None:
        """A running trial pauses to restart at its pending width."""
        self.store.move(rec, Phase.RESIZING, resize_at=now, resizes=rec.resizes + 1,
                        budget_resizes=rec.budget_resizes + 1)
        self.residency.leave(rec.trial_id, now)
        self.pending.pop(rec.trial_id, None)
        self.ready.append(rec.trial_id)

    def paused(self, rec: TrialRecord) -> None:
        """The base scheduler paused it (a rung, PBT's exploit): out of the plan."""
        self.unplace(rec)
        self.store.move(rec, Phase.PAUSED, base_status=Trial.PAUSED)

    def departed(self, rec: TrialRecord) -> None:
        """Completed, failed or removed: out of the plan for good."""
        self.unplace(rec)
        self.store.move(rec, Phase.DONE)
        self.store.log_shape(rec, self._clock(), None, ())

    def unplace(self, rec: TrialRecord) -> None:
        """Out of the plan: its GPUs free again, its pending resize and queue place gone."""
        tid = rec.trial_id
        self.residency.leave(tid, self._clock())
        if self.pool is not None:
            self.pool.release(tid)
        self._specs.forget(tid)
        if rec.phase is Phase.QUEUED and tid in self.queue:  # queued: QUEUED only
            self.queue.remove(tid)
        if tid in self.ready:
            self.ready.remove(tid)
        self.pending.pop(tid, None)
        self.store.update(rec, width=None, actual=None)
