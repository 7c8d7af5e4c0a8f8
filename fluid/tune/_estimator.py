"""Estimates from what trials report: ``alpha``, ``beta``, ``eps``, one-GPU iteration times, memory.

* the experiment's ``alpha`` (``packing_estimate``): measured across trials from the first wave
  on (``fluid.core.estimates``): each trial's first iteration on one GPU (its second once it
  has one: no warm-up), with how many other trials computed beside it then (its *exposure*,
  ``Residency.exposure``), gives the slope of ``log time`` on exposure (trials packed and
  alone differ in configuration, not only in packing: the spread around the line is the
  interval); trials measured at two degrees themselves whose first iterations were not on one
  GPU (a gang first) add their own ``alpha_i`` (within a trial, configuration cancels). The
  estimate, with its interval, is weighed against the prior (a profile's ``alpha`` or the
  conservative ``Tunables.prior_alpha``, with spread ``prior_alpha_spread``) by precision;
* per trial ``alpha_i`` / ``beta_i``: the experiment's (``fresh_alpha``; the prior ``beta``)
  sharpened by the trial's own ``time_this_iter_s`` at the widths it ran (a share ``1/p``
  against one GPU gives ``alpha_i``, a gang of ``w`` against one GPU gives ``beta_i``, no
  resize needed when it started at that width), shrunk towards it: in log space, it counts as
  ``Tunables.prior_weight`` samples;
* one-GPU seconds per iteration of a trial: its own one-GPU times when it ran on one GPU, else
  ``time_this_iter_s / f_i(w)`` under its ``alpha_i``, ``beta_i`` (``f`` is
  ``fluid.core.slowdown``);
* ``alpha`` / ``beta`` (reported): median over the trials measured at two widths, else the prior;
* ``beta_spread``: how much ``beta_i`` differs across configurations (a resize judges a trial
  that has not measured its own at the slow end of that range);
* ``eps``: what a resize cost, measured on the first result after it, median of recent ones;
  until a resize is measured, what a start cost (a restart stops the trial and starts it
  again: at least that), measured on the first result after each start; until then
  ``Tunables.default_eps``.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from fluid.core import Tunables, slowdown
from fluid.core.estimates import (
    LogEstimate,
    combine,
    config_numbers,
    exposure_slope,
    mean_of_logs,
    pooled_spread,
    shrink,
)
from fluid.core.overheads import c_from_alpha
from fluid.core.tolerances import WIDTH_TOL
from fluid.tune._covariates import CovariateRows
from fluid.tune._records import TrialRecord, TrialStore


class OverheadEstimator:
    """``alpha``, ``beta``, ``eps`` and per-trial iteration times and memory of one experiment.

    Args:
        store: the trials (read for the means over measured trials; samples are written
            through it).
        alpha, beta: the prior overheads (``>= 1``; ``None``: the tunables' priors).
        eps: a fixed resize cost in seconds, or ``None`` to measure it.
        refine: refine ``alpha`` and ``beta`` from resized trials.
        trial_memory: GB a trial needs on a GPU when it has not reported its peak.
        gpu_memory: GB of one GPU (``None``: memory is not checked).
        tunables: the priors, ``default_eps``, ``default_iteration_time`` and how many samples
            are kept.
    """

    def __init__(self, store: TrialStore, *, alpha: float | None, beta: float | None,
                 eps: float | None, refine: bool, trial_memory: float | None,
                 gpu_memory: float | None, tunables: Tunables) -> None:
        self._store, self._tunables = store, tunables
        self.prior_alpha = tunables.prior_alpha if alpha is None else float(alpha)
        self.alpha_given = alpha is not None
        self.prior_beta = tunables.prior_beta if beta is None else float(beta)
        self.alpha, self.beta = self.prior_alpha, self.prior_beta
        self.fixed_eps, self.refine = eps, refine
        self.default_iteration_time = tunables.default_iteration_time
        self.trial_memory, self.gpu_memory = trial_memory, gpu_memory
        self.eps_samples: deque = deque(maxlen=tunables.eps_samples_kept)
        # seconds from a start to training
        self.start_samples: deque = deque(maxlen=tunables.eps_samples_kept)
        self._mean_time: float | None = None  # mean iteration time of measured trials
        # The mean kept as an exact sum of each measured trial's time, updated as a trial's
        # samples change instead of recomputed over every trial ever measured: integers in
        # units of 2**-1074 (the least float step), so the sum is exact whatever the order
        # and the mean, one correctly rounded division, is statistics.mean's very float.
        self._times: dict[str, float] = {}
        self._sum = 0
        # trial id -> ((alpha, beta, samples), median): every re-plan asks for the time of
        # every live trial, most of them unchanged since the last one.
        self._medians: dict[str, tuple[tuple, float]] = {}
        # trial id -> (exposure, seconds, iterations seen) of its first one-GPU iteration, then its second
        self._exposed: dict[str, tuple[float, float, int]] = {}
        self._covariates = CovariateRows()
        self._posterior: LogEstimate | None = None  # packing_estimate, until a sample changes

    def restore_eps(self, samples: list[float]) -> None:
        """Take in resize costs measured before (a restored experiment's)."""
        self.eps_samples.extend(samples)

    @property
    def fresh_alpha(self) -> float:
        """``alpha_i`` of a trial with no packing measurement of its own: the prior given (a
        profile's), else the experiment's estimate (``packing_estimate``: the conservative
        prior until trials are measured, moving towards what they show as its interval
        narrows; trials of one experiment share a model family and the hardware; each
        trial's own measurement wins once it has one)."""
        if self.alpha_given:
            return self.prior_alpha
        return self.packing_estimate.value

    @property
    def packing_estimate(self) -> LogEstimate:
        """The experiment's ``alpha`` in log space, with its standard error: the prior weighed
        by precision against what the trials measured (module docstring)."""
        if self._posterior is None:
            prior = LogEstimate.of(self.prior_alpha, self._tunables.prior_alpha_spread)
            if self.alpha_given or not self.refine:
                self._posterior = prior
            else:
                # A trial's own alpha_i counts only where it has no exposure sample: both
                # rest on its first iterations, which would count twice.
                across = list(self._exposed.values())
                own = [a for tid, a in self._store.own_alphas.items()
                       if tid not in self._exposed]
                measured = combine([
                    exposure_slope([v[0] for v in across], [v[1] for v in across],
                                   self._covariates.rows(self._exposed)),
                    mean_of_logs(own)])
                self._posterior = shrink(prior, measured)
        return self._posterior

    @property
    def packing_measured(self) -> bool:
        """Whether ``fresh_alpha`` is a measurement that decides packing (a profile's or a
        given ``alpha``, or an estimate whose 95% interval lies on one side of what packs a
        fresh trial, ``c_i`` under ``o_th``), not the conservative prior: until then packing
        probes measure more (``_probes``)."""
        if self.alpha_given:
            return True
        est = self.packing_estimate
        if not est.n:
            return False
        tunables = self._tunables
        low, high = est.interval()
        return (c_from_alpha(max(1.0, low), tunables.o_th, tunables.c_max)
                == c_from_alpha(high, tunables.o_th, tunables.c_max))

    @property
    def alphas_measured(self) -> int:
        """How many trials have their own measured ``alpha_i``."""
        return len(self._store.own_alphas)

    @property
    def measured_beta(self) -> float | None:
        """Median of the trials' own measured ``beta_i`` (unshrunk); ``None``: none measured."""
        return self.beta if self._store.own_betas else None

    @property
    def beta_spread(self) -> float:
        """Standard deviation of ``log beta_i`` across the experiment's configurations: the
        trials' own measured ``beta_i`` pooled with ``Tunables.prior_beta_spread``."""
        tunables = self._tunables
        return pooled_spread(list(self._store.own_betas.values()), tunables.prior_beta_spread,
                             tunables.prior_weight)

    @property
    def eps(self) -> float:
        """``eps``: the resize cost in seconds, as given or as measured: the median of the
        recent resizes, else the least of the recent starts, else ``Tunables.default_eps``.

        A start also pays for the trials starting beside it (their actors, imports and first
        iterations compete for the node's CPUs); a resize restarts one trial, so the least
        contended start is the closest to it, until a resize measures its own cost."""
        if self.fixed_eps is not None:
            return self.fixed_eps
        if self.eps_samples:
            return statistics.median(self.eps_samples)
        if self.start_samples:
            return min(self.start_samples)
        return self._tunables.default_eps

    def slowdown(self, width: float | None, rec: TrialRecord | None = None) -> float:
        """``f_i(w)`` under the trial's ``alpha_i``, ``beta_i`` (the prior's without a trial;
        1 when not running)."""
        if not width:
            return 1.0
        if rec is None:
            return slowdown(width, self.prior_alpha, self.prior_beta)
        return slowdown(width, self.alpha_of(rec), self.beta_of(rec))

    def alpha_of(self, rec: TrialRecord) -> float:
        """``alpha_i``: the trial's own packing overhead shrunk towards ``fresh_alpha``."""
        return _shrunk(self.fresh_alpha, rec.own_alpha if self.refine else None,
                       self._tunables.prior_weight)

    def beta_of(self, rec: TrialRecord) -> float:
        """``beta_i``: the trial's own scaling overhead shrunk towards the prior."""
        return _shrunk(self.prior_beta, rec.own_beta if self.refine else None,
                       self._tunables.prior_weight)

    def observe(self, rec: TrialRecord, dt: float | None, now: float,
                width: float | None = None, clean: bool = True,
                exposure: float | None = None) -> bool:
        """Take in a result's ``time_this_iter_s``; True when it was the trial's first sample
        or its first at this width (a new ``alpha_i``/``beta_i``: its group is planned again).

        ``width``: the width the iteration ran at in effect (``1/k`` for ``k`` trials that
        computed on its GPU all along, see ``_residency``; ``None``: the width it runs at);
        not ``clean`` when who computed beside it changed during it: the sample then counts at
        its share for its iteration time, not for its ``alpha_i``. ``exposure``: how many
        other trials computed beside it on its GPU, on average over the iteration (``None``:
        not on one GPU); the trial's first such iteration, then its second, is its sample
        for ``packing_estimate``.

        The first result after a resize measures ``eps`` instead (the time since the resize
        decision less that result's own ``time_this_iter_s``); the first of another start
        measures what a start costs the same way (``eps`` until a resize is measured), and
        as a sample (warm-up and all) it counts only if the trial has none yet. The first
        result at a width the trial never ran at is also a sample.
        """
        width = rec.actual if width is None else width
        if rec.resize_at is not None:
            # The iteration it ran at the new shape is its own (``dt``), not the restart: a
            # gang slower than predicted must not inflate ``eps`` (it would block undoing it).
            expected = (float(dt) if dt is not None
                        else self.iteration_time(rec) * self.slowdown(rec.actual, rec))
            self.eps_samples.append(max(0.0, now - rec.resize_at - expected))
            self._store.update(rec, resize_at=None)
            if dt is None or not width or not clean or width in rec.raw:
                return False
            # Its first iteration ever at this width (a probe) counts at once, warm-up and all
            # (pessimistic for the new width), so that a failed probe is undone a result sooner.
        else:
            if rec.fresh_start and dt is not None and rec.shapes and rec.shapes[-1][1]:
                # A start: the time since the trial was handed its shape, less its iteration.
                self.start_samples.append(max(0.0, now - rec.shapes[-1][0] - float(dt)))
            if dt is None or not width or (rec.fresh_start and rec.samples):
                return False
        if exposure is not None and dt > 0:
            self._expose(rec, exposure, float(dt))
        if not clean:
            width = rec.actual
        new_width = self._store.add_sample(rec, float(dt), width, self._tunables.samples_kept,
                                           raw=clean)
        few = self._tunables.refine_samples
        if clean and len(rec.raw) > 1 and (new_width or len(rec.raw[width]) <= few):
            self.refine_overheads(rec)
        self.track(rec)
        return len(rec.samples) == 1 or new_width  # a first sample, or one at a new width

    def refine_overheads(self, rec: TrialRecord) -> None:
        """The trial's own ``alpha_i``/``beta_i`` from its times at two widths or more.

        Against its one-GPU time ``T_1`` when it has one: a share ``1/p`` gives
        ``alpha_i = (T_p / T_1) ** (1 / (p - 1))``, a gang of ``w`` GPUs gives
        ``beta_i = (w T_w / T_1) ** (1 / (w - 1))``; without ``T_1``, consecutive widths of the
        same kind. Each estimate carries how many samples it rests on (for the shrinkage).
        Only this trial's estimate is recomputed (results arrive constantly; new widths are rare).
        """
        times = {w: (statistics.median(v), len(v)) for w, v in rec.raw.items() if v}
        one = next((tn for w, tn in times.items() if abs(w - 1.0) < WIDTH_TOL), None)
        packed = sorted((round(1 / w), tn) for w, tn in times.items() if w < 1 - WIDTH_TOL)
        gangs = sorted((round(w), tn) for w, tn in times.items() if w > 1 + WIDTH_TOL)
        if one is not None:
            packed = [(1, one)] + packed
            gangs = [(1, one)] + gangs
        alphas = [((tq / tp) ** (1.0 / (q - p)), min(n, m))
                  for (p, (tp, n)), (q, (tq, m)) in zip(packed, packed[1:], strict=False)]
        betas = [((v * tv / (w * tw)) ** (1.0 / (v - w)), min(n, m))
                 for (w, (tw, n)), (v, (tv, m)) in zip(gangs, gangs[1:], strict=False)]
        if alphas:
            own = (max(1.0, statistics.median(a for a, _ in alphas)), sum(n for _, n in alphas))
            fresh = self.fresh_alpha
            self._store.update(rec, own_alpha=own)
            self.alpha = statistics.median(self._store.own_alphas.values())
            self._posterior = None
            if self.fresh_alpha != fresh:  # every trial's alpha_i rests on it: times too
                for other in self._store.records.values():
                    if other.samples and other is not rec:
                        self.track(other)
        if betas:
            own = (max(1.0, statistics.median(b for b, _ in betas)), sum(n for _, n in betas))
            self._store.update(rec, own_beta=own)
            self.beta = statistics.median(self._store.own_betas.values())
        self.track(rec)  # one-GPU times depend on alpha and beta

    def sampled(self, rec: TrialRecord) -> bool:
        """Whether ``packing_estimate`` has all it takes from the trial (its second
        iteration on one GPU): a packing probe then has measured what it was packed for."""
        seen = self._exposed.get(rec.trial_id)
        return seen is not None and seen[2] > 1

    def _expose(self, rec: TrialRecord, exposure: float, dt: float) -> None:
        """Take a trial's iteration at ``exposure`` into ``packing_estimate``: its first, then
        its second in its place (the first of a start carries its warm-up, which packing does
        not slow). Every trial counts, also once the estimate decides packing: an early
        decision on a few trials is then revised by the many that follow. The mean one-GPU
        time of measured trials follows a changed estimate as each trial's samples change
        (each new sample would otherwise revisit every trial)."""
        if self.alpha_given or not self.refine or self.sampled(rec):
            return  # packing_estimate is the prior then, whatever the samples
        seen = self._exposed.get(rec.trial_id)
        if seen is None:
            self._covariates.add(rec.trial_id, config_numbers(getattr(rec.trial, "config", None)))
        self._exposed[rec.trial_id] = (exposure, dt, 1 if seen is None else 2)
        self._posterior = None

    def iteration_time(self, rec: TrialRecord) -> float:
        """Median one-GPU seconds per iteration: its own one-GPU times when it has some, else
        ``time_this_iter_s / f_i(w)`` at the widths it ran; unmeasured trials get the mean of
        the measured ones (computed once per change), else ``default_iteration_time``."""
        solo = rec.raw.get(1.0)
        if solo:
            return statistics.median(solo)
        if rec.samples:
            alpha, beta = self.alpha_of(rec), self.beta_of(rec)
            inputs = (alpha, beta, tuple(rec.samples))
            cached = self._medians.get(rec.trial_id)
            if cached is not None and cached[0] == inputs:
                return cached[1]
            # alpha_i, beta_i once, not per sample (each is a shrinkage in log space)
            median = statistics.median(t / slowdown(w, alpha, beta) for t, w in rec.samples)
            self._medians[rec.trial_id] = (inputs, median)
            return median
        if self._mean_time is None:
            self._mean_time = (self._sum / (len(self._times) << _EXACT_BITS) if self._times
                               else self.default_iteration_time)
        return self._mean_time

    def track(self, rec: TrialRecord) -> None:
        """Count a record just filed, or whose samples changed, in the mean one-GPU time of
        measured trials: the trial's time before (that of the record ``rec`` replaces, if any)
        comes out, its current one goes in (none without samples)."""
        before = self._times.pop(rec.trial_id, None)
        if before is not None:
            self._sum -= _exact(before)
        if rec.samples:
            now = self._times[rec.trial_id] = self.iteration_time(rec)
            self._sum += _exact(now)
        self._mean_time = None

    def own_inputs(self, rec: TrialRecord) -> bool:
        """Whether the trial's ``iteration_time`` and ``memory`` rest on its own record only
        (not on other trials' measurements): they then change only when its record does (a
        result sets its ``iteration``; its ``last_result`` changes only with a result)."""
        return bool(rec.raw.get(1.0) or rec.samples) and self.own_memory(rec)

    def own_memory(self, rec: TrialRecord) -> bool:
        """Whether ``memory`` of the trial rests on its own record only (or on no trial)."""
        return (self.gpu_memory is None or self.trial_memory is not None
                or _peak_gb(rec.trial) is not None)

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
        known = [p for r in self._store.records.values() if (p := _peak_gb(r.trial)) is not None]
        return max(known) if known else self.gpu_memory


    def measured_memory(self, trial: Any) -> float | None:
        """GB ``trial`` is known to need (``memory``); ``None`` where nothing is measured."""
        need = self.memory(rec) if (rec := self._store.get(trial.trial_id)) else None
        return None if need == self.gpu_memory else need

#: Every finite float is an integer number of 2**-1074.
_EXACT_BITS = 1074


def _exact(x: float) -> int:
    """``x`` in units of ``2**-_EXACT_BITS``, exactly."""
    num, den = x.as_integer_ratio()  # den is a power of two, at most 2**1074
    return num << (_EXACT_BITS - den.bit_length() + 1)


def _shrunk(prior: float, own: tuple[float, int] | None, weight: float) -> float:
    """``own`` (estimate, samples) shrunk towards ``prior`` in log space (the prior worth
    ``weight`` samples); the prior alone when the trial has no estimate."""
    if own is None:
        return prior
    value, n = own
    w = n / (n + weight)
    return max(1.0, math.exp(w * math.log(value) + (1 - w) * math.log(prior)))


def _peak_gb(trial: Any) -> float | None:
    last = trial.last_result or {}
    peak = last.get("fluid_peak_gpu_memory")
    return float(peak) / 2**30 if peak else None
