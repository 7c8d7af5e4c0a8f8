"""Where FluidExecutor reads the cluster's GPUs and CPUs (injected, so a simulator can drive
it), and what Ray's own accounting adds to the plan's: GPUs that Ray gave to others than the
experiment's trials (another job, an unmarked Ray Train trainer's workers) are left out of the
plan (``OutsideGpus``), and while others hold GPUs (and for a Ray Train trial always) a trial
starts only into GPUs Ray has free (``StartGate``).

Fluid's plan frees a GPU the moment a trial leaves it; Ray frees it a moment later (the actor
stops, then its placement group goes), and a trial just handed to Tune takes its GPUs a moment
after. The gate therefore counts the GPUs of trials that are starting (``starting_claims``),
and a GPU counts as outside only once it stayed so for ``Tunables.outside_settle_s``.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable
from typing import Protocol

from ray.tune.experiment import Trial

from fluid.core import Tunables
from fluid.core.tolerances import WIDTH_TOL
from fluid.tune import _ray_compat as compat
from fluid.tune._records import LIVE, TrialRecord, TrialStore

logger = logging.getLogger("fluid")


class ResourceView(Protocol):
    """Where FluidExecutor reads the cluster's GPU count (injected so a simulator can drive it)."""

    def gpus(self) -> float:
        """GPUs of the live nodes."""
        ...


def cpus_of_view(view: object) -> float | None:
    """CPUs of the live nodes when the view knows them (a ``cpus()`` method), else ``None``."""
    cpus = getattr(view, "cpus", None)
    return float(cpus()) if callable(cpus) else None


class RayResourceView:
    """GPUs and CPUs of the live Ray cluster, read at most once every ``refresh_s`` seconds.

    A read asks Ray's control store (milliseconds), a large share of Fluid's own time on the
    driver with many short trials if made at every step. Nodes join or leave far less often
    than every few seconds (an autoscaler takes minutes), so the plan follows them late by at
    most ``refresh_s`` (``Tunables.resources_refresh_s``).
    """

    def __init__(self, clock: Callable[[], float],
                 refresh_s: float = Tunables.resources_refresh_s) -> None:
        self._clock, self._refresh_s = clock, refresh_s
        self._at, self._resources = -math.inf, {}

    def _read(self) -> dict:
        now = self._clock()
        if now - self._at >= self._refresh_s:
            import ray

            self._resources, self._at = ray.cluster_resources(), now
        return self._resources

    def gpus(self) -> float:
        """GPUs of the live Ray cluster (cached for ``refresh_s``)."""
        return float(self._read().get("GPU", 0.0))

    def cpus(self) -> float:
        """CPUs of the live Ray cluster (cached for ``refresh_s``)."""
        return float(self._read().get("CPU", 0.0))

    def busy_gpus(self) -> float:
        """GPUs that placement groups, tasks or actors hold now: the free ones read at each
        call, from the cluster's GPUs as last read (at most ``refresh_s`` old, as for the
        plan; ``OutsideGpus`` counts a GPU only once reads over a longer window agree)."""
        return self.gpus() - self.available_gpus()

    def remove_orphans(self) -> int:
        """Remove the worker groups of Ray Train runs whose controller died (a trial stopped
        or paused for a resize): they hold GPUs nobody can use; return how many."""
        return compat.remove_orphaned_train_groups()

    def available_gpus(self) -> float:
        """GPUs no placement group or task holds now (read at each call: asked only before a
        trial with GPUs starts, ``StartGate``)."""
        import ray

        return float(ray.available_resources().get("GPU", 0.0))


def starting(rec: TrialRecord) -> bool:
    """Whether a trial handed to Tune (``LIVE``; a resizing one once handed back) may not
    hold its GPUs in Ray yet: a Ray Train trial until its workers reported (its first result
    after a start), any other until Tune runs it."""
    return (rec.phase in LIVE and rec.fresh_start
            and (rec.ray_train or rec.trial.status != Trial.RUNNING))


def starting_claims(store: TrialStore, but: TrialRecord) -> float:
    """GPUs of trials handed to Tune (other than ``but``) that Ray may not hold for them
    yet. Counting one that already holds them is safe: ``but`` only waits a little longer;
    a trial planned but not handed to Tune yet claims nothing (it waits its turn)."""
    return sum(rec.width for rec in store.unordered(LIVE)
               if rec is not but and rec.width and starting(rec))


def claimed(store: TrialStore) -> float:
    """GPUs the experiment's trials may hold in Ray now: those of every trial handed to Tune
    (a resizing one: the larger of its old and new width)."""
    return sum(max(rec.width or 0.0, rec.actual or 0.0) for rec in store.unordered(LIVE))


