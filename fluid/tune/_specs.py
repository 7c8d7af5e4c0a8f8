"""The specs Fluid's policy sees, one per trial, cached (``TrialSpecs``, a part of
``fluid.tune._planner.Planner``).

A trial's ``TrialSpec``: ``h_i1`` (iterations left x its one-GPU iteration time), its own
``alpha_i``, ``beta_i`` and from them ``c_i``, ``d_i`` (``_limits``), its memory and least
width. A re-plan looks at every live trial of a group, most of them unchanged since the last
one, so specs are kept until the trial's record changes (``TrialBook.changed``), and the live
trials with a width are indexed by group from the same changes (issue 14).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fluid.core import RunningTrial, TrialSpec, c_from_alpha, d_from_beta
from fluid.tune._records import _SEQ, LIVE, Phase, TrialRecord
from fluid.tune._resizing import MAX_RESIZES, PROBE_D
from fluid.tune._shapes import request_width

if TYPE_CHECKING:
    from fluid.tune._planner import Planner

#: A trial of priority > 0 may be packed only if its own measured ``alpha_i`` is below this.
PRIORITY_ALPHA = 1.05


class TrialSpecs:
    """The cached specs and the live-by-group index of ``Planner`` (a mixin: it reads the
    planner's book, estimator, policy and GPUs)."""

    def _init_specs(self: Planner) -> None:
        """The empty caches (``Planner.__init__``)."""
        # trial id -> (spec inputs, TrialSpec, RunningTrial or None): a re-plan looks at every
        # live trial, most unchanged since the last one; rebuilding them dominated its cost.
        self._specs: dict[str, tuple[tuple, TrialSpec, RunningTrial | None]] = {}
        # Ids whose cached spec (and RunningTrial, if any) is exact without recomputing its
        # inputs: the record has not changed since (``TrialBook.changed``) and the spec rests
        # on the record alone (``OverheadEstimator.own_inputs``).
        self._fresh: set[str] = set()
        # Ids whose record has not changed since their spec was cached (``_placing_spec``).
        self._settled: set[str] = set()
        # Live trials with a width, by group (what DynamicFluid re-sizes), kept from the
        # book's changes instead of a scan of every live trial at every re-plan of a group.
        self._live: dict[int, dict[str, TrialRecord]] = {}
        self._live_group: dict[str, int] = {}  # trial id -> its group in ``_live``
        self._live_sorted: dict[int, list[TrialRecord]] = {}  # in order of addition

    def spec(self: Planner, rec: TrialRecord) -> TrialSpec:
        """``h_i1`` = iterations left in the group budget x measured one-GPU iteration time,
        with the trial's own ``alpha_i``, ``beta_i``.

        ``d_i`` from ``beta_i`` (``s_th``; the group's ``d`` as a cap, or as is when the user
        gave it, ``exact_limits``; 1 or what it asked for when not elastic); ``c_i`` from
        ``alpha_i`` (``o_th``, ``c_max``; the group's ``c`` likewise), 1 for a
        trial of priority > 0 whose own measured ``alpha_i`` is not below ``PRIORITY_ALPHA``,
        and at most what its ``min_share`` allows (it ran out of GPU memory at a smaller one).
        """
        if self._book.changed:
            self._take_changes()
        tid = rec.trial_id
        if tid in self._fresh:
            return self._specs[tid][1]
        est = self._estimator
        until = rec.until if rec.until is not None else self._book.default_until(rec)
        left = max(1, until - rec.iteration)
        if tid in self._settled:  # record unchanged: only what rests on other trials moved
            inputs = self._specs[tid][0]
            alpha, beta, c, d, w_min = *inputs[1:5], inputs[6]
        else:
            alpha, beta, c, d, w_min = self._limits(rec)
        inputs = (left * est.iteration_time(rec), alpha, beta, c, d, est.memory(rec), w_min)
        own = rec.until is not None and est.own_inputs(rec)
        cached = self._specs.get(tid)
        if cached is not None and cached[0] == inputs:
            # A fresh spec's RunningTrial must be built while fresh (``_running``).
            spec, running = cached[1], None if own else cached[2]
        elif cached is not None and cached[0][1:] == inputs[1:]:  # only h_i1 moved
            spec, running = cached[1].with_runtime(inputs[0]), None
        else:
            spec, running = TrialSpec(tid, *inputs), None
        self._specs[tid] = (inputs, spec, running)
        self._settled.add(tid)
        if own:
            self._fresh.add(tid)
        return spec

    def _limits(self: Planner, rec: TrialRecord) -> tuple[float, float, int, int, float | None]:
        """``alpha_i``, ``beta_i``, ``c_i``, ``d_i`` and ``w_min`` of a trial (its record, its
        group and the GPUs)."""
        est, cfg = self._estimator, self._policy
        alpha, beta = est.alpha_of(rec), est.beta_of(rec)
        # A trainable that is not elastic runs on one GPU, or on the GPUs it asked for.
        if rec.elastic and cfg.d is not None and self.exact_limits:
            d = cfg.d  # the user's own d
        elif rec.elastic:
            d = d_from_beta(beta, cfg.s_th, max(1, int(self.gpus)))
            d = d if cfg.d is None else min(d, cfg.d)
            if rec.own_beta is None:
                # Unmeasured: one GPU until its iteration time is known, then a gang of two
                # (the probe) before its own beta_i decides more.
                d = min(d, PROBE_D if rec.samples else 1)
        else:
            d = max(1, int(rec.w_min or 1))
        c = c_from_alpha(alpha, cfg.o_th, cfg.c_max)
        if cfg.c is not None:
            c = cfg.c if self.exact_limits else min(c, cfg.c)
        if rec.priority > 0 and (rec.own_alpha is None or alpha >= PRIORITY_ALPHA):
            c = 1  # what the algorithm waits on runs alone unless its packing is measured free
        if rec.min_share is not None:
            c = min(c, int(math.floor(1 / rec.min_share + 1e-9)))
        if rec.ray_train:  # its workers take whole GPUs, at most as many as it allows
            c = 1
        if rec.w_max is not None:
            d = min(d, max(1, int(rec.w_max)))
        w_min = rec.w_min
        if self._keeps_shape(rec):
            # Plain Tune's shape (a PBT member): what it asked for, at least one GPU (several
            # only as its own placement group or, elastic, a gang); the only width allowed, so
            # Fluid never packs, gangs or resizes it.
            whole = rec.elastic or rec.request is not None
            w_min = max(1.0, request_width(rec.asked)) if whole else 1.0
            c, d = 1, int(w_min)
        return alpha, beta, max(1, c), d, w_min

    def _placing_spec(self: Planner, rec: TrialRecord) -> TrialSpec:
        """A spec to place a queued trial with: ``start_in_order`` reads only its id, ``c_i``
        and memory, which rest on the record alone (memory too, ``own_memory``), so the cached
        spec serves while the record is unchanged, although an unmeasured trial's ``h_i1``
        (the mean over measured trials) moves with every result of any other trial."""
        if self._book.changed:
            self._take_changes()
        if rec.trial_id in self._settled and self._estimator.own_memory(rec):
            return self._specs[rec.trial_id][1]
        return self.spec(rec)

    def _take_changes(self: Planner) -> None:
        """Forget the cached specs of the records changed since the last call and move them
        in or out of the live-by-group index."""
        changed = self._book.take_changed()
        self._fresh -= changed
        self._settled -= changed
        if self._book.reprioritized:  # a queued trial's priority may have changed
            self._queue_unsorted, self._book.reprioritized = True, False
        for tid in changed:
            rec = self._book.get(tid)
            new = (rec.group if rec is not None and rec.phase in LIVE and rec.width is not None
                   else None)
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

    def live_of(self: Planner, gid: int) -> list[TrialRecord]:
        """Live trials of group ``gid`` with a width, in the order they were added."""
        if self._book.changed:
            self._take_changes()
        found = self._live_sorted.get(gid)
        if found is None:
            found = sorted(self._live.get(gid, {}).values(), key=_SEQ)
            self._live_sorted[gid] = found
        return list(found)

    def _keeps_shape(self: Planner, rec: TrialRecord) -> bool:
        """The trial's TrialGroup keeps plain Tune's shapes (``keep_shape``, PBT)."""
        group = self._book.groups.get(rec.group)
        return group is not None and group.keep_shape

    def _running(self: Planner, rec: TrialRecord) -> RunningTrial:
        """``RunningTrial`` of a live trial, the one of the last re-plan if nothing changed."""
        spec = self.spec(rec)
        inputs, _, old = self._specs[rec.trial_id]
        if old is not None and rec.trial_id in self._fresh:
            return old
        resizable = (rec.checkpoints and rec.phase is Phase.RUNNING
                     and rec.budget_resizes < MAX_RESIZES)
        if old is not None and old.spec is spec and (old.width, old.resizable) == (
                rec.width, resizable):
            return old
        running = RunningTrial(spec, rec.width, resizable)
        self._specs[rec.trial_id] = (inputs, spec, running)
        return running

    def _running_all(self: Planner, live: list[TrialRecord]) -> list[RunningTrial]:
        """``_running`` of each trial; those fresh since the last re-plan without a call each
        (a re-plan visits every live trial of the group, most of them unchanged)."""
        if self._book.changed:
            self._take_changes()
        fresh, specs = self._fresh, self._specs
        out = []
        for r in live:
            tid = r.trial.trial_id
            old = specs[tid][2] if tid in fresh else None
            out.append(old if old is not None else self._running(r))
        return out
