"""What FluidExecutor knows of each trial (a ``TrialRecord`` in a ``Phase``) and of each group,
kept by one owner, the ``TrialStore``.

A trial moves through the phases (``TRANSITIONS``; any other move raises ``PhaseError``)::

    HELD -> QUEUED -> READY -> RUNNING <-> RESIZING
      ^       ^                  |
      |       +--- PAUSED  <-----+
      +--------------- DONE <--- (any)

HELD: added, waiting until the base scheduler would start it (Tune sees it PAUSED);
QUEUED: StaticFluid gave it a width ``w``, it waits for GPUs (READY trials go back to QUEUED
when their CPUs do not fit); READY: placed in the GPU plan, to be handed to Tune; RUNNING:
Tune runs it at ``actual``; RESIZING: paused by Fluid to restart at ``width``; PAUSED: paused
by the base scheduler (a rung, PBT's exploit); DONE: completed, failed or removed (a restored
experiment's finished trials start DONE); a failed trial Tune retries goes from DONE back to
HELD (Tune reports the error, then adds the trial again).

Records are frozen: the store writes them (``add``, ``move``, ``update``, ``add_sample``,
``log_shape``), files them by phase and notes which changed since the planner last looked
(``take_changed``), so the planner rebuilds only those trials' specs.
"""

from __future__ import annotations

import heapq
import logging
import operator
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from fluid.shapes.bundles import label
from fluid.shapes.extras import Extras
from fluid.tune._group import TrialGroup

logger = logging.getLogger("fluid")

#: Tune's status of a trial not started yet (``ray.tune.experiment.Trial.PENDING``).
PENDING = "PENDING"


class Phase(Enum):
    """Where a trial is in Fluid's life cycle (see the module docstring)."""

    HELD = "held"
    QUEUED = "queued"
    READY = "ready"
    RUNNING = "running"
    RESIZING = "resizing"
    PAUSED = "paused"
    DONE = "done"


#: Which phases may follow each phase (a phase may always follow itself).
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.HELD: frozenset({Phase.QUEUED, Phase.DONE}),
    Phase.QUEUED: frozenset({Phase.READY, Phase.DONE}),
    Phase.READY: frozenset({Phase.RUNNING, Phase.QUEUED, Phase.DONE}),
    Phase.RUNNING: frozenset({Phase.RESIZING, Phase.PAUSED, Phase.DONE}),
    Phase.RESIZING: frozenset({Phase.RUNNING, Phase.DONE}),
    Phase.PAUSED: frozenset({Phase.QUEUED, Phase.DONE}),
    Phase.DONE: frozenset({Phase.HELD}),
}

#: Tune's status of these differs from what the base scheduler expects (see ``_base_view``).
MASKED = frozenset({Phase.HELD, Phase.QUEUED, Phase.READY, Phase.RESIZING})
#: Waiting for the base scheduler to (re)start them.
STARTABLE = frozenset({Phase.HELD, Phase.PAUSED})
#: Held or running: what a model-based searcher has in flight.
OUTSTANDING = frozenset({Phase.HELD, Phase.QUEUED, Phase.READY, Phase.RUNNING, Phase.RESIZING})
#: Holding GPUs in Fluid's plan.
PLACED = frozenset({Phase.READY, Phase.RUNNING, Phase.RESIZING})
#: Running in Tune, at their width or being resized to it.
LIVE = frozenset({Phase.RUNNING, Phase.RESIZING})


class PhaseError(RuntimeError):
    """A trial was moved to a phase that may not follow its own (``TRANSITIONS``)."""


