"""DynamicFluid's re-sizes of running trials, the gang probes and their undoing (``Resizing``,
a part of ``fluid.tune._planner.Planner``).

* ``_resize_group``: ``dynamic_fluid`` over a group's running trials, applied only where the
  gain beats ``RESIZE_GAIN`` x ``eps`` (``IDLE_GAIN`` x ``eps`` for a plan that only grows
  trials into idle GPUs once the search algorithm will add no more trials), and only if the guard (``fluid.core.is_safe``) finds the leading
  trials no later and the gangs' CPUs fit;
* ``_undo_slow_gangs``: a gang its own ``beta_i`` shows slower than one GPU goes back to one;
* ``_probe_gangs``: idle GPUs nobody waits for probe an unmeasured straggler as a gang of
  ``PROBE_D`` (under the prior a gang gains nothing, so no plan would ever measure ``beta_i``).
"""

from __future__ import annotations

import operator
from dataclasses import replace
from typing import TYPE_CHECKING

from fluid.core import PolicyConfig, dynamic_fluid, is_safe, slowdown
from fluid.tune._records import Phase, TrialRecord

if TYPE_CHECKING:
    from fluid.tune._planner import Planner

#: CPUs closer than this are the same (sums of fractional CPUs).
CPU_TOL = 1e-6
#: A resize is made only if its predicted gain exceeds this many times the measured ``eps``.
#: ``fluid bench sim``'s experiment (1,000 trials, seeds 0-5) with ``IDLE_GAIN`` 5: 0.32 /
#: 0.28 restarts per trial and a makespan of 397 / 408 s at 10 / 12; the 24 Figure 7 cells
#: at 8 GPUs (with and without a profile) have the same times to target at both.
RESIZE_GAIN = 12.0
#: A trial grows into idle GPUs (no other trial moves, no new trial can come) if that gains
#: this many times ``eps``. ``fluid bench sim`` (1,000 trials): makespan 427 / 443 / 422 /
#: 422 s and restarts per trial 0.27 / 0.43 / 0.34 / 0.31 with this rule off / at 2 / 3 / 5
#: (``RESIZE_GAIN`` 10). The HyperBand job of ``fluid bench e2e --quick`` needs its long
#: trial grown before any resize is measured: with ``eps`` the 5 s default until then it
#: gained nothing in the simulator at 4 and above; with ``eps`` from the measured starts
#: (1.7 s there) it gains 1.27x at 5 (1.62x at 3).
IDLE_GAIN = 5.0
#: Most resizes Fluid makes of one trial while its budget (its rung) stays the same.
MAX_RESIZES = 2
#: Widest gang of a trial whose own ``beta_i`` is not measured yet (the probe).
PROBE_D = 2
#: A gang probe on idle GPUs is made only for a trial with at least this many ``eps`` of
#: one-GPU work left: if gangs gain nothing (``beta_i >= 2``), the probe costs one restart and
#: the undo another, at most ``2 / PROBE_MIN_EPS`` of the trial's remaining time.
PROBE_MIN_EPS = 80.0
#: No more probes once the median measured ``beta_i`` makes a gang of ``PROBE_D`` take more
#: than this share of one GPU's time (``f(PROBE_D)``): the configurations of one experiment
#: share their model family and hardware, so their scaling is alike.
PROBE_STOP = 0.9

_RUNTIME, _WIDTH = operator.attrgetter("spec.runtime"), operator.attrgetter("width")