class StartGate:
    """When a planned trial with GPUs may be handed to Tune: once Ray's free GPUs, less those
    of trials that are starting, hold its width (said once per trial while it waits).

    Asked for a Ray Train trial (its trainer's placement group times out if its GPUs do not
    come) and for every trial while others than the experiment's trials hold GPUs
    (``OutsideGpus.seen``: the plan may count them as free until it settles); otherwise the
    plan's free GPUs are Ray's, a moment later, and Tune's placement group waits that moment.
    """

    def __init__(self) -> None:
        self._waiting: set[str] = set()  # trials told they wait for Ray to free GPUs

    def fits(self, rec: TrialRecord, store: TrialStore,
             available: Callable[[], float] | None, others_hold: bool = False) -> bool:
        """Whether Ray's free GPUs (``available()``; ``None``: a view that cannot say) hold
        the trial's width now (always, for a trial without GPU, and for any but a Ray Train
        trial unless ``others_hold``: GPUs are held outside the experiment)."""
        if not rec.width or available is None or not (rec.ray_train or others_hold):
            return True
        free = available() - starting_claims(store, rec)
        if free + WIDTH_TOL >= rec.width:
            self._waiting.discard(rec.trial_id)
            return True
        if rec.trial_id not in self._waiting:
            self._waiting.add(rec.trial_id)
            logger.info("Fluid: %s waits for Ray to free %g GPUs (%g free now)", rec.trial,
                        rec.width, max(free, 0.0))
        return False


class OutsideGpus:
    """Whole GPUs Ray gave to others than the experiment's trials, for the plan to leave out.

    Every ``refresh_s`` it reads what Ray holds now (``busy_gpus``) and subtracts what the
    trials may hold (``claimed``: every trial handed to Tune; while they claim every GPU of
    the cluster, none can be outside and Ray is not asked); a GPU counts only once it
    was outside in every read for ``settle_s`` seconds (a trial that just stopped still
    holds its placement group for a moment). A read that finds GPUs outside first removes the
    worker groups that dead Ray Train controllers left (``remove_orphans``) and reads again:
    those GPUs are nobody's, and counted outside they would leave the plan until the job ends.

    Args:
        clock: monotonic clock in seconds.
        refresh_s: seconds between two reads of Ray's resources.
        settle_s: how long a GPU must stay outside before the plan leaves it out.
    """

    def __init__(self, clock: Callable[[], float], refresh_s: float, settle_s: float) -> None:
        self._clock, self._refresh_s, self._settle_s = clock, refresh_s, settle_s
        self._reads: deque[tuple[float, int]] = deque()  # (time, whole GPUs outside)
        self._outside = 0
        self.seen = False  # others hold GPUs (settled or not): from two reads in a row that
        # found them until one, with no trial starting, finds none

    def read(self, view: object, store: TrialStore) -> int:
        """Whole GPUs outside the experiment that stayed so for ``settle_s`` (0 for a view
        that cannot say, such as the simulator's)."""
        busy = getattr(view, "busy_gpus", None)
        now = self._clock()
        if busy is None or (self._reads and now - self._reads[-1][0] < self._refresh_s):
            return self._outside
        held = claimed(store)
        # Ray holds no more than the cluster's GPUs: the read (milliseconds) is skipped then.
        gpus = getattr(view, "gpus", None)
        found = (0 if gpus is not None and held >= gpus() - WIDTH_TOL
                 else max(0, math.floor(busy() - held + WIDTH_TOL)))
        orphans = getattr(view, "remove_orphans", None)
        # Orphans hold GPUs, so only a read that finds some outside can be fooled by them;
        # their search reads every placement group of the cluster (tens of milliseconds).
        if found and orphans is not None and (removed := orphans()):
            logger.info("Fluid: removed %d placement groups of Ray Train runs whose "
                        "controller died (their GPUs return to Ray)", removed)
            found = max(0, math.floor(busy() - claimed(store) + WIDTH_TOL))
        reads = self._reads
        reads.append((now, found))
        if len(reads) > 1 and reads[-1][1] > 0 and reads[-2][1] > 0:
            self.seen = True  # two in a row: one alone may catch a trial that just stopped
        elif reads[-1][1] == 0 and not any(starting(r) for r in store.unordered(LIVE)):
            # Trials that are starting are claimed before Ray gives them their GPUs: a read
            # then undercounts, and only one without them says nobody else holds GPUs.
            self.seen = False
        while len(reads) > 1 and reads[1][0] <= now - self._settle_s:
            reads.popleft()  # the oldest read kept is the last one from before the window
        watched = reads[0][0] <= now - self._settle_s
        self._outside = min(n for _, n in reads) if watched else 0
        return self._outside
