"""What the cluster holds for the experiment, as FluidExecutor reads it at each step: its GPUs
and CPUs (``ResourceView``, Ray's unless injected), the GPUs held outside the experiment's
trials (``OutsideGpus``), whether Ray can start a planned trial now (``StartGate``), and the
nodes the experiment waits for (``NodeWait``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from fluid.core import Tunables
from fluid.tune._planner import Planner
from fluid.tune._records import TrialRecord, TrialStore
from fluid.tune._resources import (
    OutsideGpus,
    RayResourceView,
    ResourceView,
    StartGate,
    cpus_of_view,
)
from fluid.tune._waiting import NodeWait


class Capacity:
    """The cluster's capacity for one experiment.

    Args:
        store: the trials (what they hold is not outside).
        clock: monotonic clock in seconds.
        tunables: how often Ray is read, how long a GPU must stay outside.
        view: where GPUs and CPUs are read (``None``: Ray's, from ``connect``).
        refuse: a cluster too small for a trial is refused instead of waited for.
    """

    def __init__(self, store: TrialStore, clock: Callable[[], float], tunables: Tunables,
                 view: ResourceView | None, refuse: bool) -> None:
        self._store, self._clock, self._tunables = store, clock, tunables
        self.view = view
        self.waits = NodeWait(refuse=refuse)
        self._gate = StartGate()
        self._outside = OutsideGpus(clock, tunables.resources_refresh_s,
                                    tunables.outside_settle_s)

    def connect(self) -> tuple[float, float | None]:
        """The cluster's GPUs and CPUs (``None``: not counted), read from Ray unless a view
        was given."""
        if self.view is None:
            self.view = RayResourceView(self._clock, self._tunables.resources_refresh_s)
        return self.view.gpus(), cpus_of_view(self.view)

    def gpus(self) -> float:
        """The cluster's GPUs now."""
        assert self.view is not None
        return self.view.gpus()

    def follow(self, planner: Planner) -> float | None:
        """The plan follows the cluster (nodes joined or left, GPUs held outside); what the
        experiment waits for is reviewed. Returns the GPUs the plan's pool is to have
        (``Planner.sync_cluster``; ``None``: as before)."""
        if self.view is None:
            return None
        gpus = planner.sync_cluster(self.view, self._outside.read(self.view, self._store))
        self.waits.review(self._store, self.view.gpus(), planner.cpus)
        return gpus

    def gate(self) -> Callable[[TrialRecord], bool]:
        """Whether Ray holds a planned trial's GPUs now (``StartGate``), Ray's free GPUs read
        at most once for this step."""
        available = getattr(self.view, "available_gpus", None)
        available = None if available is None else functools.cache(available)
        return lambda rec: self._gate.fits(rec, self._store, available, self._outside.seen)