class Resizing:
    """The re-sizing rules of ``Planner`` (a mixin: it reads the planner's pool, book,
    estimator and CPUs)."""

    def _probe_gangs(self: Planner, cfg: PolicyConfig) -> None:
        """Idle GPUs that nobody waits for go to running trials as gang probes of ``PROBE_D``.

        A candidate is elastic, resizable, on one GPU, its one-GPU time measured but not its
        ``beta_i``, and has ``h_i1 >= PROBE_MIN_EPS x eps`` left; the algorithm's priority
        first (what a rung waits on), then the longest ``h_i1`` (the straggler). The guard is
        not asked: under the prior a gang gains nothing, which is what the probe tests; its
        cost is bounded by ``PROBE_MIN_EPS``. A user's ``d = 1`` means no gang, no probe; nor
        once the trials measured so far say gangs of ``PROBE_D`` gain under ``1 - PROBE_STOP``.
        """
        assert self.pool is not None
        if self.pool.idle_count() < PROBE_D - 1 or (cfg.d is not None and cfg.d < PROBE_D):
            return
        measured = self._estimator.measured_beta
        if measured is not None and slowdown(PROBE_D, beta=measured) > PROBE_STOP:
            return  # the trials measured so far scale too badly: this experiment's gangs lose
        floor = PROBE_MIN_EPS * self._estimator.eps
        candidates = [
            (r, self.spec(r)) for r in self._book.in_phase(frozenset({Phase.RUNNING}))
            if r.elastic and r.width == 1.0 and r.own_beta is None and r.samples
            and r.checkpoints and r.budget_resizes < MAX_RESIZES and not self._keeps_shape(r)
        ]
        candidates.sort(key=lambda rs: (-rs[0].priority, -rs[1].runtime))
        for rec, spec in candidates:
            if self.pool.idle_count() < PROBE_D - 1:
                return
            if spec.runtime < floor or not self._cpus_hold([(rec, PROBE_D)]):
                continue
            self.pool.grow_gang(rec.trial_id, PROBE_D - 1)
            rec.width = float(PROBE_D)
            self._log_plan("probe", rec.group, {rec.trial_id: rec.width})

    def _resize_group(self: Planner, gid: int, cfg: PolicyConfig) -> None:
        assert self.pool is not None
        live = self.live_of(gid)
        if not live:
            return
        self._undo_slow_gangs(live)
        running = self._running_all(live)
        # What a first iteration must show to re-plan at once (``replan_first``).
        self._load[gid] = sum(map(_RUNTIME, running)) / (
            sum(map(_WIDTH, running)) + self.pool.free_capacity())
        # Plan on a copy: the plan is dropped if the guard rejects it or if its gangs need
        # more CPUs than there are. A resize must gain RESIZE_GAIN x eps (anti-oscillation).
        eps = self._estimator.eps
        pool = self.pool.copy()
        plan = dynamic_fluid(running, [], pool, replace(cfg, eps=RESIZE_GAIN * eps))
        if not plan.resized and self.search_done and self.pool.idle_count():
            # Idle GPUs nobody waits for, nor will (no new trial can come): growing into them
            # moves no other trial, so the anti-oscillation margin is not needed, only a gain
            # of IDLE_GAIN x eps.
            pool = self.pool.copy()
            plan = dynamic_fluid(running, [], pool, replace(cfg, eps=IDLE_GAIN * eps),
                                 target=plan.target)
            if any(z.new_width <= z.old_width for z in plan.resized):
                return
        if not plan.resized:
            return
        specs = {r.spec.id: r.spec for r in running}
        current = {r.spec.id: r.width for r in running}
        widths = {**current, **{z.trial_id: z.new_width for z in plan.resized}}
        top = max(r.priority for r in live)
        leaders = [r.trial_id for r in live if r.priority == top]
        if not is_safe(specs, widths, current, leaders, eps):
            return  # the leading trials would end later than they do now: keep the plan
        if not self._cpus_hold([(self._book[z.trial_id], z.new_width) for z in plan.resized]):
            return  # the gang workers would need CPUs the cluster does not have
        self.pool = pool
        for z in plan.resized:
            self._book[z.trial_id].width = z.new_width
        self._log_plan("dynamic", gid, {z.trial_id: z.new_width for z in plan.resized})

    def _cpus_hold(self: Planner, changes: list[tuple[TrialRecord, float]]) -> bool:
        """Whether the CPUs free now hold placed trials' shapes at the new widths
        (``(record, width)``): a gang's workers each take a bundle of CPUs."""
        free = self._free_cpus()
        return free is None or sum(self.cpus_needed(rec, width) - self.cpus_needed(rec)
                                   for rec, width in changes) <= free + CPU_TOL

    def _undo_slow_gangs(self: Planner, live: list[TrialRecord]) -> None:
        """A gang whose own measured ``beta_i`` makes it slower than one GPU, even counting a
        restart (``h_i(1) + eps < h_i(w)``), goes back to one GPU (DynamicFluid only shrinks
        to free GPUs that others need; a failed probe must not run on at its slow width)."""
        assert self.pool is not None
        eps = self._estimator.eps
        for r in live:
            if (r.width is None or r.width < 2 or r.own_beta is None or r.phase is not Phase.RUNNING
                    or not r.checkpoints or r.budget_resizes >= MAX_RESIZES + 1):
                continue
            spec = self.spec(r)
            if spec.runtime_at(1.0) + eps < spec.runtime_at(r.width):
                self.pool.shrink_gang(r.trial_id, 1)
                self._log_plan("dynamic", r.group, {r.trial_id: 1.0})
                r.width = 1.0
