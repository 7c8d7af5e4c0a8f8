"""What FluidExecutor knows of each trial (a ``TrialRecord`` in a ``Phase``) and of each group.

A trial moves through the phases::

    HELD -> QUEUED -> READY -> RUNNING <-> RESIZING
      ^               ^          |
      |               +- WAITING +
      +------- PAUSED <----------+          (any) -> DONE

HELD: added, waiting until the base scheduler would start it (Tune sees it PAUSED);
QUEUED: StaticFluid gave it a width ``w``, it waits for GPUs; READY: placed in the GPU plan, to
be handed to Tune; RUNNING: Tune runs it at ``actual``; RESIZING: paused by Fluid to restart at
``width``; WAITING: paused by Fluid at a ``sync`` group's barrier until the other members
caught up (then planned again); PAUSED: paused by the base scheduler (a rung, PBT's exploit);
DONE: left for good (a restored experiment's finished trials start DONE).
"""

from __future__ import annotations

import logging
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ray.tune.experiment import Trial

from fluid.core.extras import Extras, extras_of
from fluid.tune._group import TrialGroup
from fluid.tune._shapes import cpus_of, is_elastic_class, request_width, width_of

logger = logging.getLogger("fluid")


class Phase(Enum):
    """Where a trial is in Fluid's life cycle (see the module docstring)."""

    HELD = "held"
    QUEUED = "queued"
    READY = "ready"
    RUNNING = "running"
    RESIZING = "resizing"
    WAITING = "waiting"
    PAUSED = "paused"
    DONE = "done"


#: Tune's status of these differs from what the base scheduler expects (see ``_base``).
MASKED = frozenset({Phase.HELD, Phase.QUEUED, Phase.READY, Phase.RESIZING, Phase.WAITING})
#: Waiting for the base scheduler to (re)start them.
STARTABLE = frozenset({Phase.HELD, Phase.PAUSED})
#: Held or running: what a model-based searcher has in flight.
OUTSTANDING = frozenset({Phase.HELD, Phase.QUEUED, Phase.READY, Phase.RUNNING, Phase.RESIZING,
                         Phase.WAITING})
#: Holding GPUs in Fluid's plan.
PLACED = frozenset({Phase.READY, Phase.RUNNING, Phase.RESIZING})
#: Running in Tune, at their width or being resized to it.
LIVE = frozenset({Phase.RUNNING, Phase.RESIZING})


class _PhaseSlot:
    """``TrialRecord.phase``: setting it also moves the record in its book's phase index, so
    ``TrialBook.in_phase`` costs what is in the phases asked for, not every trial ever seen."""

    def __get__(self, rec: TrialRecord | None, owner: type | None = None) -> Phase:
        if rec is None:
            return Phase.HELD  # the dataclass default
        return rec._phase

    def __set__(self, rec: TrialRecord, phase: Phase) -> None:
        old = rec.__dict__.get("_phase")
        rec._phase = phase
        book = rec.__dict__.get("_book")
        if book is not None and old is not phase:
            book._refile(rec, old)


@dataclass
class TrialRecord:
    """One trial as Fluid sees it.

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
    """

    trial: Trial
    group: int
    until: int | None
    phase: Phase = _PhaseSlot()  # a Phase, default HELD; the book indexes records by it
    base_status: str = Trial.PENDING  # what the base scheduler believes while we hold it
    iteration: int = 0
    width: float | None = None
    actual: float | None = None
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
    asked: float = 0.0  # GPUs in the trial's own placement group (0: no request)
    w_min: float | None = None  # least width honouring ``asked`` (None: Fluid sizes freely)
    request: Any = None  # the trial's own PlacementGroupFactory, run as is at ``w_min``
    warned: bool = False  # told the user Fluid resized its request
    min_share: float | None = None  # least GPU share it fits in (it ran out of memory below)
    own_alpha: tuple[float, int] | None = None  # (its own alpha_i, samples it rests on)
    own_beta: tuple[float, int] | None = None  # (its own beta_i, samples it rests on)
    priority: int = 0  # what the algorithm waits on: > 0 never packed (a promoted trial)
    budget_resizes: int = 0  # resizes since its budget (rung) last changed
    extras: Extras | None = None  # its request's resources beside CPUs and GPUs (kept)
    ray_train: bool = False  # runs a Ray Train trainer: width = its workers (``_ray_train``)
    w_max: float | None = None  # most width it allows (None: no bound of its own)
    # Set by ``TrialBook.add``: the book whose phase index to update, the order of addition.
    _book: TrialBook | None = field(default=None, init=False, repr=False, compare=False)
    _seq: int = field(default=0, init=False, repr=False, compare=False)

    @property
    def trial_id(self) -> str:
        """The Tune trial id."""
        return self.trial.trial_id

    def __setattr__(self, name: str, value: Any) -> None:
        # Any field set tells the book (``TrialBook.changed``): the planner then rebuilds this
        # trial's spec and group membership only, not those of every live trial.
        object.__setattr__(self, name, value)
        book = self.__dict__.get("_book")
        if book is not None:
            book.changed.add(self.trial.trial_id)
            if name == "priority":
                book.reprioritized = True
            elif name == "until":
                book.max_until_stale = True

    def touch(self) -> None:
        """Tell the book that something of the record changed in place (its samples)."""
        if self._book is not None:
            self._book.changed.add(self.trial_id)


