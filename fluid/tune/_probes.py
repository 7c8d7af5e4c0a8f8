"""How FluidExecutor measures packing: the width each iteration ran at, and packing probes.

* **the width an iteration ran at** (``sample_width``): a trial on a whole GPU or a gang ran at
  its width; a packed one ran at ``1/k`` when the same ``k`` trials computed on its GPU all
  through the iteration (``Residency``: Ray and MPS do not enforce shares, so a share alone on
  its GPU runs as a whole GPU), and its sample says nothing about packing when that changed
  meanwhile. With MPS active-thread percentages set (``shares_enforced``), a share is what it
  runs at;
* **probes** (``fluid.core.packing.pair_probes``): without a profile a trial nothing is
  measured about is assumed not to gain from sharing (the conservative prior), so nothing would
  ever be packed, nor measured; while fewer than ``Tunables.probe_pairs`` trials have their own
  ``alpha_i``, pairs of trials the algorithm does not wait on are packed to measure it: a host
  runs an iteration alone on a half GPU, then a mate joins it. Once enough are measured, their
  median is what trials not measured yet are planned with (``OverheadEstimator.fresh_alpha``).
"""

from __future__ import annotations

from fluid.core import GpuPool, TrialFacts, trial_limits
from fluid.core.packing import HOST_ITERATIONS, PROBE_SHARE, pair_probes
from fluid.core.tolerances import WIDTH_TOL
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import LIVE, Phase, TrialRecord, TrialStore
from fluid.tune._residency import Residency
from fluid.tune._specs import SpecCache

_HOSTING = LIVE | frozenset({Phase.READY})


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

    def wanted(self) -> int:
        """How many more trials' ``alpha_i`` the probes are to measure (0: no probing: a
        profile or enough measurements say what packing costs, or nothing may be packed)."""
        est, specs = self._estimator, self._specs
        if est.packing_measured or not est.refine or specs.fresh_c() > 1:
            return 0
        free = TrialFacts(1.0, est.prior_beta, alpha_measured=True)
        if trial_limits(free, specs.config, specs.tunables, specs.gpus, specs.exact)[0] < 2:
            return 0  # the user's c (or c_max) allows no packing at all
        return max(0, specs.tunables.probe_pairs - est.alphas_measured)

    def _may_share(self, rec: TrialRecord) -> bool:
        """Whether a waiting trial may be a probe: the algorithm does not wait on it, and no
        request (a floor of GPUs, plain Tune's shape, a Ray Train trainer's workers of one GPU
        each) or out-of-memory share forbids a half GPU."""
        return (not self._specs.leads(rec) and rec.w_min is None and not rec.ray_train
                and not self._specs.keeps_shape(rec)
                and (rec.min_share is None or rec.min_share <= PROBE_SHARE + WIDTH_TOL))

    def hosts(self, pool: GpuPool | None) -> int:
        """Probes alone on their GPU, each waiting for a mate: a GPU that runs two trials at
        once, so one more trial than the plan's ``c_i`` says may be in flight for it."""
        if pool is None or not self.wanted():
            return 0
        return sum(1 for r in self._store.unordered(_HOSTING)
                   if r.probe and r.own_alpha is None and pool.alone(r.trial_id))

    def probe(self, candidates: list[TrialRecord], pool: GpuPool,
              ) -> tuple[list[TrialRecord], GpuPool]:
        """Start probes among ``candidates`` (waiting trials in start order): mates for the
        hosts measured alone, then new probes on idle GPUs; the trials started (at a half GPU,
        placed in the pool returned) in start order."""
        needed = self.wanted()
        if not needed or any(r.priority > 0 for r in candidates):
            return [], pool  # a promoted trial waiting starts before any probe
        store = self._store
        live = [r for r in store.unordered(_HOSTING) if r.probe and r.own_alpha is None]
        wanted = max(0, needed - (len(live) + 1) // 2)  # a probe is one or two trials
        ready = sorted((r for r in live if r.phase is Phase.RUNNING and 1.0 in r.raw
                        and pool.alone(r.trial_id)), key=lambda r: r.seq)
        if not (wanted or ready):
            return [], pool
        pairs = [(self._specs.spec(r), r.until is None or r.until - r.iteration >= HOST_ITERATIONS)
                 for r in candidates if self._may_share(r)]
        starts, _, pool = pair_probes(pairs, [r.trial_id for r in ready], pool, wanted)
        started = [store[a.trial_id] for a in starts]
        for rec in started:
            store.update(rec, probe=True)
        return started, pool
