"""Ray's side of ``fluid.core.shapes``: widths as ``PlacementGroupFactory`` objects and back.

The rule itself (which bundles a width asks for) lives in ``fluid.core.shapes``; this module
only wraps it in Ray's type.
"""

from __future__ import annotations

from ray.tune import PlacementGroupFactory

from fluid.core import shapes
from fluid.core.shapes import ElasticTrainable
from fluid.core.shapes import is_elastic as is_elastic_class
from fluid.core.shapes import label as describe

__all__ = ["ElasticTrainable", "cpus_of", "describe", "is_elastic_class", "shape_for", "width_of"]


def shape_for(width: float, cpus_per_trial: float, cpus_per_worker: float) -> PlacementGroupFactory:
    """The placement group factory of a trial of ``width`` GPUs (``fluid.core.shapes``)."""
    return PlacementGroupFactory(shapes.bundles_for(width, cpus_per_trial, cpus_per_worker))


def width_of(pgf: PlacementGroupFactory) -> float:
    """GPUs a placement group factory asks for in all (a share when below one)."""
    return shapes.width_of(pgf.bundles)


def cpus_of(pgf: PlacementGroupFactory) -> float:
    """CPUs of the first bundle (where the trainable itself runs)."""
    return shapes.head_cpus(pgf.bundles)
