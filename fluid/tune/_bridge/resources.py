"""Where FluidExecutor reads the cluster's GPUs and CPUs (injected, so a simulator can drive it)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from fluid.core import Tunables


class ResourceView(Protocol):
    """Where FluidExecutor reads the cluster's GPU count (injected so a simulator can drive it)."""

    def gpus(self) -> float:
        """GPUs of the live nodes."""
        ...


def cpus_of_view(view: object) -> float | None:
    """CPUs of the live nodes when the view knows them (a ``cpus()`` method), else ``None``."""
    cpus = getattr(view, "cpus", None)
    return float(cpus()) if callable(cpus) else None


class RayResourceView:
    """GPUs and CPUs of the live Ray cluster, read at most once every ``refresh_s`` seconds.

    A read asks Ray's control store (milliseconds), a large share of Fluid's own time on the
    driver with many short trials if made at every step. Nodes join or leave far less often
    than every few seconds (an autoscaler takes minutes), so the plan follows them late by at
    most ``refresh_s`` (``Tunables.resources_refresh_s``).
    """

    def __init__(self, clock: Callable[[], float],
                 refresh_s: float = Tunables.resources_refresh_s) -> None:
        self._clock, self._refresh_s = clock, refresh_s
        self._at, self._resources = -math.inf, {}

    def _read(self) -> dict:
        now = self._clock()
        if now - self._at >= self._refresh_s:
            import ray

            self._resources, self._at = ray.cluster_resources(), now
        return self._resources

    def gpus(self) -> float:
        """GPUs of the live Ray cluster (cached for ``refresh_s``)."""
        return float(self._read().get("GPU", 0.0))

    def cpus(self) -> float:
        """CPUs of the live Ray cluster (cached for ``refresh_s``)."""
        return float(self._read().get("CPU", 0.0))

    def available_gpus(self) -> float:
        """GPUs no placement group or task holds now (read at each call: asked only before a
        Ray Train trial starts, ``_bridge.ray_train``)."""
        import ray

        return float(ray.available_resources().get("GPU", 0.0))
