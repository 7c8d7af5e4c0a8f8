"""The CPUs of Fluid's plan: a trial starts or grows only if its shape's CPUs fit beside those
of the trials placed, so Fluid never plans more trials than Ray can run.

A shape's CPUs are those of its placement-group bundles
(``fluid.tune._placement_groups``): the trainable's own bundle, plus one bundle per gang
worker (or per Ray Train worker).
"""

from __future__ import annotations

from typing import Any

from fluid.core.tolerances import CPU_TOL
from fluid.tune._placement_groups import cpus_in, shape_cpus, shape_of
from fluid.tune._records import PLACED, TrialRecord, TrialStore
from fluid.tune._train_trials import train_shape


class CpuAccount:
    """CPUs of the cluster and of each trial's shape.

    Args:
        store: the trials (the placed ones hold CPUs).
        cpus_per_trial: CPUs of a trial's own bundle (``None``: what the trial asked for).
        cpus_per_worker: CPUs of each gang worker's bundle.
    """

    def __init__(self, store: TrialStore, cpus_per_trial: float | None,
                 cpus_per_worker: float) -> None:
        self._store = store
        self._per_trial, self._per_worker = cpus_per_trial, cpus_per_worker
        self.total: float | None = None  # CPUs of the cluster (None: not counted)

    def shape(self, rec: TrialRecord, width: float) -> Any:
        """The ``PlacementGroupFactory`` the trial runs in at ``width`` GPUs."""
        cpus = rec.cpus if self._per_trial is None else self._per_trial
        if rec.ray_train:  # the driver and its workers' CPUs; Train's workers take the GPUs
            return train_shape(width, cpus, self._per_worker, rec.extras)
        return shape_of(width, cpus, self._per_worker, rec.request, rec.extras)

    def needed(self, rec: TrialRecord, width: float | None = None) -> float:
        """CPUs of the trial's shape at ``width`` (default: its planned width, else the least
        it may get)."""
        w = width if width is not None else rec.width
        w = w if w is not None else rec.w_min or 1.0
        if rec.request is None and not rec.ray_train:  # Fluid's gang shape: these alone
            cpus = rec.cpus if self._per_trial is None else self._per_trial
            return shape_cpus(w, cpus, self._per_worker)
        return cpus_in(self.shape(rec, w))

    def free(self) -> float | None:
        """CPUs the placed trials leave (``None``: not counted)."""
        if self.total is None:
            return None
        placed = [r for r in self._store.in_phase(PLACED) if r.width is not None]
        return self.total - sum(self.needed(r) for r in placed)

    def within(self, recs: list[TrialRecord], free: float | None,
               ) -> tuple[list[TrialRecord], list[TrialRecord]]:
        """Split ``recs`` (in order) into those whose CPUs fit in ``free`` and the others."""
        if free is None:
            return recs, []
        fit: list[TrialRecord] = []
        rest: list[TrialRecord] = []
        every_needs = bool(self._per_trial)  # every Fluid shape takes some CPUs
        for k, r in enumerate(recs):
            if every_needs and free <= CPU_TOL:  # full: spare 10,000-trial groups the shapes
                rest += recs[k:]
                break
            need = self.needed(r)
            if need <= free + CPU_TOL:
                fit.append(r)
                free -= need
            else:
                rest.append(r)
        return fit, rest

    def hold(self, changes: list[tuple[TrialRecord, float]]) -> bool:
        """Whether the CPUs free now hold placed trials' shapes at new widths (``(record,
        width)``): a gang's workers each take a bundle of CPUs."""
        free = self.free()
        return free is None or sum(self.extra(rec, w) for rec, w in changes) <= free + CPU_TOL

    def extra(self, rec: TrialRecord, width: float) -> float:
        """CPUs the trial would need at ``width`` beyond those of its shape now."""
        return self.needed(rec, width) - self.needed(rec)
