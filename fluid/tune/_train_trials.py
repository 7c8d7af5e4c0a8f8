"""Ray Train trials under FluidExecutor: trials whose trainable runs a Ray Train trainer.

Ray Train starts a trainer's workers in a placement group of its own, outside the trial's and
outside Tune's accounting (ray issue 54305). A trial marked with ``fluid.train.ray_train`` is
planned at a width of ``w`` GPUs, its workers' count, like a gang (its record's widths come
from the mark: ``admission.new_record``); its GPUs are never planned for another trial, and Tune
gets the driver's bundle plus one CPU bundle per worker (``fluid.shapes.train_workers``), so
the GPUs stay free for Train's workers.

A Ray Train trial starts only when Ray's free GPUs hold its workers
(``_resources.StartGate``; other trials only while GPUs are held outside the
experiment); otherwise Train's placement group would wait for GPUs and its start could time
out.
"""

from __future__ import annotations

from ray.tune import PlacementGroupFactory

from fluid.core.model import gpus_of
from fluid.shapes.extras import Extras, with_extras
from fluid.shapes.train_workers import driver_bundles
from fluid.tune import _ray_compat as compat
from fluid.tune._options import FluidConfigError
from fluid.tune._records import TrialRecord


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