class TrialBook:
    """Every trial Fluid has seen (insertion order) and every TrialGroup declared."""

    def __init__(self) -> None:
        self.records: dict[str, TrialRecord] = {}
        self.groups: dict[int, TrialGroup] = {}
        # Records by phase, kept up to date by ``TrialRecord.phase`` (``_PhaseSlot``).
        self._by_phase: dict[Phase, dict[str, TrialRecord]] = {p: {} for p in Phase}
        # Ids of records added or changed (any field set, or ``touch``) since the planner last
        # took them (``take_changed``).
        self.changed: set[str] = set()
        self.reprioritized = False  # a filed record's priority was set since the planner looked
        # Called with each record filed (the estimator counts the measured ones as they
        # come, not by a scan of every record).
        self.on_add: Callable[[TrialRecord], None] | None = None
        self._kinds: dict[str, tuple[bool, bool]] = {}  # trainable name -> trainable_kind
        # The largest budget of any record (``default_until``), counted again only once a
        # record is added or a budget set: every spec asked for it, a scan of every record.
        self._max_until: int | None = None
        self.max_until_stale = False

    def kind_of(self, trial: Trial) -> tuple[bool, bool]:
        """``trainable_kind`` of the trial, looked up once per trainable of the experiment."""
        kind = self._kinds.get(trial.trainable_name)
        if kind is None:
            kind = self._kinds[trial.trainable_name] = trainable_kind(trial)
        return kind

    def get(self, trial_id: str) -> TrialRecord | None:
        """The record of a trial, if seen."""
        return self.records.get(trial_id)

    def __getitem__(self, trial_id: str) -> TrialRecord:
        return self.records[trial_id]

    def add(self, rec: TrialRecord) -> None:
        """File a new trial's record."""
        old = self.records.get(rec.trial_id)
        if old is not None:  # replaced: it keeps the old one's place in the order
            del self._by_phase[old.phase][old.trial_id]
            old._book = None
            rec._seq = old._seq
        else:
            rec._seq = len(self.records)
        self.records[rec.trial_id] = rec
        rec._book = self
        self._by_phase[rec.phase][rec.trial_id] = rec
        self.max_until_stale = True
        if self.on_add is not None:
            self.on_add(rec)

    def take_changed(self) -> set[str]:
        """Ids of the records added or changed since the last call (then forgotten)."""
        changed, self.changed = self.changed, set()
        return changed

    def _refile(self, rec: TrialRecord, old: Phase | None) -> None:
        if old is not None:
            del self._by_phase[old][rec.trial_id]
        self._by_phase[rec.phase][rec.trial_id] = rec

    def in_phase(self, phases: frozenset[Phase]) -> list[TrialRecord]:
        """Records in any of ``phases``, in the order the trials were added."""
        found = [r for p in phases for r in self._by_phase[p].values()]
        found.sort(key=_SEQ)
        return found

    def count(self, phases: frozenset[Phase]) -> int:
        """How many records are in any of ``phases`` (without listing them)."""
        return sum(len(self._by_phase[p]) for p in phases)

    def unordered(self, phases: frozenset[Phase]) -> list[TrialRecord]:
        """Records in any of ``phases``, in no particular order (``in_phase`` sorts them)."""
        return [r for p in phases for r in self._by_phase[p].values()]

    def add_group(self, group: TrialGroup) -> tuple[int, bool]:
        """Declare a group; returns its id and whether budgets of known trials changed.

        A group with the name of an existing one joins it (a HyperBand rung filling up as its
        trials arrive, ASHA's rolling group).
        """
        gid = next((g for g in reversed(self.groups) if group.name and
                    self.groups[g].name == group.name), None)
        if gid is None:
            gid = len(self.groups)
            self.groups[gid] = TrialGroup([], {}, group.name, sync=group.sync,
                                          keep_shape=group.keep_shape)
            logger.info("Fluid: new TrialGroup %d %r", gid, group.name)
        target = self.groups[gid]
        target.sync = target.sync or group.sync
        target.keep_shape = target.keep_shape or group.keep_shape
        changed = False
        for t in group.trials:
            if t.trial_id not in target.until:
                target.trials.append(t)
            target.until[t.trial_id] = group.until[t.trial_id]
            prio = group.priority.get(t.trial_id, 0)
            target.priority[t.trial_id] = prio
            rec = self.records.get(t.trial_id)
            if rec is not None and (rec.group, rec.until) != (gid, group.until[t.trial_id]):
                rec.group, rec.until = gid, group.until[t.trial_id]
                rec.budget_resizes = 0  # a new rung: a fresh allowance of resizes
                changed = True
            if rec is not None and rec.priority != prio:
                rec.priority, changed = prio, True
        return gid, changed

    def group_of_new(self, trial: Trial) -> tuple[int, int | None]:
        """The group and budget (``until``) of a trial being added.

        A trial no group declared joins one rolling group, its budget from the stop criteria.
        """
        for gid in sorted(self.groups, reverse=True):
            if trial.trial_id in self.groups[gid].until:
                return gid, self.groups[gid].until[trial.trial_id]
        until = _stop_iteration(trial)
        self.add_group(TrialGroup([trial], {trial.trial_id: until or 0}, "rolling"))
        gid = max(g for g in self.groups if self.groups[g].name == "rolling")
        return gid, until

    def default_until(self, rec: TrialRecord) -> int:
        """Budget of a trial without one: the largest known, else one more iteration."""
        if self.max_until_stale:
            known = [r.until for r in self.records.values() if r.until is not None]
            self._max_until, self.max_until_stale = max(known, default=None), False
        return self._max_until if self._max_until is not None else rec.iteration + 1

    def resizes(self) -> int:
        """Resizes of all trials."""
        return sum(r.resizes for r in self.records.values())

    def current_group_name(self) -> str:
        """Name of the newest group that has trials (``'-'``: none)."""
        live = [g for g in self.groups.values() if g.name != "rolling" or g.trials]
        return live[-1].name if live else "-"


