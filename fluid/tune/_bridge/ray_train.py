"""Ray Train trials under FluidExecutor: trials whose trainable runs a Ray Train trainer.

Ray Train starts a trainer's workers in a placement group of its own, outside the trial's and
outside Tune's accounting (ray issue 54305). A trial marked with ``fluid.train.ray_train`` is
planned at a width of ``w`` GPUs, its workers' count, like a gang (its record's widths come
from the mark: ``admission.new_record``); its GPUs are never planned for another trial, and Tune
gets the driver's bundle plus one CPU bundle per worker (``fluid.core.ray_train``), so the GPUs
stay free for Train's workers.

A plan can free GPUs that Ray has not yet freed: a Train run that just stopped still holds its
placement group for a moment, and a trial just handed to Tune has not yet taken its GPUs.
``TrainStartGate.fits`` starts a Ray Train trial only when Ray's free GPUs, less those claimed
by trials that are starting, hold its workers (``starting_claims``); otherwise Train's
placement group would wait for GPUs and its start could time out.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.tune import PlacementGroupFactory
from ray.tune.experiment import Trial

from fluid.core.extras import Extras, with_extras
from fluid.core.model import gpus_of
from fluid.core.ray_train import driver_bundles
from fluid.core.tolerances import WIDTH_TOL
from fluid.tune import _ray_compat as compat
from fluid.tune._options import FluidConfigError
from fluid.tune._records import PLACED, TrialRecord, TrialStore

logger = logging.getLogger("fluid")


def train_shape(width: float, cpus_per_trial: float, cpus_per_worker: float,
                extras: Extras | None = None) -> PlacementGroupFactory:
    """Tune's placement group of a Ray Train trial with ``width`` workers (its own custom
    resources stay in the driver's bundle)."""
    bundles = driver_bundles(gpus_of(width), cpus_per_trial, cpus_per_worker)
    head = Extras(head=extras.head) if extras else None
    return PlacementGroupFactory(with_extras(bundles, head))


def check_ray_train(rec: TrialRecord, cpus_per_worker: float) -> None:
    """Refuse a Ray Train trial Fluid cannot run: worker bundles without CPUs (their count is
    what tells the trainer its workers), or Ray Train V1."""
    if not rec.ray_train:
        return
    if cpus_per_worker <= 0:
        raise FluidConfigError(
            f"trial {rec.trial} runs a Ray Train trainer: cpus_per_worker must be above 0 "
            "(each worker's bundle in the trial's placement group holds them)")
    if not compat.train_v2_enabled():
        raise FluidConfigError(
            f"trial {rec.trial} runs a Ray Train trainer: FluidExecutor needs Ray Train V2 "
            "(set RAY_TRAIN_V2_ENABLED=1; Ray 2.50 runs Train V1 by default)")


def starting_claims(store: TrialStore, but: TrialRecord) -> float:
    """GPUs of placed trials (other than ``but``) that Ray may not hold for them yet.

    A Ray Train trial holds its GPUs once its workers reported (its first result after a
    start); any other trial once Tune runs it. Counting a trial that already holds them is
    safe: ``but`` only waits a little longer.
    """
    claims = 0.0
    for rec in store.unordered(PLACED):
        if rec is but or rec.width is None:
            continue
        if rec.fresh_start if rec.ray_train else rec.trial.status != Trial.RUNNING:
            claims += rec.width
    return claims


class TrainStartGate:
    """When a planned Ray Train trial may be handed to Tune: once Ray's free GPUs hold its
    workers (said once per trial while it waits)."""

    def __init__(self) -> None:
        self._waiting: set[str] = set()  # trials told they wait for Ray to free GPUs

    def fits(self, rec: TrialRecord, store: TrialStore, view: Any) -> bool:
        """Whether Ray's free GPUs hold the trial's workers now (always, for a trial that does
        not run Ray Train or a view that cannot say)."""
        available = getattr(view, "available_gpus", None)
        if not rec.ray_train or rec.width is None or available is None:
            return True
        free = available() - starting_claims(store, rec)
        if free + WIDTH_TOL >= rec.width:
            self._waiting.discard(rec.trial_id)
            return True
        if rec.trial_id not in self._waiting:
            self._waiting.add(rec.trial_id)
            logger.info("Fluid: %s waits for Ray to free %g GPUs for its Ray Train workers "
                        "(%g free now)", rec.trial, rec.width, max(free, 0.0))
        return False
