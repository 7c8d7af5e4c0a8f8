"""A planner on its own (no Ray instance), for the tests of FluidExecutor's parts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ray.tune.experiment import Trial

from fluid.tune._estimator import OverheadEstimator
from fluid.tune._options import FluidOptions
from fluid.tune._planner import Planner
from fluid.tune._records import TrialBook, TrialRecord


def fake_trial(tid: str, status: str = Trial.PAUSED) -> SimpleNamespace:
    """What the planner reads of a Tune trial."""
    return SimpleNamespace(trial_id=tid, status=status, last_result={})


def make_planner(gpus: float = 4.0, cpus: float | None = None, *, options: dict | None = None,
                 alpha: float | None = 1.0, beta: float | None = 1.0, eps: float | None = None,
                 default_iteration_time: float = 1.0, now: float = 0.0, **planner_kw: Any,
                 ) -> tuple[TrialBook, OverheadEstimator, Planner]:
    """An empty book, its estimator (prior ``alpha``, ``beta``) and a started planner on
    ``gpus`` GPUs with ``FluidOptions(**options)``'s policy and a clock at ``now``."""
    book = TrialBook()
    est = OverheadEstimator(book, alpha=alpha, beta=beta, eps=eps, refine=True,
                            default_iteration_time=default_iteration_time, trial_memory=None,
                            gpu_memory=None)
    planner = Planner(book, est, FluidOptions(**(options or {})).policy, dynamic=True,
                      clock=lambda: now, **planner_kw)
    planner.start(gpus, cpus)
    return book, est, planner


def file_records(book: TrialBook, n: int, until: int = 10, status: str = Trial.PAUSED,
                 **fields: Any) -> list[TrialRecord]:
    """``n`` records ``t0, t1, ...`` of group 0 with budget ``until``, added to ``book``."""
    recs = [TrialRecord(fake_trial(f"t{i}", status), 0, until, **fields) for i in range(n)]
    for rec in recs:
        book.add(rec)
    return recs
