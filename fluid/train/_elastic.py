"""`elastic`: one Tune function trainable that runs at whatever width Fluid gives it.

Shapes (the trial's PlacementGroupFactory; the rule is ``fluid.shapes.bundles``):

* one bundle (``{"CPU": x, "GPU": g}`` with ``g <= 1``): the loop runs in the trial
  process itself, world size 1 (packed when ``g < 1``; ``fluid.train._process``);
* ``[{"CPU": x}] + [{"CPU": y, "GPU": 1}] * w``: the trial process (bundle 0) starts
  ``w`` worker actors in bundles 1..w, they form a torch.distributed group and run the
  loop (``fluid.train._gang``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import ray

from fluid.shapes import bundles as shapes
from fluid.shapes.bundles import ELASTIC_ATTR, ElasticTrainable, process_shape
from fluid.train._gang import _run_gang
from fluid.train._process import (
    _ckpt_root,
    _current_bundles,
    _loop_takes_config,
    _run_in_process,
    _trial_id,
)
from fluid.train._worker import TrainingWorkerError

__all__ = ["TrainingWorkerError", "elastic", "is_elastic", "trial_resources"]


def elastic(train_loop_per_worker: Callable[..., Any], *, backend: str | None = None,
            collective_timeout_s: float = 300.0, startup_timeout_s: float = 120.0
            ) -> Callable[[dict[str, Any]], None]:
    """Turn a training loop into a Ray Tune function trainable that runs at any width.

    The width comes from the trial's resources (set by Fluid, or by
    ``tune.with_resources``): a single bundle runs the loop in the trial process
    (a packed GPU fraction or one GPU); ``[{"CPU": x}] + [{"CPU": y, "GPU": 1}] * w``
    runs it on ``w`` data-parallel workers (NCCL on GPUs, gloo on CPUs). Inside the loop
    use `get_context`, `prepare_model`, `prepare_data_loader`, `report`,
    `save_checkpoint` and `load_checkpoint`.

    Args:
        train_loop_per_worker: ``loop(config)`` or ``loop()``, run on every rank.
        backend: force a torch.distributed backend (default: NCCL when every worker sees
            CUDA, gloo otherwise).
        collective_timeout_s: torch.distributed timeout; a gang stuck this long fails.
        startup_timeout_s: how long the worker actors may take to start.

    Returns:
        ``fn(config)``, marked so that `is_elastic(fn)` is True.

    Example:
        >>> def loop(config):
        ...     model = fluid.train.prepare_model(torch.nn.Linear(4, 1))
        ...     ...
        >>> trainable = fluid.train.elastic(loop)
        >>> pgf = tune.PlacementGroupFactory([{"CPU": 1}] + [{"CPU": 1, "GPU": 1}] * 2)
        >>> tune.Tuner(tune.with_resources(trainable, pgf)).fit()   # doctest: +SKIP
    """
    _check_elastic(train_loop_per_worker, backend, collective_timeout_s, startup_timeout_s)
    loop = train_loop_per_worker

    def fluid_elastic_trainable(config: dict[str, Any]) -> None:
        bundles = _current_bundles()
        if bundles is None:
            raise RuntimeError("fluid.train.elastic trainables run under ray.tune (Tuner.fit); "
                               "no Tune session was found")
        shape = process_shape(bundles)
        # A paused attempt of this trial was killed inside report() and could not clean
        # up; its files on this node go now, before this attempt's workers exist.
        shutil.rmtree(os.path.dirname(_ckpt_root(_trial_id(), "trial")), ignore_errors=True)
        if shape.in_process:
            _run_in_process(loop, config, shape.gpu_share)
        else:
            _run_gang(loop, config, shape, backend, collective_timeout_s, startup_timeout_s)

    # Not functools.wraps: Tune inspects the signature, and __wrapped__ would expose the
    # user's (possibly zero-argument) loop instead of fn(config).
    name = getattr(loop, "__name__", "train_loop")
    fluid_elastic_trainable.__name__ = name
    fluid_elastic_trainable.__qualname__ = name
    fluid_elastic_trainable.__doc__ = getattr(loop, "__doc__", None)
    # Marked twice: on the function, and through __mixins__ on the class Tune builds from it
    # (which the driver sees as ``trial.get_trainable_cls()``).
    setattr(fluid_elastic_trainable, ELASTIC_ATTR, True)
    fluid_elastic_trainable.__mixins__ = (ElasticTrainable,)  # type: ignore[attr-defined]
    return fluid_elastic_trainable


def _check_elastic(loop: Any, backend: str | None, collective_timeout_s: float,
                   startup_timeout_s: float) -> None:
    """Refuse what ``elastic`` cannot run, naming the argument."""
    if not callable(loop):
        raise TypeError(f"elastic(train_loop_per_worker=...) must be callable, got {loop!r}")
    if backend is not None and backend not in ("nccl", "gloo"):
        raise ValueError(f"elastic(backend=...) must be 'nccl', 'gloo' or None, got {backend!r}")
    if collective_timeout_s <= 0:
        raise ValueError(f"elastic(collective_timeout_s=...) must be > 0, got {collective_timeout_s}")
    if startup_timeout_s <= 0:
        raise ValueError(f"elastic(startup_timeout_s=...) must be > 0, got {startup_timeout_s}")
    _loop_takes_config(loop)  # fail early on uninspectable callables


def is_elastic(trainable: Any) -> bool:
    """True when ``trainable`` came from `elastic` and may be given a gang.

    Accepts the function `elastic` returned (also after ``tune.with_resources``) and the
    Tune trainable class Ray builds from it (``trial.get_trainable_cls()``).

    Example:
        >>> fluid.train.is_elastic(fluid.train.elastic(lambda: None))
        True
    """
    return shapes.is_elastic(trainable)


def trial_resources(width: float, *, cpus_per_worker: float = 1.0,
                    trial_cpus: float = 1.0) -> ray.tune.PlacementGroupFactory:
    """The PlacementGroupFactory for a trial of ``width`` GPUs, in the shapes `elastic` runs.

    ``width < 1``: one packed bundle ``{"CPU": trial_cpus, "GPU": width}``;
    ``width == 1``: ``{"CPU": trial_cpus, "GPU": 1}`` (in process);
    integer ``width > 1``: ``[{"CPU": trial_cpus}] + [{"CPU": cpus_per_worker, "GPU": 1}] * width``.

    Example:
        >>> fluid.train.trial_resources(2, cpus_per_worker=0.5).bundles
        [{'CPU': 1.0}, {'CPU': 0.5, 'GPU': 1.0}, {'CPU': 0.5, 'GPU': 1.0}]
    """
    if not width > 0:
        raise ValueError(f"trial_resources(width=...) must be > 0, got {width}")
    if width > 1 and float(width) != int(width):
        raise ValueError(f"trial_resources(width=...) above 1 must be an integer, got {width}")
    if cpus_per_worker <= 0:
        raise ValueError(f"trial_resources(cpus_per_worker=...) must be > 0, got {cpus_per_worker}")
    if trial_cpus <= 0:
        raise ValueError(f"trial_resources(trial_cpus=...) must be > 0, got {trial_cpus}")
    return ray.tune.PlacementGroupFactory(shapes.bundles_for(width, trial_cpus, cpus_per_worker))
