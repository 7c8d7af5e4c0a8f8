"""Estimates from what trials report: ``alpha``, ``beta``, ``eps``, one-GPU iteration times, memory.

* one-GPU seconds per iteration of a trial: ``time_this_iter_s / f(w)`` at the widths it ran,
  under the current ``alpha`` and ``beta`` (``f`` is ``fluid.core.slowdown``);
* ``alpha`` / ``beta``: refined from trials seen at two widths (a share ``1/p`` then ``1/q``
  gives ``alpha``, a gang of ``w`` then ``v`` GPUs gives ``beta``), median over trials;
* ``eps``: what a resize cost, measured on the first result after it, median of recent ones.
"""

from __future__ import annotations

import statistics
from collections import deque

from ray.tune.experiment import Trial

from fluid.core import slowdown
from fluid.tune._records import TrialBook, TrialRecord

#: Seconds a resize is assumed to cost until one has been measured.
DEFAULT_EPS = 5.0


class OverheadEstimator:
    """``alpha``, ``beta``, ``eps`` and per-trial iteration times and memory of one experiment.

    Args:
        book: the trials (read for the means over measured trials).
        alpha, beta: starting overheads (``>= 1``).
        eps: a fixed resize cost in seconds, or ``None`` to measure it.
        refine: refine ``alpha`` and ``beta`` from resized trials.
        default_iteration_time: one-GPU seconds per iteration before any trial reported.
        trial_memory: GB a trial needs on a GPU when it has not reported its peak.
        gpu_memory: GB of one GPU (``None``: memory is not checked).
    """

    def __init__(self, book: TrialBook, *, alpha: float, beta: float, eps: float | None,
                 refine: bool, default_iteration_time: float, trial_memory: float | None,
                 gpu_memory: float | None) -> None:
        self._book = book
        self.alpha, self.beta = alpha, beta
        self.fixed_eps, self.refine = eps, refine
        self.default_iteration_time = default_iteration_time
        self.trial_memory, self.gpu_memory = trial_memory, gpu_memory
        self.eps_samples: deque = deque(maxlen=10)
        self._alpha_by_trial: dict[str, float] = {}
        self._beta_by_trial: dict[str, float] = {}
        self._mean_time: float | None = None  # mean iteration time of measured trials
        # trial id -> ((alpha, beta, samples), median): every re-plan asks for the time of
        # every live trial, most of them unchanged since the last one.
        self._medians: dict[str, tuple[tuple, float]] = {}

    @property
    def eps(self) -> float:
        """``eps``: the resize cost in seconds, as given or as measured (median)."""
        if self.fixed_eps is not None:
            return self.fixed_eps
        return statistics.median(self.eps_samples) if self.eps_samples else DEFAULT_EPS

    def slowdown(self, width: float | None) -> float:
        """``f(w)`` under the current ``alpha`` and ``beta`` (1 when not running)."""
        return slowdown(width, self.alpha, self.beta) if width else 1.0

    def observe(self, rec: TrialRecord, dt: float | None, now: float) -> bool:
        """Take in a result's ``time_this_iter_s``; True when it was the trial's first sample.

        The first result after a resize measures ``eps`` instead; the first of a fresh start
        (warm-up) is skipped unless the trial has no sample yet.
        """
        if rec.resize_at is not None:
            expected = self.iteration_time(rec) * self.slowdown(rec.actual)
            self.eps_samples.append(max(0.0, now - rec.resize_at - expected))
            rec.resize_at = None
            return False
        if dt is None or not rec.actual or (rec.fresh_start and rec.samples):
            return False
        rec.samples.append((float(dt), rec.actual))
        new_width = rec.actual not in rec.raw
        rec.raw.setdefault(rec.actual, deque(maxlen=5)).append(float(dt))
        if self.refine and len(rec.raw) > 1 and (new_width or len(rec.raw[rec.actual]) == 2):
            self.refine_overheads(rec)
        self._mean_time = None
        return len(rec.samples) == 1

    def refine_overheads(self, rec: TrialRecord) -> None:
        """Re-estimate ``alpha``/``beta`` when a trial has been seen at another width.

        A trial resized from a share ``1/p`` to ``1/q`` gives ``alpha``, from ``w`` to ``v``
        GPUs gives ``beta``; the median over trials is used. Only this trial's estimate is
        recomputed (results arrive constantly; resizes are rare).
        """
        times = {w: statistics.median(v) for w, v in rec.raw.items() if v}
        packed = sorted((round(1 / w), t) for w, t in times.items() if w <= 1)
        gangs = sorted((round(w), t) for w, t in times.items() if w >= 1)
        alphas = [(tq / tp) ** (1.0 / (q - p))
                  for (p, tp), (q, tq) in zip(packed, packed[1:], strict=False)]
        betas = [(v * tv / (w * tw)) ** (1.0 / (v - w))
                 for (w, tw), (v, tv) in zip(gangs, gangs[1:], strict=False)]
        tid = rec.trial_id
        if alphas:
            self._alpha_by_trial[tid] = statistics.median(alphas)
            self.alpha = max(1.0, statistics.median(self._alpha_by_trial.values()))
        if betas:
            self._beta_by_trial[tid] = statistics.median(betas)
            self.beta = max(1.0, statistics.median(self._beta_by_trial.values()))
        self._mean_time = None  # one-GPU times depend on alpha and beta

    def iteration_time(self, rec: TrialRecord) -> float:
        """Median one-GPU seconds per iteration: ``time_this_iter_s / f(w)`` at the widths it
        ran, under the current ``alpha`` and ``beta``; unmeasured trials get the mean of the
        measured ones (computed once per change), else ``default_iteration_time``."""
        if rec.samples:
            inputs = (self.alpha, self.beta, tuple(rec.samples))
            cached = self._medians.get(rec.trial_id)
            if cached is not None and cached[0] == inputs:
                return cached[1]
            median = statistics.median(t / self.slowdown(w) for t, w in rec.samples)
            self._medians[rec.trial_id] = (inputs, median)
            return median
        if self._mean_time is None:
            known = [self.iteration_time(r) for r in self._book.records.values() if r.samples]
            self._mean_time = statistics.mean(known) if known else self.default_iteration_time
        return self._mean_time

    def memory(self, rec: TrialRecord) -> float | None:
        """GB a trial needs on a GPU, for memory-safe packing (only with ``gpu_memory``).

        Its reported peak (``fluid_peak_gpu_memory``, bytes) when known, else
        ``trial_memory``, else the largest peak reported so far, else a whole GPU: a trial
        of unknown size is never packed, since MPS isolates no memory.
        """
        if self.gpu_memory is None:
            return None
        peak = _peak_gb(rec.trial)
        if peak is not None:
            return peak
        if self.trial_memory is not None:
            return self.trial_memory
        known = [p for r in self._book.records.values() if (p := _peak_gb(r.trial)) is not None]
        return max(known) if known else self.gpu_memory


def _peak_gb(trial: Trial) -> float | None:
    last = trial.last_result or {}
    peak = last.get("fluid_peak_gpu_memory")
    return float(peak) / 2**30 if peak else None
