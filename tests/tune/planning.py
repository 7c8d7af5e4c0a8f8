"""A planner on its own (no Ray instance), for the tests of FluidExecutor's parts."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ray.tune.experiment import Trial

from fluid.core import PolicyConfig, Tunables
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._lifecycle import Lifecycle
from fluid.tune._options import FluidOptions
from fluid.tune._planner import Planner
from fluid.tune._records import Phase, TrialRecord, TrialStore
from fluid.tune._specs import SpecCache


def fake_trial(tid: str, status: str = Trial.PAUSED) -> SimpleNamespace:
    """What the planner reads of a Tune trial."""
    return SimpleNamespace(trial_id=tid, status=status, last_result={})


def make_planner(gpus: float = 4.0, cpus: float | None = None, *, options: dict | None = None,
                 alpha: float | None = 1.0, beta: float | None = 1.0, eps: float | None = None,
                 default_iteration_time: float = 1.0, now: float = 0.0, **planner_kw: Any,
                 ) -> tuple[TrialStore, OverheadEstimator, Planner]:
    """An empty store, its estimator (prior ``alpha``, ``beta``) and a started planner on
    ``gpus`` GPUs with ``FluidOptions(**options)``'s policy and a clock at ``now``."""
    store = TrialStore()
    opts = FluidOptions(default_iteration_time=default_iteration_time, **(options or {}))
    tunables = opts.tunables
    assert isinstance(tunables, Tunables)
    est = OverheadEstimator(store, alpha=alpha, beta=beta, eps=eps, refine=True,
                            trial_memory=None, gpu_memory=None, tunables=tunables)
    planner = new_planner(store, est, opts.policy, tunables, clock=lambda: now, **planner_kw)
    planner.life.open(gpus, opts.policy.gpu_memory)
    planner.start(gpus, cpus)
    return store, est, planner


def plan(planner: Planner, eligible: Callable[[], list[TrialRecord]],
         search_done: bool = False) -> None:
    """One plan, each of its decisions applied to the planner's lifecycle (as the executor
    does)."""
    for decision in planner.plan(eligible, search_done):
        planner.life.apply(decision)


def new_planner(store: TrialStore, est: OverheadEstimator, policy: PolicyConfig,
                tunables: Tunables, *, clock: Any = lambda: 0.0, exact_limits: bool = True,
                **planner_kw: Any) -> Planner:
    """A dynamic planner of ``store``'s trials, with its specs and lifecycle, as the executor
    builds them."""
    specs = SpecCache(store, est, policy, tunables, exact_limits)
    return Planner(Lifecycle(store, specs, clock), specs, est, policy, tunables, dynamic=True,
                   clock=clock, **planner_kw)


def file_records(store: TrialStore, n: int, until: int = 10, status: str = Trial.PAUSED,
                 est: OverheadEstimator | None = None, **fields: Any) -> list[TrialRecord]:
    """``n`` records ``t0, t1, ...`` of group 0 with budget ``until``, filed in ``store`` (and
    counted by ``est``, as the executor does)."""
    recs = [TrialRecord(fake_trial(f"t{i}", status), 0, until, **fields) for i in range(n)]
    for rec in recs:
        store.add(rec)
        if est is not None:
            est.track(rec)
    return recs


def file_running(store: TrialStore, planner: Planner, widths: list[float], until: int = 10,
                 **fields: Any) -> list[TrialRecord]:
    """Records ``t0, t1, ...`` running at ``widths`` (placed in the planner's pool), elastic,
    checkpointing, their one-GPU iteration time measured (1 s)."""
    values: dict[str, Any] = {"elastic": True, "checkpoints": True, "phase": Phase.RUNNING}
    values.update(fields)
    recs = []
    for i, w in enumerate(widths):
        rec = TrialRecord(fake_trial(f"t{i}", Trial.RUNNING), 0, until, width=w, actual=w,
                          raw={1.0: deque([1.0, 1.0])}, samples=deque([(1.0, 1.0)] * 2),
                          **values)
        pool = planner.life.pool
        assert pool is not None and pool.place(rec.trial_id, w) is not None
        store.add(rec)
        recs.append(rec)
    return recs


def new_estimator(store: TrialStore, tunables: Tunables, gpu_memory: float | None = None,
                  prior: float | None = None) -> OverheadEstimator:
    """An estimator of ``store``'s trials with ``prior`` for ``alpha`` and ``beta``
    (``None``: the conservative prior), refining each trial's own."""
    return OverheadEstimator(store, alpha=prior, beta=prior, eps=None, refine=True,
                             trial_memory=None, gpu_memory=gpu_memory, tunables=tunables)


def elastic_planner(gpus: float = 4.0, alpha: float | None = None, beta: float | None = None,
                    eps: float = 1.0, **options: Any) -> tuple:
    """``make_planner`` with the overheads given and options as keywords."""
    return make_planner(gpus, options=options, alpha=alpha, beta=beta, eps=eps)


def elastic_records(store: TrialStore, n: int, until: int = 10, **kw: Any) -> list[TrialRecord]:
    """``file_records`` of ``n`` elastic trials."""
    return file_records(store, n, until, elastic=True, **kw)
