"""The TrialGroup abstraction and the one call algorithm authors add.

A TrialGroup is a set of trials with a training budget each, the unit that Fluid sizes so that
it finishes as soon as possible. A scheduler declares a group where its algorithm creates one:
the trials of a grid, the live trials of a HyperBand rung, a PBT population. With
``TrialGroupMixin`` that is one call::

    class MyScheduler(TrialGroupMixin, FIFOScheduler):
        def on_trial_add(self, tune_controller, trial):
            super().on_trial_add(tune_controller, trial)
            self.new_trial_group([trial], until=10)

Budgets are in the algorithm's own unit, its ``time_attr`` (``training_iteration`` unless
told otherwise; ``time_total_s``, or any increasing result key), fractional values included.
Fluid sizes trials in iterations, so a group also carries each budget as the
``training_iteration`` it is expected to end at (estimated from the trial's reported progress
when the unit is another one).

Outside Fluid the call does nothing, so an adapted scheduler still runs under plain Tune. Under
Fluid the executor asks the scheduler to keep the groups it declares
(``collect_trial_groups``) and takes them after each call into the scheduler
(``take_trial_groups``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ray.tune.experiment import Trial

from fluid.core.tolerances import ITERATION_TOL

#: The unit of budgets unless a scheduler says otherwise.
ITERATIONS = "training_iteration"


@dataclass
class TrialGroup:
    """Trials and, per trial, the ``training_iteration`` its budget runs to.

    Attributes:
        trials: the trials of the group.
        until: ``{trial_id: training_iteration}`` at which each trial's budget ends; ``None``
            while it cannot be estimated yet (a budget in another unit, before the trial's
            first result).
        name: a label for progress output (e.g. ``"bracket 0 rung 1"``).
        time_attr: the unit of ``budget`` (the algorithm's ``time_attr``).
        budget: ``{trial_id: value of time_attr}`` at which each trial's budget ends, as the
            algorithm gave it (may be fractional).
        priority: ``{trial_id: int}``, what the algorithm waits on: its rung (0: the first
            rung, a fresh trial; > 0: promoted, a survivor a synchronous rung waits on). A
            trial of priority > 0 runs alone, never slower than on one GPU, unless packing
            is measured free for it (its own ``alpha_i``, else the experiment's measured
            ``alpha``, below ``Tunables.priority_alpha``); higher priorities start first.
            Missing trials have priority 0.
    """

    trials: list[Trial]
    until: dict[str, int | None] = field(default_factory=dict)
    name: str = ""
    time_attr: str = ITERATIONS
    budget: dict[str, float] = field(default_factory=dict)
    priority: dict[str, int] = field(default_factory=dict)
    keep_shape: bool = False

    @classmethod
    def of(
        cls,
        trials: Iterable[Trial],
        until: float | Mapping[str, float],
        name: str = "",
        time_attr: str = ITERATIONS,
        progress: Mapping[str, Mapping[str, Any]] | None = None,
        priority: int | Mapping[str, int] = 0,
        keep_shape: bool = False,
    ) -> TrialGroup:
        """Build a group.

        Args:
            trials: the trials.
            until: the budget in ``time_attr`` units, one for all or a mapping by trial id;
                finite and > 0.
            name: the group's label.
            time_attr: the unit of ``until``.
            progress: the latest result of a trial where ``trial.last_result`` is not yet
                updated (inside ``on_trial_result``); used to convert a budget in another unit
                to iterations.
            priority: one for all or a mapping by trial id (see the class); ``>= 0``.
            keep_shape: the members keep plain Tune's shape (see the class).
        """
        trials = list(trials)
        if isinstance(until, Mapping):
            missing = [t.trial_id for t in trials if t.trial_id not in until]
            if missing:
                raise ValueError(f"until has no budget for trials {missing}")
            budgets = {t.trial_id: until[t.trial_id] for t in trials}
        else:
            budgets = {t.trial_id: until for t in trials}
        bad = {k: v for k, v in budgets.items() if not _positive(v)}
        if bad:
            raise ValueError(f"until must be a finite number > 0 of {time_attr}, got {bad}")
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(f"time_attr must be a result key (a non-empty str), got {time_attr!r}")
        progress = progress or {}
        iterations = {
            t.trial_id: iteration_of(
                budgets[t.trial_id], time_attr, progress.get(t.trial_id, t.last_result)
            )
            for t in trials
        }
        prios = {t.trial_id: int(priority.get(t.trial_id, 0) if isinstance(priority, Mapping)
                                 else priority) for t in trials}
        if any(p < 0 for p in prios.values()):
            raise ValueError(f"priority must be >= 0, got {prios}")
        return cls(trials, iterations, name, time_attr, {k: float(v) for k, v in budgets.items()},
                   prios, keep_shape)


def _positive(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def iteration_of(budget: float, time_attr: str, result: Mapping[str, Any] | None) -> int | None:
    """The ``training_iteration`` at which a trial reaches ``budget`` units of ``time_attr``.

    In iterations, the first whole iteration at or past ``budget``. In another unit, estimated
    from the trial's average progress per iteration so far (``result[time_attr] /
    result["training_iteration"]``); ``None`` before the trial has reported progress.
    """
    if time_attr == ITERATIONS:
        return max(1, math.ceil(budget - ITERATION_TOL))
    result = result or {}
    done, iteration = result.get(time_attr), result.get(ITERATIONS)
    if not (_positive(done) and _positive(iteration)):
        return None
    return max(1, math.ceil(budget * iteration / done - ITERATION_TOL))


class TrialGroupMixin:
    """Gives a Tune scheduler ``new_trial_group``, the one call that declares a TrialGroup.

    The groups declared are kept only once ``collect_trial_groups`` was called (by the
    ``FluidExecutor`` that wraps the scheduler), until ``take_trial_groups`` takes them.
    """

    _declared: list[TrialGroup] | None = None

    def collect_trial_groups(self) -> None:
        """Keep the groups declared from now on for ``take_trial_groups``."""
        if self._declared is None:
            self._declared = []

    def take_trial_groups(self) -> list[TrialGroup]:
        """The groups declared since the last call, oldest first (none unless collected)."""
        declared = self._declared or []
        if declared:
            self._declared = []
        return declared

    def new_trial_group(
        self,
        trials: Iterable[Trial],
        until: float | Mapping[str, float],
        name: str = "",
        *,
        time_attr: str = ITERATIONS,
        progress: Mapping[str, Mapping[str, Any]] | None = None,
        priority: int | Mapping[str, int] = 0,
        keep_shape: bool = False,
    ) -> TrialGroup:
        """Declare that ``trials`` form a TrialGroup, each to run to ``until`` of ``time_attr``.

        ``until`` is in the algorithm's unit (``time_attr``, iterations by default) and may be
        fractional; ``progress`` maps a trial id to a result its ``last_result`` does not hold
        yet (see :meth:`TrialGroup.of`); ``priority``:
        what the algorithm waits on, its rung; ``keep_shape``: the members keep plain Tune's
        shape (see ``TrialGroup``).
        """
        group = TrialGroup.of(trials, until, name, time_attr, progress, priority, keep_shape)
        if self._declared is not None:
            self._declared.append(group)
        return group
