"""How FluidExecutor measures packing: the width each iteration ran at, and packing probes.

* **the width an iteration ran at** (``sample_width``): a trial on a whole GPU or a gang ran at
  its width; a packed one ran at ``1/k`` when the same ``k`` trials computed on its GPU all
  through the iteration (``Residency``: Ray and MPS do not enforce shares, so a share alone on
  its GPU runs as a whole GPU), and its sample says nothing about its own ``alpha_i`` when
  that changed meanwhile. With MPS active-thread percentages set (``shares_enforced``), a
  share is what it runs at;
* **exposure** (``exposure``): how many other trials computed beside an iteration on its GPU,
  on average over it: what the experiment's packing estimate regresses iteration times on
  (``OverheadEstimator.packing_estimate``), every trial on one GPU a sample;
* **probes** (``fluid.core.packing.pair_probes``): without a profile a trial nothing is
  measured about is assumed not to gain from sharing (the conservative prior), so nothing would
  ever be packed, nor measured; while the estimate leaves packing undecided, pairs of trials
  the algorithm does not wait on, drawn at random, start packed beside the trials alone.
"""

from __future__ import annotations

from fluid.core import GpuPool, TrialFacts, trial_limits
from fluid.core.packing import PROBE_PAIR, PROBE_SHARE, pair_probes
from fluid.core.tolerances import WIDTH_TOL
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import TrialRecord, TrialStore
from fluid.tune._residency import Residency
from fluid.tune._specs import SpecCache


class PackingProbes:
    """Who computes beside whom, the width of each iteration in effect, and packing probes.

    Args:
        store: the trials.
        specs: the planner's specs (limits, leaders).
        estimator: the measurements (how many trials have their own ``alpha_i``).
        residency: who computes on each GPU (the lifecycle's).
        shares_enforced: a share limits the trial's compute (MPS active-thread percentages).
    """

    def __init__(self, store: TrialStore, specs: SpecCache, estimator: OverheadEstimator,
                 residency: Residency, shares_enforced: bool = False) -> None:
        self._store, self._specs, self._estimator = store, specs, estimator
        self._residency, self._enforced = residency, shares_enforced

    def sample_width(self, rec: TrialRecord, dt: float | None, now: float,
                     ) -> tuple[float | None, bool]:
        """The width the iteration just reported ran at in effect, and whether it says
        anything about packing (who computed beside it did not change during it)."""
        w = rec.actual
        if w is None or dt is None or w >= 1 - WIDTH_TOL or self._enforced:
            return w, True
        k = self._residency.degree(rec.trial_id, now - float(dt))
        return (w, False) if k is None else (1.0 / k if k > 1 else 1.0, True)

    def exposure(self, rec: TrialRecord, dt: float | None, now: float) -> float | None:
        """How many other trials computed beside the iteration just reported on its GPU, on
        average over it (``None``: a gang, no GPU, no time). With shares enforced, a share
        ``1/k`` runs as ``k`` to a GPU whoever is beside it."""
        w = rec.actual
        if not w or dt is None or not dt > 0 or w > 1 + WIDTH_TOL:
            return None
        if self._enforced:
            return round(1 / w) - 1.0
        return self._residency.exposure(rec.trial_id, now - float(dt), now)

    def wanted(self) -> int:
        """How many more trials the probes are to pack (0: no probing: a profile or the
        measurements decide packing, or nothing may be packed): ``probe_pairs`` pairs in
        all, less the probes started. Where packing does not pay, that is all it costs; where
        the estimate says it may, fresh trials are packed and measure it further."""
        est, specs = self._estimator, self._specs
        if est.packing_measured or not est.refine or specs.fresh_c() > 1:
            return 0
        free = TrialFacts(1.0, est.prior_beta, alpha_measured=True)
        if trial_limits(free, specs.config, specs.tunables, specs.gpus, specs.exact)[0] < 2:
            return 0  # the user's c (or c_max) allows no packing at all
        return max(0, PROBE_PAIR * specs.tunables.probe_pairs - len(self._store.probes))

    def _may_share(self, rec: TrialRecord) -> bool:
        """Whether a waiting trial may be a probe: the algorithm does not wait on it, and no
        request (a floor of GPUs, plain Tune's shape, a Ray Train trainer's workers of one GPU
        each) or out-of-memory share forbids a half GPU."""
        return (not self._specs.leads(rec) and rec.w_min is None and not rec.ray_train
                and not self._specs.keeps_shape(rec)
                and (rec.min_share is None or rec.min_share <= PROBE_SHARE + WIDTH_TOL))

    def probe(self, candidates: list[TrialRecord], pool: GpuPool,
              ) -> tuple[list[TrialRecord], GpuPool]:
        """Start probes among ``candidates`` (waiting trials in start order); the trials
        started (at a half GPU, placed in the pool returned) in start order."""
        needed = self.wanted()
        if not needed or any(r.priority > 0 for r in candidates):
            return [], pool  # a promoted trial waiting starts before any probe
        specs = [self._specs.spec(r) for r in candidates if self._may_share(r)]
        starts, pool = pair_probes(specs, pool, needed)
        chosen = {a.trial_id for a in starts}
        started = [r for r in candidates if r.trial_id in chosen]
        for rec in started:
            self._store.update(rec, probe=True)
        return started, pool
