"""Ray's side of ``fluid.shapes.bundles``: widths as ``PlacementGroupFactory`` objects and back.

The rule itself (which bundles a width asks for) lives in ``fluid.shapes.bundles``; this module
only wraps it in Ray's type.
"""

from __future__ import annotations

import functools

from ray.tune import PlacementGroupFactory

from fluid.core.model import request_width
from fluid.core.tolerances import WIDTH_TOL
from fluid.shapes import bundles as shapes
from fluid.shapes.bundles import ElasticTrainable
from fluid.shapes.bundles import is_elastic as is_elastic_class
from fluid.shapes.bundles import label as describe
from fluid.shapes.extras import Extras, with_extras

__all__ = [
    "ElasticTrainable", "cpus_in", "cpus_of", "describe", "is_elastic_class",
    "shape_cpus", "shape_for", "shape_of", "width_of",
]


def shape_for(width: float, cpus_per_trial: float, cpus_per_worker: float,
              extras: Extras | None = None) -> PlacementGroupFactory:
    """The placement group factory of a trial of ``width`` GPUs (``fluid.shapes.bundles``), with
    the ``extras`` of its request (accelerator type, custom resources: ``fluid.shapes.extras``)."""
    bundles = shapes.bundles_for(width, cpus_per_trial, cpus_per_worker)
    return PlacementGroupFactory(with_extras(bundles, extras))


def shape_of(width: float, cpus_per_trial: float, cpus_per_worker: float,
             request: PlacementGroupFactory | None = None,
             extras: Extras | None = None) -> PlacementGroupFactory:
    """The placement group factory a trial runs in at ``width`` GPUs.

    ``request``: the trial's own factory, kept as it is when the plan gives the trial what it
    asked for (``fluid.core.model.request_width``); any other width gets Fluid's shape
    (``shape_for``) with the request's ``extras``.
    """
    if request is not None and abs(request_width(width_of(request)) - width) <= WIDTH_TOL:
        return request
    return shape_for(width, cpus_per_trial, cpus_per_worker, extras)


@functools.lru_cache(maxsize=1024)
def shape_cpus(width: float, cpus_per_trial: float, cpus_per_worker: float) -> float:
    """``cpus_in(shape_for(...))``, remembered: building a factory costs tens of microseconds
    and the planner counts the CPUs of every queued and placed trial at every plan."""
    return cpus_in(shape_for(width, cpus_per_trial, cpus_per_worker))


def cpus_in(pgf: PlacementGroupFactory) -> float:
    """CPUs of all the bundles of a placement group factory."""
    return float(sum(b.get("CPU", 0) for b in pgf.bundles))


def width_of(pgf: PlacementGroupFactory) -> float:
    """GPUs a placement group factory asks for in all (a share when below one)."""
    return shapes.width_of(pgf.bundles)


def cpus_of(pgf: PlacementGroupFactory) -> float:
    """CPUs of the first bundle (where the trainable itself runs)."""
    return shapes.head_cpus(pgf.bundles)