@dataclass(frozen=True, eq=False)
class TrialRecord:
    """One trial as Fluid sees it (written by its ``TrialStore`` only).

    ``width`` is the width ``w`` held in the GPU plan (the target while resizing), ``actual``
    the width the trial runs at now; ``samples`` are recent ``(seconds, width)`` per
    iteration and ``raw`` the recent seconds per width (for ``alpha``/``beta``).
    ``asked`` is the GPUs the trial's own placement group asked for; unless the user lets
    Fluid resize requests, ``w_min`` is the least width that gives them, and ``request`` the
    trial's own factory, kept when it runs at ``w_min`` (a trainable that is not elastic).
    ``min_share``: after the trial ran out of GPU memory at a packed share, the least share it
    is given from then on (its ``c_i = floor(1 / min_share)``). ``priority``: the TrialGroup's
    priority of the trial (its rung: a promoted trial, one a synchronous rung waits on);
    ``budget_resizes``: Fluid's resizes of it since its budget last changed (bounded per rung).
    ``extras``: its request's resources beside CPUs and GPUs (accelerator type, custom
    resources), kept in every shape; ``ray_train``: its trainable runs a Ray Train trainer, its
    width the trainer's workers; ``w_max``: the most width it allows (``None``: no bound).
    ``no_gpu``: it asked for no GPU and its trainable is not Fluid-aware (a CPU trial, an
    unmarked Ray Train driver): it runs on its own request at width 0, outside the GPU plan.
    """

    trial: Any  # the Tune ``Trial``
    group: int
    until: int | None
    phase: Phase = Phase.HELD
    base_status: str = PENDING  # what the base scheduler believes while Fluid holds it
    iteration: int = 0
    width: float | None = None
    actual: float | None = None
    samples: deque = field(default_factory=deque)  # recent (seconds, width) per iteration
    raw: dict = field(default_factory=dict)  # width -> recent raw seconds per iteration
    fresh_start: bool = True
    checkpoints: bool = False
    resize_at: float | None = None
    resizes: int = 0
    cpus: float = 1.0  # CPUs of the trainable's bundle (what the trial first asked for)
    elastic: bool = False  # may run as a gang (read once: the registry lookup is an RPC)
    function: bool = True  # a function trainable (checkpoints only when it reports one)
    shapes: list = field(default_factory=list)  # [(clock time, width, gpus)] for timelines
    asked: float = 0.0  # GPUs in the trial's own placement group (0: no request)
    w_min: float | None = None  # least width honouring ``asked`` (None: Fluid sizes freely)
    request: Any = None  # the trial's own PlacementGroupFactory, run as is at ``w_min``
    min_share: float | None = None  # least GPU share it fits in (it ran out of memory below)
    own_alpha: tuple[float, int] | None = None  # (its own alpha_i, samples it rests on)
    own_beta: tuple[float, int] | None = None  # (its own beta_i, samples it rests on)
    priority: int = 0  # what the algorithm waits on: > 0 leads (a promoted trial, ``is_leader``)
    budget_resizes: int = 0  # resizes since its budget (rung) last changed
    probe: bool = False  # started packed to measure packing (``_probes``)
    extras: Extras | None = None  # its request's resources beside CPUs and GPUs (kept)
    # runs a Ray Train trainer: width = its workers (``_train_trials``)
    ray_train: bool = False
    w_max: float | None = None  # most width it allows (None: no bound of its own)
    no_gpu: bool = False  # asked for no GPU, not Fluid-aware: runs on its request, as in Tune
    result_width: float | None = None  # the width its last result ran at (its result rows)
    seq: int = field(default=0, init=False, repr=False)  # order of addition (set when filed)
    # The Tune trial id, read once: every index and plan looks trials up by it.
    trial_id: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "trial_id", self.trial.trial_id)

    def shape(self, width: float | None) -> str:
        """How the trial runs at ``width``, as users read it (``'0.5 GPU'``, ``'gang of 2
        GPU'``, ``'2 GPU'``: a trainable that is neither elastic nor a Ray Train trainer
        holds its GPUs in one process)."""
        return label(width, gang=self.elastic or self.ray_train)


