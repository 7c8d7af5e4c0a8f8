"""Which trials FluidExecutor admits, and how: set-ups it refuses (actor reuse), finished trials
Tune re-adds on restore, and packed trials that ran out of GPU memory. (A cluster too small for
a trial waits for nodes: ``fluid.tune._waiting``.)"""

from __future__ import annotations

import logging
import re
from typing import Any

from ray.tune.experiment import Trial

from fluid.tune import _ray_compat as compat
from fluid.tune._options import FluidConfigError
from fluid.tune._records import OUTSTANDING, Phase, TrialBook, TrialRecord, new_record
from fluid.tune._shapes import describe
from fluid.tune._state import apply_saved

logger = logging.getLogger("fluid")

#: What torch's CUDA out-of-memory error says (``torch.OutOfMemoryError``, a RuntimeError).
_CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError")


def is_cuda_oom(error: BaseException) -> bool:
    """Whether a trial's error (as Ray passes it on, with the trainable's traceback) is torch
    running out of GPU memory."""
    return bool(_CUDA_OOM.search(str(error)))


def record_finished(book: TrialBook, trial: Trial, saved: dict[str, Any] | None) -> None:
    """File a trial Tune re-adds already finished (a restored experiment, TERMINATED or ERROR).

    It is recorded DONE with its saved measurements (they still inform the estimates of
    unmeasured trials): never held, planned, placed or counted as outstanding.
    """
    gid, until = book.group_of_new(trial)
    rec = new_record(trial, gid, until, elastic=False,  # it never runs again
                     kind=book.kind_of(trial))
    apply_saved(rec, saved)
    rec.iteration = int(trial.last_result.get("training_iteration", 0) or 0)
    rec.phase, rec.base_status = Phase.DONE, trial.status
    book.add(rec)


def widen_after_oom(rec: TrialRecord | None, error: Exception) -> bool:
    """A packed trial that ran out of GPU memory: Fluid's doing, not the user's.

    Its least share doubles (``1/k`` -> ``2/k``, at most a whole GPU); returns whether it did
    (then Tune retries it without counting the failure against ``max_failures``). An
    out-of-memory error on a whole GPU or more counts as any other failure.
    """
    if rec is None or rec.actual is None or rec.actual >= 1 or not is_cuda_oom(error):
        return False
    rec.min_share = min(1.0, 2 * rec.actual)
    logger.warning("Fluid: %s ran out of GPU memory on %s; retrying it on at least %s "
                   "(not counted in max_failures)", rec.trial, describe(rec.actual),
                   describe(rec.min_share))
    return True


def check_setup(controller: Any) -> None:
    """Refuse what Fluid cannot run under: reused actors (a cluster too small for now waits
    for nodes: ``fluid.tune._waiting``)."""
    if compat.reuses_actors(controller):
        raise FluidConfigError(
            "reuse_actors=True cannot be used with FluidExecutor: every trial gets its own "
            "placement group shape; pass reuse_actors=False"
        )


def stranded(book: TrialBook, controller: Any) -> list[TrialRecord]:
    """Trials the base scheduler paused at the end of their budget and will never start again,
    while nothing else runs, waits to run or can still be added.

    Why: HyperBand stops the trials it paused once a bracket is finished (``cleanup_full``), but
    only those already PAUSED in Tune; a trial whose pause was still saving its checkpoint at
    that moment stays paused for good (its budget is spent, so HyperBand never resumes it), and
    the experiment would wait forever with no trial running. Plain Tune has the same race;
    Fluid, running more trials at once, meets it more often. Such trials are finished: each
    reached its budget's last iteration.
    """
    if book.count(OUTSTANDING) or not compat.search_finished(controller):
        return []
    paused = book.in_phase(frozenset({Phase.PAUSED}))
    if any(r.trial.status == Trial.RUNNING for r in paused):
        return []  # a pause still saving: the base may yet act on it
    return [r for r in paused
            if r.trial.status == Trial.PAUSED and r.until is not None and r.iteration >= r.until]
