"""What FluidExecutor does to Tune: hold a trial, release it with a placement group shape, and
what it installs at the first trial (the ``fluid_shape`` callback, each iteration once for
every logger, and the limit on a model-based searcher's trials in flight).

A resize is a PAUSE decision (``FluidExecutor.on_trial_result``) followed by a release at the
new width: Tune saves and stops the trial, then restores it in the new placement group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from ray.tune import PlacementGroupFactory
from ray.tune.callback import CallbackList
from ray.tune.experiment import Trial

from fluid.tune import _ray_compat as compat
from fluid.tune._gpu_nodes import GpuNodes
from fluid.tune._lifecycle import Lifecycle
from fluid.tune._once import install_once
from fluid.tune._plan_lines import PlanReport
from fluid.tune._records import TrialRecord, TrialStore

logger = logging.getLogger("fluid")


def hold(tc: Any, trial: Trial, requeued: bool) -> None:
    """Keep a pending trial PAUSED in Tune, so the controller never starts it on its own.

    ``requeued``: Tune re-added the trial after a failure and already filed it as PENDING.
    """
    if trial.status != Trial.PENDING:
        return
    if requeued:  # the controller already filed it as PENDING: move it properly
        compat.set_trial_status(compat.controller_of(tc), trial, Trial.PAUSED)
    else:  # the controller files a new trial by the status it has after this hook
        trial.set_status(Trial.PAUSED)


def release(rec: TrialRecord, tc: Any, life: Lifecycle, shape: PlacementGroupFactory,
            report: PlanReport) -> Trial:
    """Give a ready or resizing trial ``shape``, the placement group of its planned width, and
    hand it to Tune (``Lifecycle.released``). A decision Tune cached for a save the paused
    trial can no longer make is dropped first."""
    assert rec.width is not None and life.pool is not None
    compat.drop_stale_decision(compat.controller_of(tc), rec.trial)
    if rec.trial.checkpoint is not None:
        _sync_experiment(tc)
    rec.trial.update_resources(shape)
    gpus = life.released(rec)
    report.started(rec, gpus, len(life.pool.neighbours(rec.trial_id)))
    if rec.asked > 0 and rec.w_min is None:  # asked for GPUs, and Fluid may resize it
        report.request_resized(rec)
    return rec.trial


def release_ready(life: Lifecycle, tc: Any, fits: Callable[[TrialRecord], bool],
                  shape: Callable[[TrialRecord], PlacementGroupFactory],
                  report: PlanReport) -> Trial | None:
    """Hand the ready trials that ``fits`` lets start to Tune: every one without GPU, as plain
    Tune starts all its PENDING trials in one step (filed PENDING), then at most one with GPUs,
    which ends the step (Ray's free GPUs are read again before the next). Returns the first
    released, for the scheduler to return (``None``: none): Tune asks for the returned trial's
    actor first and then for the PENDING ones' in the order they were filed, so actors start,
    and cached ones are reused, in the order of the plan, as plain Tune's follow its queue."""
    released: list[Trial] = []
    while (rec := life.take_ready(fits)) is not None:
        released.append(release(rec, tc, life, shape(rec), report))
        if rec.width:
            break
    for trial in released[1:]:
        compat.set_trial_status(compat.controller_of(tc), trial, Trial.PENDING)
    return released[0] if released else None


def _sync_experiment(tc: Any) -> None:
    """Snapshot the experiment and wait until storage has it, before a trial restarts.

    On restart Tune's loggers replace the driver's result files with the copy in storage
    (``LoggerCallback._restore_from_remote``), which is only synced periodically: results
    reported since the last sync would vanish from ``result.json``. Every Fluid resize is such
    a restart. A full snapshot (not just the result files) keeps the stored results and the
    stored trial checkpoints consistent, so a driver crash right after cannot re-report them.
    """
    try:
        compat.snapshot_experiment(compat.controller_of(tc))
    except Exception as e:  # the periodic sync still runs; say what may be stale
        logger.warning("Fluid: experiment snapshot before a restart failed: %s", e)


def install_callbacks(controller: Any, store: TrialStore, mps: GpuNodes) -> None:
    """Add each iteration's shape to its result, so progress tables and logs show it; keep
    each iteration once in the result files and for every other logger and callback
    (``once.install_once``); stop the MPS daemons of the experiment's nodes (``mps``) when
    the experiment ends (else when the driver exits). Every callback of the experiment keeps
    its place in Tune's list (its saved state is restored by place)."""
    column = partial(ShapeColumn, store=store, mps=mps, controller=controller)
    if not compat.replace_callback_list(controller, column) and mps.managed:
        logger.warning("Fluid: cannot hook the experiment's end; the MPS daemons stop when "
                       "this process exits")
    install_once(controller)


def install_outstanding_limit(tc: Any, outstanding: Callable[[], int],
                              bound: Callable[[], tuple[int, str]]) -> None:
    """Wrap a model-based searcher so it suggests nothing while ``bound()`` trials are in flight
    (``bound`` returns the bound and why).

    Grid and random search (``BasicVariantGenerator``, no ``searcher``) are left alone: they
    make whole groups at once.
    """
    search_alg = getattr(tc, "search_alg", None)
    searcher = getattr(search_alg, "searcher", None)
    if searcher is None or isinstance(searcher, OutstandingLimit):
        return
    search_alg.searcher = OutstandingLimit(searcher, outstanding, bound)


class ShapeColumn(CallbackList):
    """The experiment's callbacks, each result first given ``fluid_shape`` (e.g.
    ``"0.5 GPU"``) and ``fluid_gpus``, and ``fluid_shape`` shown in Tune's progress table; stops
    the executor's MPS daemons after the callbacks' own end of the experiment."""

    def __init__(self, callbacks: list, store: TrialStore, mps: Any, controller: Any) -> None:
        super().__init__(callbacks)
        self._store, self._mps, self._controller = store, mps, controller

    def on_trial_result(self, **info: Any) -> None:
        rec = self._store.get(info["trial"].trial_id)
        # Its width now, or the one its result ran at when the base paused it at this result.
        width = None if rec is None else rec.actual if rec.actual is not None else rec.result_width
        if width is not None:
            info["result"]["fluid_shape"] = rec.shape(width)
            info["result"]["fluid_gpus"] = width
        super().on_trial_result(**info)
        compat.show_result_column(self._controller, "fluid_shape")

    def on_experiment_end(self, **info: Any) -> None:
        super().on_experiment_end(**info)
        if self._mps is not None:
            self._mps.stop()


class OutstandingLimit:
    """Wraps a searcher: no new suggestion while ``bound()`` trials are held or running (the
    bound follows what the cluster can run at once); each new bound is said once, with why."""

    def __init__(self, searcher: Any, outstanding: Callable[[], int],
                 bound: Callable[[], tuple[int, str]]) -> None:
        self._searcher, self._outstanding, self._bound = searcher, outstanding, bound
        self._said: int | None = None

    @property
    def bound(self) -> int:
        """Most trials in flight now."""
        bound, why = self._bound()
        if bound != self._said:
            self._said = bound
            logger.info("Fluid: the searcher may have %d trials held or running at once (%s)",
                        bound, why)
        return bound

    def suggest(self, trial_id: str) -> Any:
        """The wrapped searcher's suggestion, or ``None`` while ``bound`` trials are in flight."""
        if self._outstanding() >= self.bound:
            return None
        return self._searcher.suggest(trial_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._searcher, name)
