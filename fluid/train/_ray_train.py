"""Ray Train trainers inside Tune trials under Fluid: the driver's side of the trial.

A Tune trial that runs a Ray Train trainer (``TorchTrainer(...).fit()``) is only the trainer's
driver: Ray Train starts its workers in a placement group of its own. Three calls let Fluid size
such a trial like any elastic one::

    import fluid.train as ft

    @ft.ray_train(num_workers=(1, 4))       # the workers (one GPU each) the trial may use
    def driver(config):
        trainer = TorchTrainer(loop, train_loop_config=config,
                               scaling_config=ft.scaling_config(),  # Fluid's worker count
                               run_config=ft.run_config())          # results to Tune
        trainer.fit()

* ``ray_train`` marks the trainable, so Fluid counts the GPUs of its workers and starts it
  only when they fit (``fluid.shapes.train_workers`` has the shape);
* ``scaling_config`` gives the trainer the number of workers Fluid chose (read from the
  trial's resources); under plain Tune, the most the mark allows;
* ``run_config`` reports each Ray Train result to Tune with a checkpoint pointing at Train's
  own (``_result_handoff``), and keeps Train's run in the trial's directory, so that a trial Fluid
  resizes restarts from Train's latest checkpoint with the new worker count. Train's workers
  hold whole GPUs and run NCCL: they are no MPS clients (NCCL under MPS is unsupported).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any

from ray import tune

from fluid.shapes.train_workers import RAY_TRAIN_ATTR, WorkerRange, workers_in
from fluid.train._result_handoff import TRAIN_RUN_NAME, checkpoint_owner, handoff_callback

logger = logging.getLogger("fluid")

#: The ``WorkerRange`` of the ``ray_train`` trainable running in this process (a trial
#: process runs one trial at a time).
_running: WorkerRange | None = None


def ray_train(trainable: Callable | None = None, *,
              num_workers: int | tuple[int, int] | None = None) -> Any:
    """Mark a Tune function trainable that runs a Ray Train trainer (its driver).

    ``num_workers``: the Ray Train workers (one GPU each) the trial may use, as Ray Train spells
    it: ``n`` exactly (Fluid gives it ``n`` unless ``resize_requests=True``), ``(least, most)``,
    or ``None`` (Fluid sizes it freely, like a ``fluid.train.elastic`` trainable). Works as
    ``ray_train(driver, num_workers=2)`` and as a decorator ``@ray_train(num_workers=2)``.

    Example:
        >>> @ray_train(num_workers=(1, 2))
        ... def driver(config):
        ...     ...
        >>> driver._fluid_ray_train
        WorkerRange(least=1, most=2)
    """
    request = WorkerRange.of(num_workers)
    if trainable is None:
        return functools.partial(ray_train, num_workers=num_workers)
    if not callable(trainable):
        raise TypeError(f"ray_train(trainable): a Tune function trainable, got {trainable!r}")

    @functools.wraps(trainable)
    def driver(*args: Any, **kwargs: Any) -> Any:
        _start(request)
        return trainable(*args, **kwargs)

    mark = type("RayTrainTrainable", (), {RAY_TRAIN_ATTR: request})
    setattr(driver, RAY_TRAIN_ATTR, request)
    driver.__mixins__ = (*getattr(trainable, "__mixins__", ()), mark)
    return driver


def _start(request: WorkerRange) -> None:
    """Remember the running trial's mark. (A module function, not a ``global`` statement in the
    wrapper: a wrapper copied from ``__main__`` is pickled by value, globals and all.)"""
    global _running
    _running = request


def _request() -> WorkerRange:
    if _running is None:
        raise RuntimeError(
            "fluid.train.scaling_config() and run_config() run inside a Tune trainable marked "
            "with fluid.train.ray_train(...), so that Fluid counts the GPUs of its workers")
    return _running


def scaling_config(**kwargs: Any) -> Any:
    """The trainer's ``ray.train.ScalingConfig``: one GPU per worker, as many workers as Fluid
    gave this trial (under plain Tune: the most its ``ray_train`` mark allows, or Ray Train's
    own elastic range where the mark gives one and Ray Train has it).

    Other arguments go to ``ScalingConfig`` (``accelerator_type``, ``placement_strategy``,
    ``resources_per_worker`` for custom resources). Under Fluid the workers' CPUs are held in
    the trial's own placement group (``FluidExecutor(cpus_per_worker=...)``), so
    ``resources_per_worker`` may not name ``CPU``, and ``GPU`` only as 1.
    """
    from ray.train import ScalingConfig

    request = _request()
    if "num_workers" in kwargs or "use_gpu" in kwargs:
        raise ValueError("scaling_config(): the workers are set by fluid.train.ray_train("
                         "num_workers=...) and Fluid, one GPU each; drop num_workers/use_gpu")
    workers = workers_in(tune.get_context().get_trial_resources().bundles)
    if workers is None:  # not Fluid's shape: plain Tune runs the trainer as asked
        return ScalingConfig(num_workers=_plain_workers(request), use_gpu=True, **kwargs)
    per_worker = dict(kwargs.pop("resources_per_worker", None) or {})
    if "CPU" in per_worker or per_worker.get("GPU", 1) != 1:
        raise ValueError(
            "scaling_config(resources_per_worker=...): under FluidExecutor each worker has one "
            "GPU, and its CPUs are held in the trial's placement group (set them with "
            f"FluidExecutor(cpus_per_worker=...)); got {per_worker}")
    per_worker["GPU"] = 1
    return ScalingConfig(num_workers=workers, use_gpu=True, resources_per_worker=per_worker,
                         **kwargs)


def _plain_workers(request: WorkerRange) -> int | tuple[int, int]:
    """What plain Tune's trial asks Ray Train for: the fixed count, or Ray Train's elastic
    range where it has one (Ray 2.55 and later take a ``(least, most)`` tuple)."""
    if request.most is None:
        return request.least
    if request.fixed or not _train_takes_a_range():
        return request.most
    return (request.least, request.most)


def _train_takes_a_range() -> bool:
    from ray.train import ScalingConfig

    return hasattr(ScalingConfig, "elasticity_enabled")  # Ray Train's elastic training


def run_config(**kwargs: Any) -> Any:
    """The trainer's ``ray.train.RunConfig``: each result goes to Tune with a checkpoint, and
    Train's run lives in the trial's directory (``name``: ``ray_train``), so a trial that
    restarts (a Fluid resize, a retry) resumes from Train's latest checkpoint.

    Train's workers hold whole GPUs and run NCCL, so they are no MPS clients.

    Other arguments go to ``RunConfig`` (``failure_config``, ``checkpoint_config``, your own
    ``callbacks``, ``worker_runtime_env``). Needs Ray Train V2 (the default from Ray 2.51; set
    ``RAY_TRAIN_V2_ENABLED=1`` on Ray 2.50).

    Raises:
        RuntimeError: the trial restores from another trial's checkpoint (PBT's exploit):
            Ray Train resumes a run from its own latest checkpoint only.
    """
    import ray.train

    _request()
    if getattr(ray.train, "UserCallback", None) is None:
        raise RuntimeError("fluid.train.run_config() needs Ray Train V2: set "
                           "RAY_TRAIN_V2_ENABLED=1 (Ray 2.50 runs Train V1 by default)")
    storage = tune.get_context().get_storage()
    own = storage.trial_fs_path
    owner = checkpoint_owner(tune.get_checkpoint())
    if owner is not None and not _under(owner, own):
        raise RuntimeError(
            f"this trial restores from another trial's checkpoint ({owner}); a Ray Train run "
            "resumes from its own checkpoints only (PBT's exploit is not supported)")
    kwargs.setdefault("name", TRAIN_RUN_NAME)
    if "storage_path" not in kwargs:
        kwargs["storage_path"] = own
        kwargs["storage_filesystem"] = storage.storage_filesystem
    kwargs["callbacks"] = [handoff_callback(), *(kwargs.get("callbacks") or [])]
    return ray.train.RunConfig(**kwargs)


def _under(path: str, directory: str) -> bool:
    return os.path.normpath(path).startswith(os.path.normpath(directory) + os.sep)
