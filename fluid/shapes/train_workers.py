"""The shape of a Ray Train trial: a Tune trial whose trainable runs a Ray Train trainer.

Such a trial's trainable is only the trainer's driver; Ray Train starts its ``w`` workers (one
GPU each) in a placement group of its own, outside the trial's. Fluid plans the trial at a width
of ``w`` GPUs like a gang, and gives Tune the driver's bundle plus one CPU-only bundle per
worker::

    [{"CPU": cpu}] + [{"CPU": worker_cpu}] * w

The GPUs are left free for Ray Train's own placement group (its workers ask ``{"GPU": 1}``), so
they are counted once; the workers' CPUs are held in the trial's placement group, and the
number of worker bundles tells the trainer inside the trial how many workers Fluid chose
(``fluid.train.scaling_config`` reads it back with ``workers_in``).

A trainable is marked by ``fluid.train.ray_train``: the attribute ``RAY_TRAIN_ATTR`` holds the
workers it allows, as ``WorkerRange``. Pure Python: no Ray.

Example:
    >>> driver_bundles(2, 1, 0.5)
    [{'CPU': 1.0}, {'CPU': 0.5}, {'CPU': 0.5}]
    >>> workers_in(driver_bundles(2, 1, 0.5)), workers_in([{"CPU": 1, "GPU": 1}])
    (2, None)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fluid.shapes.bundles import find_mark

#: The attribute that marks a trainable as a Ray Train driver (``fluid.train.ray_train``).
RAY_TRAIN_ATTR = "_fluid_ray_train"


@dataclass(frozen=True)
class WorkerRange:
    """The Ray Train workers (one GPU each) a trial may run with.

    ``least`` workers at least; at most ``most`` (``None``: as many as Fluid plans). A fixed
    count has ``least == most``.
    """

    least: int = 1
    most: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.least, int) or self.least < 1:
            raise ValueError(f"num_workers: the least number of workers must be an integer "
                             f">= 1, got {self.least!r}")
        if self.most is not None and (not isinstance(self.most, int) or self.most < self.least):
            raise ValueError(f"num_workers: the most workers must be an integer >= "
                             f"{self.least}, got {self.most!r}")

    @property
    def fixed(self) -> bool:
        """Whether the trial runs with exactly ``least`` workers."""
        return self.most == self.least

    @classmethod
    def of(cls, num_workers: int | tuple[int, int] | None) -> WorkerRange:
        """From ``num_workers`` as Ray Train spells it: ``n``, ``(least, most)`` or ``None``."""
        if num_workers is None:
            return cls()
        if isinstance(num_workers, tuple) and len(num_workers) == 2:
            return cls(*num_workers)
        if isinstance(num_workers, int) and not isinstance(num_workers, bool):
            return cls(num_workers, num_workers)
        raise ValueError("num_workers must be an int, a (least, most) tuple of ints or None, "
                         f"got {num_workers!r}")


@dataclass(frozen=True)
class TrainBounds:
    """The widths Fluid may give a Ray Train trial (its workers, one GPU each).

    ``elastic``: Fluid may size it (a range, or no count given); ``w_min``: the least width
    (``None``: sized freely from one worker); ``w_max``: the most (``None``: no bound of its
    own).
    """

    elastic: bool
    w_min: float | None
    w_max: float | None


def train_bounds(workers: WorkerRange, resize_requests: bool = False) -> TrainBounds:
    """The widths of a trial marked with ``workers``.

    A fixed count is the least and the most width, unless ``resize_requests`` (the user lets
    Fluid size requests: then it is sized freely, like an unmarked count); a range
    ``(least, most)`` bounds the widths (a least of one worker is no floor).

    Example:
        >>> train_bounds(WorkerRange(2, 2))
        TrainBounds(elastic=False, w_min=2.0, w_max=2.0)
        >>> train_bounds(WorkerRange(1, 4))
        TrainBounds(elastic=True, w_min=None, w_max=4.0)
    """
    if workers.fixed and resize_requests:
        workers = WorkerRange()
    if workers.fixed:
        return TrainBounds(False, float(workers.least), float(workers.least))
    least = float(workers.least) if workers.least > 1 else None
    most = float(workers.most) if workers.most is not None else None
    return TrainBounds(True, least, most)


def driver_bundles(workers: int, cpus_per_trial: float,
                   cpus_per_worker: float) -> list[dict[str, float]]:
    """Tune's bundles of a Ray Train trial with ``workers`` workers (module docstring)."""
    if workers < 1 or cpus_per_worker <= 0:
        raise ValueError("a Ray Train trial's shape needs >= 1 worker and cpus_per_worker > 0 "
                         f"(its worker count is the number of worker bundles), got {workers} "
                         f"and {cpus_per_worker}")
    head = {"CPU": float(cpus_per_trial)}
    return [head] + [{"CPU": float(cpus_per_worker)} for _ in range(workers)]


def workers_in(bundles: Sequence[Mapping[str, float]]) -> int | None:
    """The worker count of a Ray Train trial's bundles; ``None`` when they are not that shape
    (a bundle holds a GPU, or there is no worker bundle)."""
    if len(bundles) < 2 or any(b.get("GPU", 0) > 0 for b in bundles):
        return None
    return len(bundles) - 1


def worker_range(trainable: Any) -> WorkerRange | None:
    """The ``WorkerRange`` a trainable was marked with (``None``: not a Ray Train driver).

    Accepts the marked function (also wrapped, e.g. by ``tune.with_parameters``), a function
    whose ``__mixins__`` carry the mark, and the Tune trainable class Ray builds from either.
    """
    return find_mark(trainable, RAY_TRAIN_ATTR, lambda mark: isinstance(mark, WorkerRange))