class TrialStore:
    """Every trial Fluid has seen (insertion order), every TrialGroup declared, and the only
    writer of both: records change through its calls, which keep the phase index, the
    transition table and the changes the planner has not taken yet."""

    def __init__(self) -> None:
        self.records: dict[str, TrialRecord] = {}
        self.groups: dict[int, TrialGroup] = {}
        self._by_phase: dict[Phase, dict[str, TrialRecord]] = {p: {} for p in Phase}
        self._changed: set[str] = set()  # ids added or written since ``take_changed``
        self._reprioritized = False  # a filed record's priority was written since then
        # The largest budget of any record (``default_until``), counted again only after a
        # record is added or a budget written: every spec asks for it.
        self._max_until: int | None = None
        self._max_until_stale = False
        # Whether some trial's budget ends before its stop: the algorithm decides at rungs.
        self.has_rungs = False
        # Each trial's own measured alpha_i / beta_i (``own_alpha``/``own_beta`` of its
        # latest record to have one), kept as they are written: their median is every
        # unmeasured trial's estimate, asked at each measurement.
        self.own_alphas: dict[str, float] = {}
        self.own_betas: dict[str, float] = {}
        # Ids of the filed records that are packing probes (counted at every plan).
        self.probes: set[str] = set()
        # Live records whose actor may still be starting, as a heap of (seq, id): each is
        # pushed when it is filed or moved into a live phase (the only way a live trial becomes
        # PENDING in Tune: handed to it), and dropped once ``first_starting`` sees it is not.
        self._maybe_starting: list[tuple[int, str]] = []
        self._in_maybe_starting: set[str] = set()

    # -- reading -----------------------------------------------------------------------
    def get(self, trial_id: str) -> TrialRecord | None:
        """The record of a trial, if seen."""
        return self.records.get(trial_id)

    def __getitem__(self, trial_id: str) -> TrialRecord:
        return self.records[trial_id]

    def in_phase(self, phases: frozenset[Phase]) -> list[TrialRecord]:
        """Records in any of ``phases``, in the order the trials were added."""
        found = [r for p in phases for r in self._by_phase[p].values()]
        found.sort(key=SEQ)
        return found

    def count(self, phases: frozenset[Phase]) -> int:
        """How many records are in any of ``phases`` (without listing them)."""
        return sum(len(self._by_phase[p]) for p in phases)

    def unordered(self, phases: frozenset[Phase]) -> list[TrialRecord]:
        """Records in any of ``phases``, in no particular order (``in_phase`` sorts them)."""
        return [r for p in phases for r in self._by_phase[p].values()]

    @property
    def changed(self) -> bool:
        """Whether any record was added or written since the last ``take_changed``."""
        return bool(self._changed)

    def take_changed(self) -> tuple[set[str], bool]:
        """Ids of the records added or written since the last call, and whether a filed
        record's priority was written meanwhile (both then forgotten)."""
        changed, self._changed = self._changed, set()
        reprioritized, self._reprioritized = self._reprioritized, False
        return changed, reprioritized

    def default_until(self, rec: TrialRecord) -> int:
        """Budget of a trial without one: the largest known, else one more iteration."""
        if self._max_until_stale:
            known = [r.until for r in self.records.values() if r.until is not None]
            self._max_until, self._max_until_stale = max(known, default=None), False
        return self._max_until if self._max_until is not None else rec.iteration + 1

    def newest(self) -> TrialRecord | None:
        """The trial added last (``None``: none yet)."""
        return next(reversed(self.records.values()), None)

    def first_starting(self) -> TrialRecord | None:
        """The first live record (in the order trials were added) whose actor is still
        starting (PENDING in Tune): amortized O(log n) in the records moved into a live phase.

        Why: plain Tune's scheduler names such a trial again while it starts (FIFO answers
        its first PENDING trial), and Tune then gives it an actor cached at a pause or an end
        before any other trial; the executor names it when it releases none, so a cached
        actor goes where plain Tune gives it, not to whichever PENDING trial Tune finds first.
        """
        heap = self._maybe_starting
        while heap:
            rec = self.records.get(heap[0][1])
            if rec is not None and is_starting(rec):
                return rec
            self._in_maybe_starting.discard(heapq.heappop(heap)[1])
        return None

    def _note_live(self, rec: TrialRecord) -> None:
        if rec.phase in LIVE and rec.trial_id not in self._in_maybe_starting:
            self._in_maybe_starting.add(rec.trial_id)
            heapq.heappush(self._maybe_starting, (rec.seq, rec.trial_id))

    def in_flight(self) -> int:
        """Trials in flight for a searcher's bound (held or running): a trial without GPU
        counts only until it runs (its CPUs bound it then, as under plain Tune)."""
        return self.count(OUTSTANDING) - sum(1 for r in self.unordered(LIVE) if r.no_gpu)

    def resizes(self) -> int:
        """Resizes of all trials."""
        return sum(r.resizes for r in self.records.values())

    def current_group_name(self) -> str:
        """Name of the newest group that has trials (``'-'``: none)."""
        live = [g for g in self.groups.values() if g.name != "rolling" or g.trials]
        return live[-1].name if live else "-"

    # -- writing -----------------------------------------------------------------------
    def add(self, rec: TrialRecord) -> None:
        """File a new record in the phase it was built with (HELD, or DONE when restored)."""
        old = self.records.get(rec.trial_id)
        if old is not None:  # replaced: it keeps the old one's place in the order
            del self._by_phase[old.phase][old.trial_id]
            self.probes.discard(rec.trial_id)
        if rec.probe:
            self.probes.add(rec.trial_id)
        object.__setattr__(rec, "seq", old.seq if old is not None else len(self.records))
        self.records[rec.trial_id] = rec
        self._by_phase[rec.phase][rec.trial_id] = rec
        self._changed.add(rec.trial_id)
        self._max_until_stale = True
        self._note_live(rec)

    def update(self, rec: TrialRecord, **values: Any) -> None:
        """Write fields of a record (not its phase: ``move``)."""
        if "phase" in values:
            raise ValueError("a record's phase changes through TrialStore.move")
        for name, value in values.items():
            object.__setattr__(rec, name, value)
        if values.get("own_alpha") is not None:
            self.own_alphas[rec.trial_id] = values["own_alpha"][0]
        if values.get("own_beta") is not None:
            self.own_betas[rec.trial_id] = values["own_beta"][0]
        if self.records.get(rec.trial_id) is rec:
            if "probe" in values:
                (self.probes.add if rec.probe else self.probes.discard)(rec.trial_id)
            self._changed.add(rec.trial_id)
            self._reprioritized = self._reprioritized or "priority" in values
            self._max_until_stale = self._max_until_stale or "until" in values

    def move(self, rec: TrialRecord, phase: Phase, **values: Any) -> None:
        """Move a filed record to ``phase`` (and write ``values``); ``PhaseError`` if
        ``phase`` may not follow the record's phase."""
        old = rec.phase
        if phase is not old:
            if phase not in TRANSITIONS[old]:
                raise PhaseError(f"trial {rec.trial_id}: {phase.name} may not follow {old.name}")
            del self._by_phase[old][rec.trial_id]
            self._by_phase[phase][rec.trial_id] = rec
            object.__setattr__(rec, "phase", phase)
        self._note_live(rec)
        self.update(rec, **values)

    def add_sample(self, rec: TrialRecord, seconds: float, width: float, kept: int,
                   raw: bool = True) -> bool:
        """Keep one iteration's ``seconds`` at ``width`` (the ``kept`` most recent, and as
        many per width unless not ``raw``: a sample whose width changed during it); returns
        whether the trial never ran at that width before."""
        rec.samples.append((seconds, width))
        if len(rec.samples) > kept:
            rec.samples.popleft()
        new = raw and width not in rec.raw
        if raw:
            rec.raw.setdefault(width, deque(maxlen=kept)).append(seconds)
        self._changed.add(rec.trial_id)
        return new

    def log_shape(self, rec: TrialRecord, time: float, width: float | None,
                  gpus: tuple[int, ...]) -> None:
        """Note the trial's shape from ``time`` on (its timeline; not a planning input)."""
        rec.shapes.append((time, width, gpus))

    # -- groups ------------------------------------------------------------------------
    def add_group(self, group: TrialGroup) -> tuple[int, bool]:
        """Declare a group; returns its id and whether budgets of known trials changed.

        A group with the name of an existing one joins it (a HyperBand rung filling up as its
        trials arrive, ASHA's rolling group).
        """
        gid = next((g for g in reversed(self.groups) if group.name and
                    self.groups[g].name == group.name), None)
        if gid is None:
            gid = len(self.groups)
            self.groups[gid] = TrialGroup([], {}, group.name, keep_shape=group.keep_shape)
            logger.info("Fluid: new TrialGroup %d %r", gid, group.name)
        target = self.groups[gid]
        target.keep_shape = target.keep_shape or group.keep_shape
        changed = False
        for t in group.trials:
            if t.trial_id not in target.until:
                target.trials.append(t)
            target.until[t.trial_id] = group.until[t.trial_id]
            stop = stop_of(t)
            until = group.until[t.trial_id]
            if not self.has_rungs and until is not None and stop is not None and until < stop:
                self.has_rungs = True  # every spec's leaders change: built again
                self._changed.update(self.records)
            prio = group.priority.get(t.trial_id, 0)
            target.priority[t.trial_id] = prio
            rec = self.records.get(t.trial_id)
            if rec is not None and (rec.group, rec.until) != (gid, group.until[t.trial_id]):
                # a new rung: a fresh allowance of resizes
                self.update(rec, group=gid, until=group.until[t.trial_id], budget_resizes=0)
                changed = True
            if rec is not None and rec.priority != prio:
                self.update(rec, priority=prio)
                changed = True
        return gid, changed

    def group_of_new(self, trial: Any, stop_until: int | None) -> tuple[int, int | None]:
        """The group and budget (``until``) of a trial being added.

        A trial no group declared joins one rolling group, its budget ``stop_until`` (from the
        stop criteria).
        """
        for gid in sorted(self.groups, reverse=True):
            if trial.trial_id in self.groups[gid].until:
                return gid, self.groups[gid].until[trial.trial_id]
        self.add_group(TrialGroup([trial], {trial.trial_id: stop_until or 0}, "rolling"))
        gid = max(g for g in self.groups if self.groups[g].name == "rolling")
        return gid, stop_until


def is_starting(rec: TrialRecord) -> bool:
    """Handed to Tune, its actor still starting (PENDING in Tune)."""
    return rec.phase in LIVE and rec.trial.status == PENDING


def stop_of(trial: Any) -> int | None:
    """The iteration a trial stops at (its ``training_iteration`` stop criterion), if any."""
    value = (getattr(trial, "stopping_criterion", None) or {}).get("training_iteration")
    return int(value) if value is not None else None


#: Records in the order they were added.
SEQ = operator.attrgetter("seq")


def by_group(recs: list[TrialRecord]) -> dict[int, list[TrialRecord]]:
    """Records by group id, each list in the given order."""
    out: dict[int, list[TrialRecord]] = {}
    for r in recs:
        out.setdefault(r.group, []).append(r)
    return out
