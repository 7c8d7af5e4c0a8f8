"""Which trials FluidExecutor admits, and how: the record of a new trial (a Ray Train trial
sized by its mark), finished trials Tune re-adds on restore, and packed trials that ran out of
GPU memory. (A cluster too small for a trial waits for nodes:
``waiting``.)"""

from __future__ import annotations

import logging
import re
from typing import Any, NamedTuple

from ray.tune.experiment import Trial

from fluid.core.model import request_width
from fluid.core.tolerances import WIDTH_TOL
from fluid.shapes.extras import extras_of
from fluid.shapes.train_workers import WorkerRange, train_bounds, worker_range
from fluid.tune import _ray_compat as compat
from fluid.tune._placement_groups import cpus_of, describe, is_elastic_class, width_of
from fluid.tune._records import OUTSTANDING, Phase, TrialRecord, TrialStore, stop_of
from fluid.tune._state_file import apply_saved

logger = logging.getLogger("fluid")

#: What torch's CUDA out-of-memory error says (``torch.OutOfMemoryError``, a RuntimeError).
_CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError")


def is_cuda_oom(error: BaseException) -> bool:
    """Whether a trial's error (as Ray passes it on, with the trainable's traceback) is torch
    running out of GPU memory."""
    return bool(_CUDA_OOM.search(str(error)))


class TrainableKind(NamedTuple):
    """What a trial's trainable class is: gang-capable (``elastic``), a function trainable
    (``function``: it checkpoints only when it says so), and the Ray Train workers it is marked
    with (``workers``: ``fluid.train.ray_train``; ``None``: it runs no Ray Train trainer)."""

    elastic: bool
    function: bool
    workers: WorkerRange | None = None


class TrainableKinds:
    """``trainable_kind`` of each trainable of the experiment, looked up once: looking a class
    up in Ray's registry takes about a millisecond."""

    def __init__(self) -> None:
        self._kinds: dict[str, TrainableKind] = {}

    def of(self, trial: Trial) -> TrainableKind:
        """The kind of the trial's trainable."""
        kind = self._kinds.get(trial.trainable_name)
        if kind is None:
            kind = self._kinds[trial.trainable_name] = trainable_kind(trial)
        return kind


def trainable_kind(trial: Trial) -> TrainableKind:
    """Whether the trial's trainable class is elastic, whether it is a function trainable, and
    the Ray Train workers it is marked with."""
    try:
        cls = trial.get_trainable_cls()
    except Exception:  # an unregistered trainable: no gang, checkpoints only when it says so
        return TrainableKind(False, True)
    if not isinstance(cls, type):  # a stub trial (no trainable): as unregistered
        return TrainableKind(False, True)
    from ray.tune.trainable.function_trainable import FunctionTrainable

    return TrainableKind(is_elastic_class(cls), issubclass(cls, FunctionTrainable),
                         worker_range(cls))


def new_record(store: TrialStore, trial: Trial, kind: TrainableKind, elastic: bool | None,
               resize_requests: bool | None = False, saved: dict[str, Any] | None = None,
               phase: Phase = Phase.HELD) -> TrialRecord:
    """The record of a trial Fluid sees for the first time, in its group (not filed yet).

    ``elastic``: ``True``/``False`` for every trainable, ``None`` asks ``kind``.
    ``resize_requests``: ``True``, a trial that asked for GPUs may get fewer; ``None``, one
    that asked for exactly one GPU may (Tune's way of saying it needs a GPU), one that asked
    for more gets at least that; ``False``, every request is a floor; a share is kept as asked
    unless ``True``. ``saved``: what a saved state holds of the trial (``state.apply_saved``).
    A Ray Train trial's widths are its workers' (``kind.workers``, ``train_bounds``); a trial
    that asks for no GPU and is not Fluid-aware runs on its own request with no GPU
    (``no_gpu``); every trial keeps its request's extras (accelerator type, custom
    resources) in every shape.
    """
    gid, until = store.group_of_new(trial, stop_of(trial))
    pgf = trial.placement_group_factory
    asked = width_of(pgf)
    elastic = kind.elastic if elastic is None else elastic
    whole = asked > 0 and not (resize_requests or (resize_requests is None
                                                   and sized_by_default(asked)))
    w_min = request_width(asked) if whole else None
    request = pgf if whole and not elastic else None
    bounds = (None if kind.workers is None
              else train_bounds(kind.workers, bool(resize_requests)))
    if bounds is not None:  # Train's workers take the GPUs, in a placement group of their own
        asked, w_min, elastic, request = bounds.w_min or 0.0, bounds.w_min, bounds.elastic, None
    # No GPU asked and no Fluid mark: a CPU trial or an unmarked Ray Train driver (its
    # trainer's workers take GPUs Tune never sees). Giving it a GPU would take one from them.
    no_gpu = asked <= 0 and not elastic and bounds is None
    if no_gpu:
        w_min, request = 0.0, pgf
    rec = TrialRecord(trial, gid, until, phase=phase, cpus=cpus_of(pgf), elastic=elastic,
                      function=kind.function, asked=asked, w_min=w_min, request=request,
                      priority=store.groups[gid].priority.get(trial.trial_id, 0),
                      extras=extras_of(pgf.bundles), ray_train=bounds is not None,
                      w_max=None if bounds is None else bounds.w_max, no_gpu=no_gpu)
    apply_saved(store, rec, saved)
    return rec


