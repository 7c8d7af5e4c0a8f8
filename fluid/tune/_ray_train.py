"""Ray Train trials under FluidExecutor: trials whose trainable runs a Ray Train trainer.

Ray Train starts a trainer's workers in a placement group of its own, outside the trial's and
outside Tune's accounting (ray issue 54305). A trial marked with ``fluid.train.ray_train`` is
planned at a width of ``w`` GPUs, its workers' count, like a gang: its GPUs are never planned
for another trial, and Tune gets the driver's bundle plus one CPU bundle per worker
(``fluid.core.ray_train``), so the GPUs stay free for Train's workers.

A plan can free GPUs that Ray has not yet freed: a Train run that just stopped still holds its
placement group for a moment, and a trial just handed to Tune has not yet taken its GPUs.
``RayTrainTrials.fits`` starts a Ray Train trial only when Ray's free GPUs, less those claimed
by trials that are starting, hold its workers (``starting_claims``); otherwise Train's
placement group would wait for GPUs and its start could time out.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.tune import PlacementGroupFactory
from ray.tune.experiment import Trial

from fluid.core.extras import Extras, with_extras
from fluid.core.model import WIDTH_TOL, gpus_of
from fluid.core.ray_train import WorkerRange, driver_bundles, worker_range
from fluid.tune import _ray_compat as compat
from fluid.tune._options import FluidConfigError
from fluid.tune._records import PLACED, TrialBook, TrialRecord

logger = logging.getLogger("fluid")


def train_shape(width: float, cpus_per_trial: float, cpus_per_worker: float,
                extras: Extras | None = None) -> PlacementGroupFactory:
    """Tune's placement group of a Ray Train trial with ``width`` workers (its own custom
    resources stay in the driver's bundle)."""
    bundles = driver_bundles(gpus_of(width), cpus_per_trial, cpus_per_worker)
    head = Extras(head=extras.head) if extras else None
    return PlacementGroupFactory(with_extras(bundles, head))


def starting_claims(book: TrialBook, but: TrialRecord) -> float:
    """GPUs of placed trials (other than ``but``) that Ray may not hold for them yet.

    A Ray Train trial holds its GPUs once its workers reported (its first result after a
    start); any other trial once Tune runs it. Counting a trial that already holds them is
    safe: ``but`` only waits a little longer.
    """
    claims = 0.0
    for rec in book.unordered(PLACED):
        if rec is but or rec.width is None:
            continue
        if rec.fresh_start if rec.ray_train else rec.trial.status != Trial.RUNNING:
            claims += rec.width
    return claims


class RayTrainTrials:
    """Which trials run a Ray Train trainer, how Fluid sizes them, and when they may start.

    Args:
        cpus_per_worker: CPUs held for each worker in the trial's placement group (must be
            above 0: the worker bundles tell the trainer its worker count).
        resize_requests: a fixed worker count is sized freely too (``FluidExecutor``'s option).
    """

    def __init__(self, cpus_per_worker: float, resize_requests: bool) -> None:
        self._cpus_per_worker = cpus_per_worker
        self._resize_requests = resize_requests
        self._ranges: dict[str, WorkerRange | None] = {}  # trainable name -> its mark
        self._waiting: set[str] = set()  # trials told they wait for Ray to free GPUs

    def range_of(self, trial: Trial) -> WorkerRange | None:
        """The workers the trial's trainable allows (``None``: not a Ray Train trial); looked
        up once per trainable (a registry lookup costs about a millisecond)."""
        name = trial.trainable_name
        if name not in self._ranges:
            try:
                cls = trial.get_trainable_cls()
            except Exception:  # an unregistered trainable is not marked
                cls = None
            self._ranges[name] = worker_range(cls)
        return self._ranges[name]

    def configure(self, rec: TrialRecord) -> None:
        """Size a new record as a Ray Train trial when its trainable is marked as one.

        A fixed worker count is the least width (unless ``resize_requests``); a range
        ``(least, most)`` bounds the widths; a trial never shares a GPU.
        """
        workers = self.range_of(rec.trial)
        if workers is None:
            return
        if self._cpus_per_worker <= 0:
            raise FluidConfigError(
                f"trial {rec.trial} runs a Ray Train trainer: cpus_per_worker must be above 0 "
                "(each worker's bundle in the trial's placement group holds them)")
        if not compat.train_v2_enabled():
            raise FluidConfigError(
                f"trial {rec.trial} runs a Ray Train trainer: FluidExecutor needs Ray Train V2 "
                "(set RAY_TRAIN_V2_ENABLED=1; Ray 2.50 runs Train V1 by default)")
        if workers.fixed and self._resize_requests:  # the user lets Fluid size requests
            workers = WorkerRange()
        fixed = workers.fixed
        rec.ray_train = True
        rec.elastic = not fixed
        rec.w_max = float(workers.least if fixed else workers.most or 0) or None
        least = workers.least if (fixed or workers.least > 1) else 0
        rec.asked = float(least)
        rec.w_min = float(least) or None
        rec.request = None

    def fits(self, rec: TrialRecord, book: TrialBook, view: Any) -> bool:
        """Whether Ray's free GPUs hold the trial's workers now (always, for a trial that does
        not run Ray Train or a view that cannot say)."""
        available = getattr(view, "available_gpus", None)
        if not rec.ray_train or rec.width is None or available is None:
            return True
        free = available() - starting_claims(book, rec)
        if free + WIDTH_TOL >= rec.width:
            self._waiting.discard(rec.trial_id)
            return True
        if rec.trial_id not in self._waiting:
            self._waiting.add(rec.trial_id)
            logger.info("Fluid: %s waits for Ray to free %g GPUs for its Ray Train workers "
                        "(%g free now)", rec.trial, rec.width, max(free, 0.0))
        return False