_SEQ = operator.attrgetter("_seq")


def new_record(trial: Trial, group: int, until: int | None, elastic: bool | None,
               kind: tuple[bool, bool], resize_requests: bool = False) -> TrialRecord:
    """The record of a trial Fluid sees for the first time.

    ``elastic``: ``True``/``False`` for every trainable, ``None`` asks the trainable's class
    (``fluid.train.elastic`` marks it). ``kind``: what ``trainable_kind`` says of its class.
    ``resize_requests``: a trial that asked for GPUs may get fewer (otherwise it gets at least
    what it asked for).
    """
    pgf = trial.placement_group_factory
    rec = TrialRecord(trial, group, until, cpus=cpus_of(pgf),
                      elastic=kind[0] if elastic is None else elastic,
                      function=kind[1], asked=width_of(pgf), extras=extras_of(pgf.bundles))
    if rec.asked > 0 and not resize_requests:
        rec.w_min = request_width(rec.asked)
        rec.request = None if rec.elastic else pgf
    return rec


def trainable_kind(trial: Trial) -> tuple[bool, bool]:
    """Whether the trial's trainable class is elastic (a gang may run it) and whether it is a
    function trainable (it checkpoints only when it says so). Looking the class up in Ray's
    registry takes about a millisecond: ``TrialBook.kind_of`` keeps it per trainable."""
    try:
        cls = trial.get_trainable_cls()
    except Exception:  # an unregistered trainable: no gang, checkpoints only when it says so
        return False, True
    if not isinstance(cls, type):  # a stub trial (no trainable): as unregistered
        return False, True
    from ray.tune.trainable.function_trainable import FunctionTrainable

    return is_elastic_class(cls), issubclass(cls, FunctionTrainable)


def by_group(recs: list[TrialRecord]) -> dict[int, list[TrialRecord]]:
    """Records by group id, each list in the given order."""
    out: dict[int, list[TrialRecord]] = {}
    for r in recs:
        out.setdefault(r.group, []).append(r)
    return out


def _stop_iteration(trial: Trial) -> int | None:
    stop = trial.stopping_criterion or {}
    value = stop.get("training_iteration")
    return int(value) if value is not None else None
