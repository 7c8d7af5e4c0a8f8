"""Where FluidExecutor reads the cluster's GPU count (injected, so a simulator can drive it)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol


class ResourceView(Protocol):
    """Where FluidExecutor reads the cluster's GPU count (injected so a simulator can drive it)."""

    def gpus(self) -> float:
        """GPUs of the live nodes."""
        ...


class RayResourceView:
    """GPU count of the live Ray cluster, read at most once every ``refresh_s`` seconds."""

    def __init__(self, clock: Callable[[], float], refresh_s: float = 1.0) -> None:
        self._clock, self._refresh_s = clock, refresh_s
        self._at, self._gpus = -math.inf, 0.0

    def gpus(self) -> float:
        """GPUs of the live Ray cluster (cached for ``refresh_s``)."""
        now = self._clock()
        if now - self._at >= self._refresh_s:
            import ray

            self._gpus, self._at = float(ray.cluster_resources().get("GPU", 0.0)), now
        return self._gpus
