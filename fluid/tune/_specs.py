"""The specs Fluid's policy sees, one per trial, kept while the trial's record is unchanged.

A trial's ``TrialSpec``: ``h_i1`` (iterations left x its one-GPU iteration time), its own
``alpha_i``, ``beta_i`` and from them ``c_i``, ``d_i`` (``fluid.core.policy.trial_limits``), its
memory and least width; a running trial's ``LiveTrial`` adds its width and what the re-sizing
rules read. A re-plan looks at every live trial of a group, most of them unchanged since the
last one, so both are kept until the trial's record changes (``TrialStore.take_changed``), and
the live trials with a width are indexed by group from the same changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from fluid.core import LiveTrial, PolicyConfig, TrialFacts, TrialSpec, Tunables, trial_limits
from fluid.core.packing import is_leader
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import LIVE, SEQ, Phase, TrialRecord, TrialStore, stop_of

_DONE = frozenset({Phase.DONE})


class SpecInputs(NamedTuple):
    """What a trial's ``TrialSpec`` is built from (the same inputs: the same spec)."""

    runtime: float  # h_i1: iterations left x one-GPU iteration time
    alpha: float
    beta: float
    c: int
    d: int
    memory: float | None
    w_min: float | None


class _Cached(NamedTuple):
    """A trial's spec, what it was built from, and its ``LiveTrial`` (``None``: not built)."""

    inputs: SpecInputs
    spec: TrialSpec
    live: LiveTrial | None


