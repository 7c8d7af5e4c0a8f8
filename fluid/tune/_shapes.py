"""Widths to Ray placement group shapes and back.

* packed share ``s < 1``: ``[{"CPU": cpu, "GPU": s}]`` (Ray fills one GPU before the next);
* one GPU: ``[{"CPU": cpu, "GPU": 1}]``;
* gang of ``w`` GPUs: ``[{"CPU": cpu}] + [{"CPU": worker_cpu, "GPU": 1}] * w``: the trainable
  runs in bundle 0 and starts its ``w`` workers in bundles ``1..w`` (``fluid.train.elastic``).
"""

from __future__ import annotations

import math

from ray.tune import PlacementGroupFactory

from fluid.core import gpus_of, is_packed
from fluid.core.model import WIDTH_TOL


def shape_for(width: float, cpus_per_trial: float, cpus_per_worker: float) -> PlacementGroupFactory:
    """The placement group factory of a trial of ``width`` GPUs."""
    if is_packed(width) or gpus_of(width) == 1:
        return PlacementGroupFactory([{"CPU": cpus_per_trial, "GPU": min(width, 1.0)}])
    head = {"CPU": cpus_per_trial} if cpus_per_trial > 0 else {}
    return PlacementGroupFactory([head] + [{"CPU": cpus_per_worker, "GPU": 1}] * gpus_of(width))


def shape_of(width: float, cpus_per_trial: float, cpus_per_worker: float,
             request: PlacementGroupFactory | None = None) -> PlacementGroupFactory:
    """The placement group factory a trial runs in at ``width`` GPUs.

    ``request``: the trial's own factory, kept as it is when the plan gives the trial what it
    asked for (``request_width``); any other width gets Fluid's shape (``shape_for``).
    """
    if request is not None and abs(request_width(width_of(request)) - width) <= WIDTH_TOL:
        return request
    return shape_for(width, cpus_per_trial, cpus_per_worker)


def request_width(asked: float) -> float:
    """The least width Fluid plans that gives a trial the ``asked`` GPUs (0: none asked).

    A share below one rounds up to a share ``1/k`` (0.3 -> 1/3), above one to whole GPUs.
    """
    if asked <= WIDTH_TOL:
        return 0.0
    if is_packed(asked):
        return 1.0 / math.floor(1.0 / asked + WIDTH_TOL)
    return float(math.ceil(asked - WIDTH_TOL))


def cpus_in(pgf: PlacementGroupFactory) -> float:
    """CPUs of all the bundles of a placement group factory."""
    return float(sum(b.get("CPU", 0) for b in pgf.bundles))


def width_of(pgf: PlacementGroupFactory) -> float:
    """GPUs a placement group factory asks for in all (a share when below one)."""
    return float(sum(b.get("GPU", 0) for b in pgf.bundles))


def cpus_of(pgf: PlacementGroupFactory) -> float:
    """CPUs of the first bundle (where the trainable itself runs)."""
    return float(pgf.bundles[0].get("CPU", 0)) if pgf.bundles else 0.0


def describe(width: float | None) -> str:
    """``'0.5 GPU'``, ``'1 GPU'``, ``'gang of 3 GPU'``; ``'-'`` when not running."""
    if width is None:
        return "-"
    if is_packed(width):
        return f"{width:.3g} GPU"
    w = gpus_of(width)
    return "1 GPU" if w == 1 else f"gang of {w} GPU"


class ElasticTrainable:
    """Marker mixin: a trainable that can run as a data-parallel gang (``fluid.train.elastic``).

    Ray adds a function's ``__mixins__`` to the class it wraps the function in, so the marker
    is visible from the driver through ``trial.get_trainable_cls()``.
    """

    _fluid_elastic = True


def is_elastic_class(cls: type | None) -> bool:
    """Whether a trainable class was built by ``fluid.train.elastic``."""
    return bool(cls is not None and getattr(cls, "_fluid_elastic", False))
