"""The resizes of running trials: ``fluid.core``'s decisions as pending widths per trial.

A resize of a running trial is a pending width (``Lifecycle.pending``, as Ray's
``ResourceChangingScheduler`` keeps ``_trials_to_reallocate``) that the executor carries out
at the trial's next checkpointed result. The decisions, each on the planner's pool (taken, and
given back in the ``Decision``):

* leaders on a share onto a whole GPU, before any waiting trial starts (``unpack``);
* failed gangs back to one GPU, then DynamicFluid where it pays (``resize_group``);
* gang probes on idle GPUs nobody waits for (``probe_gangs``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from fluid.core import GpuPool, PolicyConfig, Tunables, resize_group
from fluid.core.policy import (
    group_load,
    is_probe_candidate,
    may_probe,
    probe_gangs,
    undo_slow_gangs,
    unpack_leaders,
)
from fluid.tune._cpus import CpuAccount
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._lifecycle import Decision, Lifecycle
from fluid.tune._records import SEQ, Phase
from fluid.tune._specs import SpecCache

_RUNNING = frozenset({Phase.RUNNING})

#: ``log(kind, group id, {trial id: width})``: a plan change for the plan log.
PlanLogger = Callable[[str, int, dict[str, float]], None]


class Resizes:
    """The rules that resize running trials, each returning its resizes as a ``Decision``.

    Args:
        life: the trials' lifecycle (read: their pending resizes); specs: their specs;
        estimator: ``eps``, measured ``beta`` and its spread; config, tunables: the policy;
        cpus: CPU accounting (a gang's workers need CPUs);
        log: where each plan change is logged.
    """

    def __init__(self, life: Lifecycle, specs: SpecCache, estimator: OverheadEstimator,
                 config: PolicyConfig, tunables: Tunables, cpus: CpuAccount,
                 log: PlanLogger) -> None:
        self._life, self._store, self._specs, self._estimator = life, life.store, specs, estimator
        self._config, self._tunables, self._cpus, self._log = config, tunables, cpus, log

    def unpack(self, pool: GpuPool) -> Decision:
        """Running leaders on a share onto a whole GPU (``fluid.core.policy.unpack_leaders``)."""
        pending = self._life.pending
        packed = [r for r in self._store.unordered(_RUNNING)
                  if r.width and r.width < 1 and r.trial_id not in pending]
        # (only a trial whose c_i is 1 is a leader to unpack: the others' views are not built)
        running = sorted(self._specs.with_c(packed, 1), key=SEQ)
        if not running:
            return Decision(pool=pool)
        moved, pool = unpack_leaders(self._specs.live_trials(running), pool,
                                     self._estimator.eps)
        for z in moved:
            self._log("dynamic", self._store[z.trial_id].group, {z.trial_id: z.new_width})
        return Decision(pool=pool, resized={z.trial_id: z.new_width for z in moved})

    def resize_group(self, gid: int, pool: GpuPool, search_done: bool,
                     ) -> Generator[Decision, None, float | None]:
        """Failed gangs back to one GPU, then DynamicFluid where it pays (``fluid.core``), as
        the decisions they are; returns the group's load per GPU (``None``: no live trial)."""
        live = self._specs.live_of(gid)
        if not live:
            return None
        views = self._specs.live_trials(live)
        eps = self._estimator.eps
        undone, pool = undo_slow_gangs(views, pool, eps, self._tunables)
        if undone:
            for z in undone:
                self._log("dynamic", gid, {z.trial_id: 1.0})
            yield Decision(resized={z.trial_id: 1.0 for z in undone})
            views = self._specs.live_trials(live)
        load = group_load(views, pool)  # what a first result is measured by
        plan = resize_group(views, pool, self._config, self._tunables, eps, search_done,
                            self._estimator.beta_spread)
        # (the gang workers of a plan may need CPUs the cluster does not have)
        if plan is None or not self._cpus.hold(
                [(self._store[z.trial_id], z.new_width) for z in plan.resized]):
            yield Decision(pool=pool)
            return load
        yield Decision(pool=plan.pool, resized={z.trial_id: z.new_width for z in plan.resized})
        self._log("dynamic", gid, {z.trial_id: z.new_width for z in plan.resized})
        return load

    def probe_gangs(self, pool: GpuPool) -> Decision:
        """Idle GPUs that nobody waits for go to running trials as gang probes (``fluid.core``)."""
        est, tun = self._estimator, self._tunables
        if not may_probe(pool, self._config, tun, est.measured_beta):
            return Decision(pool=pool)
        running = [r for r in self._store.in_phase(_RUNNING) if r.width]  # (0: no GPU)
        views = self._specs.live_trials(running)
        free = self._cpus.free()
        width = float(tun.probe_d)
        candidates = [t for t in views if is_probe_candidate(t)]
        extra = None if free is None else {
            t.id: self._cpus.extra(self._store[t.id], width) for t in candidates}
        iterations = {t.id: est.iteration_time(self._store[t.id]) for t in candidates}
        probes, pool = probe_gangs(views, pool, self._config, tun, est.eps, est.measured_beta,
                                   free, extra, iterations)
        for z in probes:
            self._log("probe", self._store[z.trial_id].group, {z.trial_id: z.new_width})
        return Decision(pool=pool, resized={z.trial_id: z.new_width for z in probes})