class SpecCache:
    """Each trial's ``TrialSpec`` and ``LiveTrial``, and the live trials of each group.

    Args:
        store: the trials.
        estimator: the overheads and iteration times specs are built from.
        config: ``c``, ``d``, thresholds of the policy.
        tunables: the constants of the limits and of the resizes per rung.
        exact_limits: the config's ``c`` and ``d`` are the user's and apply as given (else,
            from a profile, they only cap what each trial's own overheads allow).
    """

    def __init__(self, store: TrialStore, estimator: OverheadEstimator, config: PolicyConfig,
                 tunables: Tunables, exact_limits: bool = True) -> None:
        self._store, self._estimator = store, estimator
        self.config, self.tunables, self.exact = config, tunables, exact_limits
        self.gpus = 0.0  # ``d_i`` depends on the cluster's GPUs
        # Nothing stops a trial before its budget (a FIFO base): ``throughput_only``.
        self.whole_budget = False
        # Each trial's cached spec: rebuilding them for every live trial at each re-plan
        # dominated its cost.
        self._specs: dict[str, _Cached] = {}
        # Ids whose cached spec (and LiveTrial, if any) is exact without recomputing its
        # inputs: the record is unchanged since and the spec rests on the record alone
        # (``OverheadEstimator.own_inputs``).
        self._fresh: set[str] = set()
        # Ids whose record is unchanged since their spec was cached (``placing_spec``).
        self._settled: set[str] = set()
        # Live trials with a width, by group (what DynamicFluid re-sizes), kept from the
        # store's changes instead of a scan of every live trial at every re-plan of a group.
        self._live: dict[int, dict[str, TrialRecord]] = {}
        self._live_group: dict[str, int] = {}  # trial id -> its group in ``_live``
        self._live_sorted: dict[int, list[TrialRecord]] = {}  # in order of addition
        self._reprioritized = False  # a priority changed since ``take_reprioritized``
        # What every trial's c_i rests on (``fresh_alpha``, ``packing_measured``,
        # ``throughput_only``): when it changes, every spec is computed again.
        self._shared: tuple[float, bool, bool] | None = None

    def set_gpus(self, gpus: float) -> None:
        """The cluster has ``gpus`` GPUs now: every ``d_i`` is computed again."""
        self.gpus = gpus
        self.recompute_all()

    def recompute_all(self) -> None:
        """Every spec is computed again at its next use (what all of them rest on moved)."""
        self._fresh.clear()
        self._settled.clear()

    def forget(self, trial_id: str) -> None:
        """Drop a trial's cached spec (it left the plan)."""
        self._specs.pop(trial_id, None)
        self._fresh.discard(trial_id)
        self._settled.discard(trial_id)

    @property
    def reprioritized(self) -> bool:
        """Whether a trial's priority changed since the last ``take_reprioritized``."""
        self._sync()
        return self._reprioritized

    def take_reprioritized(self) -> bool:
        """Whether a trial's priority changed since the last call (the queue's order may)."""
        self._sync()
        found, self._reprioritized = self._reprioritized, False
        return found

    def spec(self, rec: TrialRecord) -> TrialSpec:
        """``h_i1`` = iterations left in the group budget x measured one-GPU iteration time,
        with the trial's own ``alpha_i``, ``beta_i``, ``c_i``, ``d_i``, memory and least width.
        """
        self._sync()
        tid = rec.trial_id
        if tid in self._fresh:
            return self._specs[tid].spec
        est = self._estimator
        until = rec.until if rec.until is not None else self._store.default_until(rec)
        left = max(1, until - rec.iteration)
        if tid in self._settled:  # record unchanged: only what rests on other trials moved
            old = self._specs[tid].inputs
            alpha, beta, c, d, w_min = old.alpha, old.beta, old.c, old.d, old.w_min
        else:
            alpha, beta = est.alpha_of(rec), est.beta_of(rec)
            c, d, w_min = trial_limits(self._facts(rec, alpha, beta), self.config,
                                       self.tunables, self.gpus, self.exact)
        inputs = SpecInputs(left * est.iteration_time(rec), alpha, beta, c, d, est.memory(rec),
                            w_min)
        own = rec.until is not None and est.own_inputs(rec)
        cached = self._specs.get(tid)
        if cached is not None and cached.inputs == inputs:
            # A fresh spec's LiveTrial must be built while fresh (``live_trial``).
            spec, live = cached.spec, None if own else cached.live
        elif cached is not None and cached.inputs._replace(runtime=inputs.runtime) == inputs:
            # only h_i1 moved
            spec, live = cached.spec.with_runtime(inputs.runtime), None
        else:
            spec, live = TrialSpec(tid, *inputs), None
        self._specs[tid] = _Cached(inputs, spec, live)
        self._settled.add(tid)
        if own:
            self._fresh.add(tid)
        return spec

    def with_c(self, recs: Iterable[TrialRecord], c: int) -> list[TrialRecord]:
        """Those of ``recs`` whose ``c_i`` is ``c``: a cached spec's while its record is
        unchanged (``c_i`` rests on the record and on what ``_sync`` watches), without
        building the spec again."""
        self._sync()
        settled, specs = self._settled, self._specs
        return [r for r in recs
                if (specs[r.trial_id].inputs.c if r.trial_id in settled else self.spec(r).c) == c]

    def _facts(self, rec: TrialRecord, alpha: float, beta: float) -> TrialFacts:
        return TrialFacts(
            alpha, beta, alpha_measured=rec.own_alpha is not None,
            beta_measured=rec.own_beta is not None, measured=bool(rec.samples),
            elastic=rec.elastic, priority=rec.priority, min_share=rec.min_share,
            w_min=rec.w_min, keeps_shape=self.keeps_shape(rec), asked=rec.asked,
            own_request=rec.request is not None, runs_to_end=self._runs_to_end(rec),
            probe=rec.probe and not self._estimator.sampled(rec),
            packing_measured=self._estimator.packing_measured,
            ray_train=rec.ray_train, w_max=rec.w_max, throughput_only=self.throughput_only())

    def throughput_only(self) -> bool:
        """Whether trials pack for throughput alone (``TrialFacts.throughput_only``): nothing
        stops a trial before its budget, and a trial has run its whole budget.

        Until then the first trials, one per GPU as under plain Tune, are the earliest chance
        at any target a user watches for (each later trial's chance comes after theirs), and
        packing would slow each of them by its ``alpha_i``; once one ended, the first wave's
        chance is taken, and the grid's answer comes with its last trial.
        """
        return self.whole_budget and self._store.count(_DONE) > 0

    def leads(self, rec: TrialRecord) -> bool:
        """Whether the trial leads (``fluid.core.packing.is_leader``)."""
        return is_leader(rec.priority, self._runs_to_end(rec))

    def fresh_c(self) -> int:
        """``c_i`` a trial nothing is measured about would get now (a fresh one)."""
        facts = TrialFacts(self._estimator.fresh_alpha, self._estimator.prior_beta,
                           throughput_only=self.throughput_only())
        return trial_limits(facts, self.config, self.tunables, self.gpus, self.exact)[0]

    def _runs_to_end(self, rec: TrialRecord) -> bool:
        """Its budget reaches its stop while the algorithm decides others at rungs."""
        stop = stop_of(rec.trial)
        return (self._store.has_rungs and stop is not None and rec.until is not None
                and rec.until >= stop)

    def placing_spec(self, rec: TrialRecord) -> TrialSpec:
        """A spec to place a queued trial with: placing reads only its id, ``c_i`` and
        memory, which rest on the record alone (memory too, ``own_memory``), so the cached
        spec serves while the record is unchanged, although an unmeasured trial's ``h_i1``
        (the mean over measured trials) moves with every result of any other trial."""
        self._sync()
        if rec.trial_id in self._settled and self._estimator.own_memory(rec):
            return self._specs[rec.trial_id].spec
        return self.spec(rec)

    def keeps_shape(self, rec: TrialRecord) -> bool:
        """The trial's TrialGroup keeps plain Tune's shapes (``keep_shape``, PBT)."""
        group = self._store.groups.get(rec.group)
        return group is not None and group.keep_shape

    def live_trial(self, rec: TrialRecord) -> LiveTrial:
        """``LiveTrial`` of a trial with a width, the one of the last re-plan if unchanged."""
        spec = self.spec(rec)
        cached = self._specs[rec.trial_id]
        inputs, old = cached.inputs, cached.live
        keeps = self.keeps_shape(rec)
        if old is not None and rec.trial_id in self._fresh and old.keeps_shape is keeps:
            return old
        assert rec.width is not None
        facts = (rec.width, rec.checkpoints and rec.phase is Phase.RUNNING, rec.budget_resizes,
                 rec.priority, rec.own_beta is not None, rec.elastic, bool(rec.samples), keeps)
        if old is not None and old.trial.spec is spec and facts == (
                old.trial.width, old.pausable, old.resizes, old.priority, old.beta_measured,
                old.elastic, old.measured, old.keeps_shape):
            return old
        width, pausable, resizes, priority, beta_measured, elastic, measured, _ = facts
        new = LiveTrial.of(spec, width, self.tunables, pausable=pausable, resizes=resizes,
                           priority=priority, beta_measured=beta_measured, elastic=elastic,
                           measured=measured, keeps_shape=keeps)
        self._specs[rec.trial_id] = _Cached(inputs, spec, new)
        return new

    def live_trials(self, recs: list[TrialRecord]) -> list[LiveTrial]:
        """``live_trial`` of each record; those fresh since the last re-plan without a call
        each (a re-plan visits every live trial of the group, most of them unchanged)."""
        self._sync()
        fresh, specs, out = self._fresh, self._specs, []
        for r in recs:
            tid = r.trial.trial_id
            old = specs[tid].live if tid in fresh else None
            if old is None or old.keeps_shape is not self.keeps_shape(r):
                old = self.live_trial(r)
            out.append(old)
        return out

    def live_of(self, gid: int) -> list[TrialRecord]:
        """Live trials of group ``gid`` with a width, in the order they were added."""
        self._sync()
        found = self._live_sorted.get(gid)
        if found is None:
            found = sorted(self._live.get(gid, {}).values(), key=SEQ)
            self._live_sorted[gid] = found
        return list(found)

    def live_count(self, gid: int) -> int:
        """How many live trials with a width group ``gid`` has."""
        self._sync()
        return len(self._live.get(gid, ()))

    def _sync(self) -> None:
        """Forget the cached specs of the records changed since the last call (of every record
        when the experiment's packing measurement changed) and move them in or out of the
        live-by-group index."""
        est = self._estimator
        shared = (est.fresh_alpha, est.packing_measured, self.throughput_only())
        if shared != self._shared:
            self._shared = shared
            self._fresh.clear()
            self._settled.clear()
        if not self._store.changed:
            return
        changed, reprioritized = self._store.take_changed()
        self._fresh -= changed
        self._settled -= changed
        self._reprioritized = self._reprioritized or reprioritized
        for tid in changed:
            rec = self._store.get(tid)
            new = (rec.group if rec is not None and rec.phase in LIVE and rec.width
                   else None)  # (width 0: a trial without GPU, outside the GPU plan)
            old = self._live_group.get(tid)
            if old == new and (new is None or self._live[new][tid] is rec):
                continue
            if old is not None:
                del self._live[old][tid], self._live_group[tid]
                self._live_sorted.pop(old, None)
                if not self._live[old]:
                    del self._live[old]
            if new is not None:
                assert rec is not None
                self._live.setdefault(new, {})[tid] = rec
                self._live_group[tid] = new
                self._live_sorted.pop(new, None)