def sized_by_default(asked: float) -> bool:
    """Whether a request of ``asked`` GPUs is sized by Fluid unless ``resize_requests=False``:
    exactly one GPU (``tune.with_resources(train, {"gpu": 1})``), how Tune scripts say a trial
    needs a GPU since Tune gives none by default."""
    return abs(asked - 1.0) < WIDTH_TOL


def finished_record(store: TrialStore, trial: Trial, kind: TrainableKind,
                    saved: dict[str, Any] | None) -> TrialRecord:
    """The record of a trial Tune re-adds already finished (a restored experiment, TERMINATED
    or ERROR): DONE, with its saved measurements (they still inform the estimates of
    unmeasured trials), never held, planned, placed or counted as outstanding."""
    rec = new_record(store, trial, kind, elastic=False, saved=saved,  # it never runs again
                     phase=Phase.DONE)
    store.update(rec, iteration=int(trial.last_result.get("training_iteration", 0) or 0),
                 base_status=trial.status)
    return rec


def widen_after_oom(store: TrialStore, rec: TrialRecord | None, error: Exception,
                    growth: float) -> bool:
    """A packed trial that ran out of GPU memory: Fluid's doing, not the user's.

    Its least share grows ``growth`` times (``Tunables.oom_share_growth``: ``1/k`` -> ``2/k``,
    at most a whole GPU); returns whether it did
    (then Tune retries it without counting the failure against ``max_failures``). An
    out-of-memory error on a whole GPU or more counts as any other failure.
    """
    if (rec is None or rec.actual is None or rec.actual >= 1 or rec.w_min is not None
            or not is_cuda_oom(error)):
        return False  # (a share the trial asked for is the user's: a failure as any other)
    store.update(rec, min_share=min(1.0, growth * rec.actual))
    logger.warning("Fluid: %s ran out of GPU memory on %s; retrying it on at least %s "
                   "(not counted in max_failures)", rec.trial, describe(rec.actual),
                   describe(rec.min_share))
    return True


def stop_stranded(store: TrialStore, tc: Any) -> None:
    """Stop the ``stranded`` trials, saying why."""
    for done in stranded(store, compat.controller_of(tc)):
        logger.warning("Fluid: stopping %s: its scheduler paused it at the end of its budget "
                       "(iteration %d) and nothing else is left to run", done.trial,
                       done.iteration)
        tc.stop_trial(done.trial)


def stranded(store: TrialStore, controller: Any) -> list[TrialRecord]:
    """Trials the base scheduler paused at the end of their budget and will never start again,
    while nothing else runs, waits to run or can still be added.

    Why: HyperBand stops the trials it paused once a bracket is finished (``cleanup_full``), but
    only those already PAUSED in Tune; a trial whose pause was still saving its checkpoint at
    that moment stays paused for good (its budget is spent, so HyperBand never resumes it), and
    the experiment would wait forever with no trial running. Plain Tune has the same race;
    Fluid, running more trials at once, meets it more often. Such trials are finished: each
    reached its budget's last iteration.
    """
    if store.count(OUTSTANDING) or not compat.search_finished(controller):
        return []
    paused = store.in_phase(frozenset({Phase.PAUSED}))
    if any(r.trial.status == Trial.RUNNING for r in paused):
        return []  # a pause still saving: the base may yet act on it
    return [r for r in paused
            if r.trial.status == Trial.PAUSED and r.until is not None and r.iteration >= r.until]
