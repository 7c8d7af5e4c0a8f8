"""Widths to placement-group bundles and back: the one shape rule of every layer.

A trial of width ``w`` (the paper's packed share ``w < 1`` or gang of ``w`` GPUs) asks Ray for:

* packed share ``w < 1``: ``[{"CPU": cpu, "GPU": w}]`` (Ray fills one GPU before the next);
* one GPU: ``[{"CPU": cpu, "GPU": 1}]``;
* gang of ``w`` GPUs: ``[{"CPU": cpu}] + [{"CPU": worker_cpu, "GPU": 1}] * w``: the trainable
  runs in bundle 0 and starts its ``w`` workers in bundles ``1..w`` (``fluid.train.elastic``).

Bundles are plain ``list[dict[str, float]]`` here: ``fluid.tune`` wraps them in Ray's
``PlacementGroupFactory``, ``fluid.train`` reads them back from the trial's resources.
Pure Python: no Ray, no torch.

Example:
    >>> bundles_for(2, 1, 0.5)
    [{'CPU': 1.0}, {'CPU': 0.5, 'GPU': 1.0}, {'CPU': 0.5, 'GPU': 1.0}]
    >>> width_of(bundles_for(0.25, 1, 1)), label(0.25), label(3.0), label(0.0)
    (0.25, '0.25 GPU', 'gang of 3 GPU', 'no GPU')
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fluid.core.model import gpus_of, is_packed
from fluid.core.tolerances import WIDTH_TOL

Bundle = dict[str, float]

#: The attribute that marks a trainable as gang-capable (``fluid.train.elastic``).
ELASTIC_ATTR = "_fluid_elastic"


def bundles_for(width: float, cpus_per_trial: float, cpus_per_worker: float) -> list[Bundle]:
    """The bundles of a trial of ``width`` GPUs (module docstring); no head CPU when 0."""
    if is_packed(width) or gpus_of(width) == 1:
        return [{"CPU": float(cpus_per_trial), "GPU": float(min(width, 1.0))}]
    head = {"CPU": float(cpus_per_trial)} if cpus_per_trial > 0 else {}
    return [head] + [{"CPU": float(cpus_per_worker), "GPU": 1.0} for _ in range(gpus_of(width))]


def width_of(bundles: Sequence[Mapping[str, float]]) -> float:
    """GPUs the bundles ask for in all (a share when below one)."""
    return float(sum(b.get("GPU", 0) for b in bundles))


def head_cpus(bundles: Sequence[Mapping[str, float]]) -> float:
    """CPUs of the first bundle (where the trainable itself runs)."""
    return float(bundles[0].get("CPU", 0)) if bundles else 0.0


def label(width: float | None, gang: bool = True) -> str:
    """``'0.5 GPU'``, ``'1 GPU'``, ``'gang of 3 GPU'`` (``'3 GPU'`` for one process that holds
    them: ``gang=False``), ``'no GPU'`` (a trial that asked for none); ``'-'`` when not
    running."""
    if width is None:
        return "-"
    if width <= WIDTH_TOL:
        return "no GPU"
    if is_packed(width):
        return f"{width:.3g} GPU"
    w = gpus_of(width)
    return f"{w} GPU" if w == 1 or not gang else f"gang of {w} GPU"


@dataclass(frozen=True)
class ProcessShape:
    """How ``fluid.train.elastic`` runs a trial with these bundles.

    Attributes:
        world_size: processes running the loop (1 in process, ``w`` for a gang).
        in_process: the loop runs in the trial process itself (one bundle).
        gpu_share: per process: the packed fraction, or each worker's GPU count.
        worker_bundles: gang only, bundle ``i + 1`` -> rank ``i``.
    """

    world_size: int
    in_process: bool
    gpu_share: float
    worker_bundles: tuple[Bundle, ...]


def process_shape(bundles: Sequence[Mapping[str, float]]) -> ProcessShape:
    """Read bundles back as a process layout; a clear ``ValueError`` for unsupported shapes."""
    if not bundles:
        raise ValueError("elastic: the trial's PlacementGroupFactory has no bundles")
    if len(bundles) == 1:
        gpu = float(bundles[0].get("GPU", 0.0))
        if gpu > 1:
            raise ValueError(
                f"elastic: a single bundle with GPU={gpu} is not a supported shape; give a "
                "gang one bundle per worker: [{'CPU': x}] + [{'CPU': y, 'GPU': 1}] * w"
            )
        return ProcessShape(1, True, gpu, ())
    workers = tuple(dict(b) for b in bundles[1:])
    for i, b in enumerate(workers, start=1):
        g = float(b.get("GPU", 0.0))
        if g not in (0.0, 1.0):
            raise ValueError(
                f"elastic: gang bundle {i} asks for GPU={g}; gang workers use exactly one "
                "whole GPU each (or none, for CPU-only gangs)"
            )
    gpus = {float(b.get("GPU", 0.0)) for b in workers}
    if len(gpus) != 1:
        raise ValueError("elastic: gang bundles must all have the same GPU count (0 or 1)")
    return ProcessShape(len(workers), False, gpus.pop(), workers)


class ElasticTrainable:
    """Marker mixin: a trainable that can run as a data-parallel gang (``fluid.train.elastic``).

    Ray adds a function's ``__mixins__`` to the class it wraps the function in, so the marker
    is visible from the driver through ``trial.get_trainable_cls()``.
    """

    _fluid_elastic = True


def is_elastic(trainable: Any) -> bool:
    """Whether ``trainable`` is marked gang-capable.

    Accepts a marked function (also wrapped, e.g. by ``tune.with_resources``), a function whose
    ``__mixins__`` carry the marker, and the Tune trainable class Ray builds from either.
    """
    return find_mark(trainable, ELASTIC_ATTR, lambda mark: mark is True) is not None


def find_mark(trainable: Any, attr: str, accept: Callable[[Any], bool]) -> Any:
    """The first value of ``attr`` that ``accept`` takes on ``trainable`` or its ``__mixins__``,
    then on what it wraps (``__wrapped__``, 8 levels at most); ``None``: none."""
    seen = 0
    while trainable is not None and seen < 8:
        for holder in itertools.chain((trainable,), getattr(trainable, "__mixins__", ())):
            mark = getattr(holder, attr, None)
            if accept(mark):
                return mark
        trainable = getattr(trainable, "__wrapped__", None)
        seen += 1
    return None
