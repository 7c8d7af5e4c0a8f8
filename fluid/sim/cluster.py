"""Simulated GPUs: Ray placement group shapes placed with ``fluid.core.GpuPool``, and accounting.

A trial's ``PlacementGroupFactory`` asks for ``width_of(pgf)`` GPUs in all: a share below one
is packed onto one GPU (shares of a GPU sum to at most 1, like Ray's fractional GPUs), one or
more whole GPUs form a gang. CPUs are not a constraint here (the cluster reports
``cpus_per_gpu`` CPUs per GPU to the schedulers that ask, e.g. ``DistributeResources``).

Accounting, integrated exactly between changes:

* **GPU-seconds**: time GPUs are *held* by some trial (a GPU shared by packed trials counts
  once), from placement to release, including start-up, restore and save time: what a user
  renting the GPUs pays for while the experiment uses them.
* **utilisation**: the busy fraction of each GPU, ``min(1, sum_i b_i)`` over the trials
  computing on it, ``b_i`` the share of time trial ``i`` has a kernel running on it (what
  ``nvidia-smi`` reports, and what the paper's utilisation figures show), given by the ground
  truth (``fluid.sim.truth``) for the trial's shape and co-runners. A trial starting,
  restoring or saving holds its GPUs but keeps them idle.

Example:
    >>> from fluid.sim.clock import SimClock
    >>> from ray.tune import PlacementGroupFactory
    >>> clock = SimClock()
    >>> cluster = SimCluster(2, clock)
    >>> cluster.place("a", PlacementGroupFactory([{"CPU": 1, "GPU": 0.5}]))
    0.5
    >>> cluster.set_active("a", util=0.4)
    >>> clock.advance_to(10.0)
    >>> cluster.release("a")
    >>> round(cluster.gpu_seconds, 6), round(cluster.busy_gpu_seconds, 6)
    (10.0, 4.0)
"""

from __future__ import annotations

from collections.abc import Callable

from ray.tune import PlacementGroupFactory

from fluid.core import GpuPool
from fluid.tune import width_of

#: Most packed trials on one simulated GPU (Ray itself has no limit; Fluid's ``c`` decides).
MAX_PER_GPU = 64


class SimCluster:
    """``n`` GPUs (a ``ResourceView`` for ``FluidExecutor``) with GPU-time accounting.

    Args:
        n: number of GPUs.
        clock: the simulated clock (accounting integrates over it).
        cpus_per_gpu: CPUs reported per GPU (never enforced).
        memory: GB of one GPU; packed trials whose memories exceed it do not fit.
    """

    def __init__(
        self,
        n: int,
        clock: Callable[[], float],
        cpus_per_gpu: float = 8.0,
        memory: float | None = None,
    ) -> None:
        if n < 1:
            raise ValueError(f"gpus must be >= 1, got {n}")
        self.n = n
        self.cpus_per_gpu = cpus_per_gpu
        self._clock = clock
        self.pool = GpuPool(n, memory)
        self._width: dict[str, float] = {}
        self._util: dict[str, float] = {}  # per-GPU busy contribution of an active trial
        self._gpu_busy: dict[int, float] = {}
        self._busy_total = 0.0  # sum over GPUs of min(1, contributions)
        self._held = 0  # GPUs with at least one trial
        self._last = clock()
        self.gpu_seconds = 0.0
        self.busy_gpu_seconds = 0.0

    # ------------------------------------------------------------------ ResourceView
    def gpus(self) -> float:
        """GPUs of the cluster (what ``FluidExecutor`` sizes against)."""
        return float(self.n)

    #: Ray's ``_resource_updater.get_num_gpus`` (for ``DistributeResources``).
    get_num_gpus = gpus

    def get_num_cpus(self) -> float:
        """Ray's ``_resource_updater.get_num_cpus`` (for ``DistributeResources``)."""
        return float(self.n * self.cpus_per_gpu)

    # ------------------------------------------------------------------ placement
    def _integrate(self) -> None:
        now = self._clock()
        dt = now - self._last
        if dt > 0:
            self.gpu_seconds += dt * self._held
            self.busy_gpu_seconds += dt * self._busy_total
        self._last = now

    def _recount(self) -> None:
        self._held = self.n - self.pool.idle_count()

    def place(self, trial_id: str, pgf: PlacementGroupFactory) -> float | None:
        """Place a trial's shape; returns its width in GPUs, or ``None`` if it does not fit."""
        w = width_of(pgf)
        if w > 0:
            self._integrate()
            if self.pool.place(trial_id, w, MAX_PER_GPU) is None:
                return None
            self._recount()
        self._width[trial_id] = w
        return w

    def set_active(self, trial_id: str, util: float = 0.0) -> None:
        """Mark a placed trial computing with per-GPU busy contribution ``util`` (0: idle)."""
        self._integrate()
        old = self._util.pop(trial_id, 0.0)
        gpus = self.pool.where(trial_id)
        for g in gpus:
            before = min(1.0, self._gpu_busy.get(g, 0.0))
            self._gpu_busy[g] = self._gpu_busy.get(g, 0.0) - old + util
            self._busy_total += min(1.0, self._gpu_busy[g]) - before
        if util > 0 and gpus:
            self._util[trial_id] = util

    def release(self, trial_id: str) -> None:
        """Free a trial's GPUs (no-op if it holds none)."""
        if trial_id not in self._width:
            return
        self.set_active(trial_id, 0.0)
        self._integrate()
        self.pool.release(trial_id)
        del self._width[trial_id]
        self._recount()

    def close(self) -> None:
        """Bring the accounting up to the current time."""
        self._integrate()

    def describe(self) -> str:
        """``'3/8 GPUs held'``."""
        return f"{self._held}/{self.n} GPUs held"

